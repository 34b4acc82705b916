// Thin header for CPostgres. Typed static inline wrappers live here only where Swift cannot call
// the C API directly (variadic functions, function-like macros).
#include <libpq-fe.h>
