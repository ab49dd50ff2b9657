#include "CMemoryHints.h"

#include <stdint.h>

#if defined(__linux__)
#include <sys/mman.h>
#endif

int aviary_advise_huge_pages(void *address, size_t length) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    /* Only whole 2 MiB pages inside the range can be huge; the kernel rounds nothing for us. */
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t start = ((uintptr_t)address + huge - 1) & ~(huge - 1);
    uintptr_t end = ((uintptr_t)address + length) & ~(huge - 1);
    if (end <= start) return -1;
    return madvise((void *)start, end - start, MADV_HUGEPAGE);
#else
    (void)address;
    (void)length;
    return -1;
#endif
}
