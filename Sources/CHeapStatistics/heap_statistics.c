#include "heap_statistics.h"
#include <malloc.h>

size_t tokenrelay_heap_bytes_in_use(void) { return mallinfo2().uordblks; }
