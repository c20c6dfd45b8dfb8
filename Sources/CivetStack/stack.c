// Debian builds civetweb 1.15 with USE_STACK_SIZE=102400: every civetweb thread (the master and each worker that
// runs our request handlers) gets a 100 KiB stack. Swift code needs more than that, in debug builds especially
// (large frames; the runtime instantiating generic metadata on first use), and a request handler that runs out
// of stack crashes the whole server.
//
// civetweb sets that size with pthread_attr_setstacksize just before pthread_create, and has no run-time option
// for it. This definition, linked into every binary that contains CloudletServer, is found before glibc's by
// libcivetweb's symbol lookup. For calls from libcivetweb it raises the size to CIVET_MIN_STACK; every other
// caller gets glibc's function unchanged.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include "CivetStack.h"

int pthread_attr_setstacksize(pthread_attr_t *attr, size_t size) {
    static int (*real)(pthread_attr_t *, size_t);
    if (real == NULL) real = (int (*)(pthread_attr_t *, size_t))dlsym(RTLD_NEXT, "pthread_attr_setstacksize");
    if (size < CIVET_MIN_STACK) {
        Dl_info caller;
        if (dladdr(__builtin_return_address(0), &caller) && caller.dli_fname && strstr(caller.dli_fname, "libcivetweb")) {
            size = CIVET_MIN_STACK;
        }
    }
    return real(attr, size);
}

size_t civet_min_stack_size(void) { return CIVET_MIN_STACK; }

size_t civet_current_thread_stack_size(void) {
    pthread_attr_t attr;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        pthread_attr_getstacksize(&attr, &size);
        pthread_attr_destroy(&attr);
    }
    return size;
}
