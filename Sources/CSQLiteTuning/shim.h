#include <sqlite3.h>
/* sqlite3_config is variadic, so Swift cannot call it: one wrapper per setting used.
   SQLITE_CONFIG_MEMSTATUS off: SQLite stops counting every allocation for
   sqlite3_memory_used() under a process-wide mutex (Debian's build keeps the count on and
   has no lookaside allocator, so each row a night writes takes that mutex several times).
   It must come before SQLite is initialized; afterwards it returns SQLITE_MISUSE and
   changes nothing. */
static inline int iap_sqlite_memstatus_off(void) { return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); }
