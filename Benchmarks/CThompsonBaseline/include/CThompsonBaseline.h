#ifndef AVIARY_CTHOMPSONBASELINE_H
#define AVIARY_CTHOMPSONBASELINE_H

#include <stdint.h>

/* A two-variant Beta-Bernoulli Thompson-sampling loop written directly against GSL: the floor
   that the Swift allocator's choose() + record() is measured against. Each step draws one
   gsl_ran_beta per variant from an mt19937 generator, shows the variant with the larger draw,
   draws its outcome from a xoshiro256** Bernoulli trial and updates that variant's alpha/beta. */

typedef struct cthompson_baseline cthompson_baseline;

/* Creates a baseline with the uniform Beta(1, 1) prior on both variants.
   beta_seed seeds mt19937 exactly as Aviary's GSLRandom does (its 64 bits folded to 32), and
   outcome_seed seeds xoshiro256** exactly as Aviary's Xoshiro256 does (SplitMix64 expansion),
   so given the same seeds the C and Swift loops make the same draws and the same decisions.
   conversion_a and conversion_b are the variants' true conversion rates, in [0, 1].
   Returns NULL if GSL cannot allocate its generator. */
cthompson_baseline *cthompson_baseline_create(uint64_t beta_seed, uint64_t outcome_seed,
                                              double conversion_a, double conversion_b);

void cthompson_baseline_destroy(cthompson_baseline *baseline);

/* Runs `steps` Thompson steps; returns the number of times variant 1 was shown, so the work
   cannot be optimised away. */
uint64_t cthompson_baseline_run(cthompson_baseline *baseline, uint64_t steps);

/* Takes `count` gsl_ran_beta(a, b) draws from the baseline's generator and returns their sum:
   the cost of one Beta draw with no wrapper around it. */
double cthompson_baseline_beta_draws(cthompson_baseline *baseline, uint64_t count, double a, double b);

#endif
