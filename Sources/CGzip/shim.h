#ifndef CGZIP_SHIM_H
#define CGZIP_SHIM_H

#include <zlib.h>

// deflateInit2 and inflateInit2 are macros, which Swift does not import.
static inline int CGzip_deflateInit2(z_streamp stream, int level, int windowBits, int memLevel) {
    return deflateInit2(stream, level, Z_DEFLATED, windowBits, memLevel, Z_DEFAULT_STRATEGY);
}

static inline int CGzip_inflateInit2(z_streamp stream, int windowBits) {
    return inflateInit2(stream, windowBits);
}

#endif
