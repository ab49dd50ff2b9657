#ifndef AVIARY_CGSL_SHIM_H
#define AVIARY_CGSL_SHIM_H

#include <gsl/gsl_errno.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_sf_gamma.h>

/* GSL's generator types are mutable C globals, which Swift 6 refuses to read
   from a nonisolated context; these accessors return them by value. */
static inline const gsl_rng_type *cgsl_rng_mt19937(void) { return gsl_rng_mt19937; }

#endif
