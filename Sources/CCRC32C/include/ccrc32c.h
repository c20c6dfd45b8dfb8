#ifndef CCRC32C_H
#define CCRC32C_H

#include <stddef.h>
#include <stdint.h>

/// Whether this CPU has CRC-32C instructions (x86-64 SSE 4.2, or the ARMv8 CRC extension).
int ccrc32c_hardware_available(void);

/// CRC-32C of `length` bytes at `data`, continuing from `crc` (0 to start; the result of a previous call to go on),
/// with the CPU's instructions. Only call it when `ccrc32c_hardware_available()` says so.
uint32_t ccrc32c_hardware(uint32_t crc, const void *data, size_t length);

#endif
