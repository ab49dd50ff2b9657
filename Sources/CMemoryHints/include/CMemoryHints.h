#ifndef AVIARY_CMEMORYHINTS_H
#define AVIARY_CMEMORYHINTS_H

#include <stddef.h>

/* Swift has no prefetch instruction of its own. The fleet asks for the state of the devices it
   will run next while it runs the current one, so that their cache misses overlap. */
static inline void aviary_prefetch_for_write(const void *address) {
    __builtin_prefetch(address, 1, 3);
}

/* Asks the kernel to back [address, address + length) with huge pages where it can (Linux,
   transparent huge pages in "madvise" mode). A million devices' state spans hundreds of
   megabytes touched at random: with 4 KiB pages nearly every access misses the TLB, and first
   touches cost a page fault each. Returns 0, or -1 where unsupported or refused. */
int aviary_advise_huge_pages(void *address, size_t length);

#endif
