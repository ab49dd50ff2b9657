/*
 * An independent reference for delayed feedback: Thompson sampling and UCB1 on a Bernoulli
 * bandit whose outcomes reach the policy in batches.
 *
 * Written from the papers, not from Aviary's code, with its own random numbers (PCG32, O'Neill
 * 2014; normals by the polar method; gammas by Marsaglia and Tsang 2000; Beta as X / (X + Y)):
 * - Thompson sampling with Beta(1, 1) priors (Thompson 1933; Chapelle and Li 2011): one
 *   posterior draw per arm per view, the largest shown;
 * - UCB1 (Auer, Cesa-Bianchi and Fischer 2002): each arm once first, then the largest
 *   mean + sqrt(2 ln n / n_i).
 * Both decide every view and learn a batch's outcomes only when the batch of `batch` views ends.
 * Ties (unplayed arms, equal bounds) are broken uniformly at random. Regret is expected regret:
 * the sum over views of (best rate - rate shown).
 *
 * Usage: delayed_bandit POLICY VIEWS BATCH REPLICATES SEED RATE...
 *   POLICY is thompson or ucb1. Prints: mean_regret standard_error
 *   VIEWS may be FIRST:LAST (LAST a power of ten times FIRST); then the program prints the
 *   regret's growth per decade of views between the two, from the same runs, and its standard
 *   error: mean_slope standard_error.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { uint64_t state, inc; } pcg32;

static uint32_t pcg32_next(pcg32 *g) {
    uint64_t old = g->state;
    g->state = old * 6364136223846793005ULL + g->inc;
    uint32_t xorshifted = (uint32_t)(((old >> 18u) ^ old) >> 27u);
    uint32_t rot = (uint32_t)(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((-rot) & 31));
}

static void pcg32_seed(pcg32 *g, uint64_t seed, uint64_t stream) {
    g->state = 0;
    g->inc = (stream << 1u) | 1u;
    pcg32_next(g);
    g->state += seed;
    pcg32_next(g);
}

/* A uniform double in [0, 1) from 53 random bits. */
static double uniform(pcg32 *g) {
    uint64_t bits = ((uint64_t)pcg32_next(g) << 21) ^ (uint64_t)pcg32_next(g);
    return (double)(bits & ((1ULL << 53) - 1)) * 0x1.0p-53;
}

static double normal(pcg32 *g) {
    double u, v, s;
    do {
        u = 2 * uniform(g) - 1;
        v = 2 * uniform(g) - 1;
        s = u * u + v * v;
    } while (s >= 1 || s == 0);
    return u * sqrt(-2 * log(s) / s);
}

/* Gamma(shape, 1) for shape >= 1 (Marsaglia and Tsang). */
static double gamma_variate(pcg32 *g, double shape) {
    double d = shape - 1.0 / 3, c = 1 / sqrt(9 * d);
    for (;;) {
        double x, v;
        do {
            x = normal(g);
            v = 1 + c * x;
        } while (v <= 0);
        v = v * v * v;
        double u = uniform(g);
        if (u < 1 - 0.0331 * x * x * x * x) return d * v;
        if (log(u) < 0.5 * x * x + d * (1 - v + log(v))) return d * v;
    }
}

static double beta_variate(pcg32 *g, double a, double b) {
    double x = gamma_variate(g, a), y = gamma_variate(g, b);
    return x / (x + y);
}

#define MAX_ARMS 64

/* Expected regret after `views` views; also after `checkpoint` views, in *at_checkpoint. */
static double run(int thompson, const double *rates, int k, long views, long batch, pcg32 *g, long checkpoint, double *at_checkpoint) {
    long n[MAX_ARMS] = {0}, s[MAX_ARMS] = {0}, pn[MAX_ARMS] = {0}, ps[MAX_ARMS] = {0};
    double best = rates[0];
    for (int i = 1; i < k; i++) if (rates[i] > best) best = rates[i];
    double regret = 0;
    long total = 0;
    for (long t = 0; t < views; t++) {
        int arm = 0;
        if (thompson) {
            double top = -1;
            for (int i = 0; i < k; i++) {
                double draw = beta_variate(g, s[i] + 1.0, (n[i] - s[i]) + 1.0);
                if (draw > top) { top = draw; arm = i; }
            }
        } else {
            /* Reservoir sampling over the tied maxima; an unplayed arm's bound is infinite. */
            double top = -INFINITY;
            int ties = 0;
            for (int i = 0; i < k; i++) {
                double bound = n[i] == 0 ? INFINITY : (double)s[i] / n[i] + sqrt(2 * log((double)total) / n[i]);
                if (bound > top) { top = bound; arm = i; ties = 1; }
                else if (bound == top) { ties++; if (uniform(g) * ties < 1) arm = i; }
            }
        }
        regret += best - rates[arm];
        if (t + 1 == checkpoint) *at_checkpoint = regret;
        pn[arm]++;
        if (uniform(g) < rates[arm]) ps[arm]++;
        if ((t + 1) % batch == 0 || t + 1 == views) {
            for (int i = 0; i < k; i++) {
                n[i] += pn[i]; s[i] += ps[i]; total += pn[i];
                pn[i] = ps[i] = 0;
            }
        }
    }
    return regret;
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: %s thompson|ucb1 VIEWS BATCH REPLICATES SEED RATE...\n", argv[0]);
        return 2;
    }
    int thompson = strcmp(argv[1], "thompson") == 0;
    if (!thompson && strcmp(argv[1], "ucb1") != 0) { fprintf(stderr, "unknown policy %s\n", argv[1]); return 2; }
    long first = 0, views = atol(argv[2]), batch = atol(argv[3]);
    const char *colon = strchr(argv[2], ':');
    if (colon) {
        first = atol(argv[2]);
        views = atol(colon + 1);
        if (first < 1 || views <= first) { fprintf(stderr, "bad views range %s\n", argv[2]); return 2; }
    }
    int replicates = atoi(argv[4]);
    uint64_t seed = strtoull(argv[5], NULL, 10);
    int k = argc - 6;
    if (k > MAX_ARMS || batch < 1 || replicates < 2) { fprintf(stderr, "bad arguments\n"); return 2; }
    double rates[MAX_ARMS];
    for (int i = 0; i < k; i++) rates[i] = atof(argv[6 + i]);
    double sum = 0, sum2 = 0;
    for (int r = 0; r < replicates; r++) {
        pcg32 g;
        pcg32_seed(&g, seed, (uint64_t)r + 1);
        double early = 0;
        double x = run(thompson, rates, k, views, batch, &g, first, &early);
        if (first) x = (x - early) / log10((double)views / first);
        sum += x;
        sum2 += x * x;
    }
    double mean = sum / replicates;
    double variance = (sum2 - replicates * mean * mean) / (replicates - 1);
    printf("%.6f %.6f\n", mean, sqrt(variance / replicates));
    return 0;
}
