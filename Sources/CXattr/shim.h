/* Extended attributes (sys/xattr.h, not in Swift's Glibc module): a report file written aside
   takes the POSIX default ACL of the folder it is renamed into, as a file created there would. */
#include <sys/types.h>
#if defined(__linux__)
#include <sys/xattr.h>
static inline ssize_t iap_getxattr(const char *path, const char *name, void *value, size_t size) {
    return getxattr(path, name, value, size);
}
static inline int iap_fsetxattr(int fd, const char *name, const void *value, size_t size) {
    return fsetxattr(fd, name, value, size, 0);
}
static inline int iap_setxattr(const char *path, const char *name, const void *value, size_t size) {
    return setxattr(path, name, value, size, 0);
}
#else
#include <errno.h>
static inline ssize_t iap_getxattr(const char *path, const char *name, void *value, size_t size) {
    (void)path; (void)name; (void)value; (void)size; errno = ENOTSUP; return -1;
}
static inline int iap_fsetxattr(int fd, const char *name, const void *value, size_t size) {
    (void)fd; (void)name; (void)value; (void)size; errno = ENOTSUP; return -1;
}
static inline int iap_setxattr(const char *path, const char *name, const void *value, size_t size) {
    (void)path; (void)name; (void)value; (void)size; errno = ENOTSUP; return -1;
}
#endif
