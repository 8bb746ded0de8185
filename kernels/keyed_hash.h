/*
 * The pieces of kernels/keyed_hash.py that more than one compiled kernel repeats bit for bit
 * (offset_scores.c, vocab_rows.c): SplitMix64's finaliser, the Feistel round, float bits, and
 * exact_log's polynomial. Included, not linked: each kernel's loops inline them.
 */
#ifndef EVALRUN_KEYED_HASH_H
#define EVALRUN_KEYED_HASH_H

#include <stdint.h>
#include <string.h>

#define GOLDEN 0x9E3779B97F4A7C15ULL
#define MIX_M1 0xBF58476D1CE4E5B9ULL
#define MIX_M2 0x94D049BB133111EBULL
#define SQRT_HALF 0.7071067811865476
#define LN2_HI 6.93147180369123816490e-01
#define LN2_LO 1.90821492927058770002e-10

static const uint64_t TAG_ROUNDS[4] = {0x2545F4914F6CDD1DULL, 0x7F4A7C159E3779B9ULL,
                                       0x4CF5AD432745937FULL, 0x1B873593CC9E2D51ULL};

static inline __attribute__((always_inline)) uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= MIX_M1;
    x ^= x >> 27;
    x *= MIX_M2;
    return x ^ (x >> 31);
}

static inline __attribute__((always_inline)) uint64_t double_bits(double x) {
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

static inline __attribute__((always_inline)) double bits_double(uint64_t b) {
    double x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* keyed_hash._feistel_once */
static inline __attribute__((always_inline)) uint64_t feistel_once(uint64_t seed, uint64_t x,
                                                                  int bits) {
    int hi_bits = bits / 2, lo_bits = bits - bits / 2;
    for (int r = 0; r < 4; r++) {
        uint64_t lo_mask = (1ULL << lo_bits) - 1, hi_mask = (1ULL << hi_bits) - 1;
        uint64_t hi = x >> lo_bits, lo = x & lo_mask;
        uint64_t f = mix64(seed ^ TAG_ROUNDS[r] ^ (lo * GOLDEN)) & hi_mask;
        x = (lo << hi_bits) | (hi ^ f);
        int t = hi_bits;
        hi_bits = lo_bits;
        lo_bits = t;
    }
    return x;
}

/* exact_log's value from frexp's mantissa m (in [sqrt(1/2), sqrt(2)) after its adjustment)
 * and exponent e: numpy's operations in numpy's order (built with -ffp-contract=off) */
static inline __attribute__((always_inline)) double log_of_frexp(double m, double e) {
    double s = (m - 1.0) / (m + 1.0);
    double z = s * s;
    double poly = z * (1.0 / 21.0);
    poly += 1.0 / 19.0;
    poly *= z; poly += 1.0 / 17.0;
    poly *= z; poly += 1.0 / 15.0;
    poly *= z; poly += 1.0 / 13.0;
    poly *= z; poly += 1.0 / 11.0;
    poly *= z; poly += 1.0 / 9.0;
    poly *= z; poly += 1.0 / 7.0;
    poly *= z; poly += 1.0 / 5.0;
    poly *= z; poly += 1.0 / 3.0;
    poly *= z; poly += 1.0 / 1.0;
    double log_m = 2.0 * s * poly;
    return (e * LN2_LO + log_m) + e * LN2_HI;
}

#endif
