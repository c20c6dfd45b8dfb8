// CRC-32C with the CPU's instructions: SSE 4.2 `crc32` on x86-64, the CRC extension on ARMv8. The Swift side
// (CRC32C in CloudletCore) keeps the table-driven version for other CPUs and tests the two equal.
#include "ccrc32c.h"

#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>

int ccrc32c_hardware_available(void) { return __builtin_cpu_supports("sse4.2"); }

__attribute__((target("sse4.2"))) uint32_t ccrc32c_hardware(uint32_t crc, const void *data, size_t length) {
    const unsigned char *p = data;
    uint64_t c = ~crc;
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = _mm_crc32_u64(c, word);
        p += 8;
        length -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (length > 0) {
        c32 = _mm_crc32_u8(c32, *p++);
        length--;
    }
    return ~c32;
}

#elif defined(__aarch64__)
#include <arm_acle.h>
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif

int ccrc32c_hardware_available(void) { return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0; }

__attribute__((target("crc"))) uint32_t ccrc32c_hardware(uint32_t crc, const void *data, size_t length) {
    const unsigned char *p = data;
    uint32_t c = ~crc;
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = __crc32cd(c, word);
        p += 8;
        length -= 8;
    }
    while (length > 0) {
        c = __crc32cb(c, *p++);
        length--;
    }
    return ~c;
}

#else
int ccrc32c_hardware_available(void) { return 0; }
uint32_t ccrc32c_hardware(uint32_t crc, const void *data, size_t length) {
    (void)data;
    (void)length;
    return crc;
}
#endif
