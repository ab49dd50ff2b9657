#ifndef AVIARY_CPREFETCH_H
#define AVIARY_CPREFETCH_H

/* Swift has no prefetch instruction of its own. The fleet asks for the state of the devices it
   will run next while it runs the current one, so that their cache misses overlap. */
static inline void aviary_prefetch_for_write(const void *address) {
    __builtin_prefetch(address, 1, 3);
}

#endif
