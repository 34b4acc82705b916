#ifndef TOKENRELAY_HEAP_STATISTICS_H
#define TOKENRELAY_HEAP_STATISTICS_H
#include <stddef.h>

/// Bytes the process's malloc has handed out and not yet had back, over all arenas and
/// including the chunks it mapped on their own (glibc's mallinfo2(): uordblks + hblkhd; Swift's
/// Glibc module does not import mallinfo2). For tests that check a cache's byte accounting
/// against what its entries really allocate.
size_t tokenrelay_heap_bytes_in_use(void);

#endif
