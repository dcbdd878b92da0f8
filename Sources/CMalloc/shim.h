/* stdlib.h first: on glibc it includes features.h, which defines __GLIBC__. */
#include <stdlib.h>
#if defined(__GLIBC__)
#include <malloc.h>
/* glibc's malloc_trim: hands the free memory of every arena back to the system. */
static inline int iap_malloc_trim(size_t pad) { return malloc_trim(pad); }
static inline int iap_malloc_trim_available(void) { return 1; }
#else
/* Elsewhere (macOS, musl) there is nothing to trim this way. */
static inline int iap_malloc_trim(size_t pad) { (void)pad; return 0; }
static inline int iap_malloc_trim_available(void) { return 0; }
#endif
