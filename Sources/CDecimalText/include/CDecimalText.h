#ifndef AVIARY_CDECIMALTEXT_H
#define AVIARY_CDECIMALTEXT_H

#include <stddef.h>

/* Writes `value` with `places` digits after the point into `buffer` (at most `size` bytes,
   terminated), as printf's "%.*f" does in the C locale: the exact binary value rounded half to
   even. Returns the length of the whole text, which is `size` or more when it did not fit.

   Reports write hundreds of thousands of numbers. Through Foundation's String(format:) each
   cost a format string, a CFString, an argument list and a bridge back: five times the work
   of the C library's own formatting, which CoreFoundation calls in the end anyway, so the
   digits are the same. */
int aviary_format_fixed(char *buffer, size_t size, double value, int places);

#endif
