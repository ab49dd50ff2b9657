#include "CThompsonBaseline.h"

#include <stdlib.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_randist.h>

struct cthompson_baseline {
    gsl_rng *rng;
    uint64_t s[4];           /* xoshiro256** state for the cheap Bernoulli outcomes */
    double conversion[2];
    double alpha[2];
    double beta[2];
};

static inline uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t xoshiro_next(uint64_t s[4]) {
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

static inline double xoshiro_uniform(uint64_t s[4]) {
    return (double)(xoshiro_next(s) >> 11) * 0x1.0p-53;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

cthompson_baseline *cthompson_baseline_create(uint64_t beta_seed, uint64_t outcome_seed,
                                              double conversion_a, double conversion_b) {
    gsl_set_error_handler_off();
    cthompson_baseline *baseline = calloc(1, sizeof *baseline);
    if (baseline == NULL) return NULL;
    baseline->rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (baseline->rng == NULL) {
        free(baseline);
        return NULL;
    }
    unsigned long folded = (unsigned long)((beta_seed ^ (beta_seed >> 32)) & 0xFFFFFFFFULL);
    gsl_rng_set(baseline->rng, folded == 0 ? 4357 : folded);
    uint64_t x = outcome_seed;
    for (int i = 0; i < 4; i++) baseline->s[i] = splitmix64(&x);
    baseline->conversion[0] = conversion_a;
    baseline->conversion[1] = conversion_b;
    baseline->alpha[0] = baseline->alpha[1] = 1;
    baseline->beta[0] = baseline->beta[1] = 1;
    return baseline;
}

void cthompson_baseline_destroy(cthompson_baseline *baseline) {
    if (baseline == NULL) return;
    gsl_rng_free(baseline->rng);
    free(baseline);
}

uint64_t cthompson_baseline_run(cthompson_baseline *baseline, uint64_t steps) {
    gsl_rng *rng = baseline->rng;
    uint64_t shownB = 0;
    for (uint64_t step = 0; step < steps; step++) {
        double drawA = gsl_ran_beta(rng, baseline->alpha[0], baseline->beta[0]);
        double drawB = gsl_ran_beta(rng, baseline->alpha[1], baseline->beta[1]);
        int variant = drawB > drawA ? 1 : 0;
        int converted = xoshiro_uniform(baseline->s) < baseline->conversion[variant];
        baseline->alpha[variant] += converted;
        baseline->beta[variant] += 1 - converted;
        shownB += (uint64_t)variant;
    }
    return shownB;
}

double cthompson_baseline_beta_draws(cthompson_baseline *baseline, uint64_t count, double a, double b) {
    double sum = 0;
    for (uint64_t i = 0; i < count; i++) sum += gsl_ran_beta(baseline->rng, a, b);
    return sum;
}
