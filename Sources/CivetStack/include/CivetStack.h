#include <stddef.h>

/// The stack size civetweb's threads get instead of Debian's 100 KiB (see stack.c): 4 MiB.
#define CIVET_MIN_STACK ((size_t)4 << 20)

/// CIVET_MIN_STACK, for Swift (which cannot import the macro's cast). Referencing it also keeps stack.c linked.
size_t civet_min_stack_size(void);

/// The stack size of the calling thread (0 if unknown).
size_t civet_current_thread_stack_size(void);
