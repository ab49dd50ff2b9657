#define _GNU_SOURCE
#include "CDecimalText.h"

#include <locale.h>
#include <pthread.h>
#include <stdio.h>

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;

static void make_c_locale(void) {
    c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

int aviary_format_fixed(char *buffer, size_t size, double value, int places) {
    /* The point is a '.' whatever locale the process set: CSV cells and SVG coordinates are
       read by programs, not people. */
    pthread_once(&c_locale_once, make_c_locale);
    locale_t previous = c_locale ? uselocale(c_locale) : (locale_t)0;
    int length = snprintf(buffer, size, "%.*f", places, value);
    if (previous) uselocale(previous);
    return length;
}
