#include "heap_statistics.h"
#include <malloc.h>

// uordblks leaves out chunks malloc maps on their own (above its mmap threshold, 128 KiB at
// first: a large cache's slot array or index), which hblkhd counts.
size_t tokenrelay_heap_bytes_in_use(void) {
    struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
}
