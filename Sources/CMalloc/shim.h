#include <stddef.h>
#if defined(__GLIBC__)
#include <malloc.h>
/// glibc's malloc_trim: hands the free memory of every arena back to the system.
static inline int iap_malloc_trim(size_t pad) { return malloc_trim(pad); }
#else
/// Elsewhere (macOS, musl) there is nothing to trim this way.
static inline int iap_malloc_trim(size_t pad) { (void)pad; return 0; }
#endif
