/*
 * evalrun.kernels._vocab_rows: the vocabulary-wide keyed work of the logits processors, for
 * every row of a decoding step in one call (kernels/vocab_rows.py states the contract and
 * keeps the numpy twin of every function, which tests hold to the same bits).
 *
 * Why compiled: at each step a processor hashes its row's seed with every token of the
 * vocabulary (128,256 of them for Llama 3), and numpy spends ten passes over [V] arrays on
 * one SplitMix64 finaliser, each pass coming cold from memory after the forward pass. Here
 * a row is hashed in one pass that stays in registers, and the passes that follow read
 * what they need.
 *
 * Same bits as numpy, by construction:
 *  - integer hashing (SplitMix64's finaliser, the Feistel ranks) is exact;
 *  - every float is made by the operations numpy (or torch) performs, in the same order,
 *    each rounded to its type (IEEE basic operations and frexp); setup.py builds this file
 *    with -ffp-contract=off so that no a * b + c becomes an FMA; exact_log is the
 *    polynomial of kernels/keyed_hash.py, not libm's log;
 *  - argmax is the first maximal index, NaN counting as the largest (numpy's and torch's);
 *  - running sums add in numpy.cumsum's order (s[i] = s[i - 1] + x[i], s[0] = x[0]).
 * keyed_argmax skips the exact noise of tokens that provably cannot win (bounds read off a
 * table of the noise at 4,096 quantiles, with a wide margin for rounding): the token it
 * returns is the argmax over all tokens, as if every one had been computed.
 * Vector widths do not change results (each lane performs the same scalar operations), so
 * the builds of the loops (portable, AVX2, AVX-512, picked at load time) agree.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keyed_hash.h"

/* tokens hashed per block of keyed_argmax's first pass (their words stay in the L1 cache) */
#define BLOCK 1024
/* buckets of the noise bounds: the top 12 bits of a word */
#define BUCKET_BITS 12
#define BUCKETS (1 << BUCKET_BITS)

enum { NOISE_GUMBEL = 0, NOISE_EXP = 1 };
enum { COMBINE_F32 = 0, COMBINE_F64_OF_F32 = 1, COMBINE_F64 = 2 };

static inline __attribute__((always_inline)) uint32_t float_bits(float x) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

static inline __attribute__((always_inline)) float bits_float(uint32_t b) {
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* torch.nan_to_num(x, nan=0.0) for float32: NaN -> 0, +-inf -> the largest finite of its
 * sign (selects, so that loops over it vectorize) */
static inline __attribute__((always_inline)) float nan_to_num(float x) {
    const float big = 3.40282346638528859812e+38F;
    x = x != x ? 0.0f : x;
    x = x > big ? big : x;
    return x < -big ? -big : x;
}

/* torch's utils::CeilLog2 (1 for x <= 2), which sizes the levels of its float sums */
static inline int ceil_log2(Py_ssize_t x) {
    return x <= 2 ? 1 : 64 - __builtin_clzll((unsigned long long)(x - 1));
}

/* the inverse of feistel_once: its rounds undone last first */
static inline __attribute__((always_inline)) uint64_t feistel_back(uint64_t seed, uint64_t y,
                                                                  int bits) {
    const int h0 = bits / 2, l0 = bits - bits / 2;
    for (int r = 3; r >= 0; r--) {
        /* round r split its input into hi (h bits) and lo (l bits) and made (lo, hi ^ f) */
        int h = r % 2 ? l0 : h0, l = r % 2 ? h0 : l0;
        uint64_t h_mask = (1ULL << h) - 1;
        uint64_t lo = y >> h, t = y & h_mask;
        uint64_t f = mix64(seed ^ TAG_ROUNDS[r] ^ (lo * GOLDEN)) & h_mask;
        y = ((t ^ f) << l) | lo;
    }
    return y;
}

/* keyed_hash.exact_log, numpy's operations in numpy's order, frexp included (C's frexp is
 * what numpy's calls: 0 and -0 give a zero mantissa and exponent 0, as there) */
static double exact_log(double x) {
    int ei;
    double m = frexp(x, &ei);
    double e = (double)ei;
    if (m < SQRT_HALF) { /* numpy computes both sides of its where and keeps these */
        m = m * 2.0;
        e = e - 1.0;
    }
    return log_of_frexp(m, e);
}

/* keyed_hash.uniform: (f64(top53(h)) + 0.5) * 2**-53 (the int -> double conversion is exact) */
static inline double uniform(uint64_t h) { return ((double)(h >> 11) + 0.5) * 0x1p-53; }

/* the noise of a word: exp_gumbel's -exact_log(-exact_log(u)) or neg_log_uniform's
 * -exact_log(u) */
static inline double noise_of(uint64_t w, int noise) {
    double e = -exact_log(uniform(w));
    return noise == NOISE_GUMBEL ? -exact_log(e) : e;
}

/* the largest noise of the words of each bucket (top BUCKET_BITS bits), made at import */
static double BOUND_HI[2][BUCKETS];

static void make_bounds(void) {
    for (int k = 0; k < BUCKETS; k++) {
        /* a bucket's uniforms lie in [k / B, (k + 1) / B] and in [2**-54, 1 - 2**-54] */
        double u_lo = k ? (double)k / BUCKETS : 0x1p-54;
        double q_hi = k < BUCKETS - 1 ? (double)(BUCKETS - 1 - k) / BUCKETS : 0x1p-54; /* 1 - u_hi */
        double e_at_lo = -log(u_lo), e_at_hi = -log1p(-q_hi); /* -log u, decreasing in u */
        BOUND_HI[NOISE_EXP][k] = e_at_lo;
        BOUND_HI[NOISE_GUMBEL][k] = -log(e_at_hi); /* -log(-log u), increasing in u */
    }
    /* the top word's uniform, (2**53 - 0.5) * 2**-53, rounds to 1.0, whose noise is -0.0
     * (exp) and exact_log(-0.0)'s odd value (gumbel): the bound must cover it too */
    for (int noise = 0; noise < 2; noise++) {
        double top = noise_of(~0ULL, noise);
        if (top > BOUND_HI[noise][BUCKETS - 1]) BOUND_HI[noise][BUCKETS - 1] = top;
    }
}

/* What keyed_argmax's first pass learns of a block of tokens */
typedef struct {
    uint64_t top_w, bottom_w; /* the largest and the least word */
    int64_t top_key; /* the order key of the largest input (float32: its int32 key) */
    double top_abs;  /* the largest finite |input| */
    int odd;         /* a NaN or +inf input */
} block_t;

/* at::internal::GRAIN_SIZE: torch sums one row of this many values or more on its threads */
#define TORCH_GRAIN 32768
/* the most threads a row's sum may be split among here */
#define MAX_SPLIT 256

/* What the calls sharing one row's tournament (tournament_part) share: how many chunk sums
 * have arrived (all parts' over all layers so far) and the sums of the last two layers (a
 * part may write the next layer's while a slower one still reads this one's) */
typedef struct {
    int32_t arrived;
    int32_t abandoned;
    float buf[2][MAX_SPLIT];
} part_state_t;

/* Count this part in and wait until `target` parts have arrived: spin briefly, then give the
 * core away between looks (other jobs may want it: see evalrun/_util/threads.py); -1 after
 * 10 s without the others (a part that never came: an error, never a wrong sum) */
static int part_barrier(part_state_t *st, int32_t target) {
    __atomic_add_fetch(&st->arrived, 1, __ATOMIC_ACQ_REL);
    struct timespec start, now;
    int looks = 0;
    while (__atomic_load_n(&st->arrived, __ATOMIC_ACQUIRE) < target) {
        if (__atomic_load_n(&st->abandoned, __ATOMIC_ACQUIRE)) return -1;
        if (++looks < 2000) continue;
        sched_yield();
        if (looks == 2000) clock_gettime(CLOCK_MONOTONIC, &start);
        if ((looks & 255) == 0) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec - start.tv_sec > 10) {
                __atomic_store_n(&st->abandoned, 1, __ATOMIC_RELEASE);
                return -1;
            }
        }
    }
    return 0;
}

/* The loops, once per build variant (kernels/vocab_rows_body.h) */
typedef struct {
    const char *name;
    int byte_values; /* SynthID's tournament reads its g-values as bytes (else as floats) */
    void (*words)(uint64_t, Py_ssize_t, Py_ssize_t, uint64_t *);
    void (*green_add)(float *, Py_ssize_t, uint64_t, uint64_t, uint32_t, float);
    void (*green_mask)(uint8_t *, Py_ssize_t, uint64_t, uint64_t, uint8_t);
    void (*ranks)(uint64_t, Py_ssize_t, Py_ssize_t, uint64_t, int, uint64_t *);
    void (*tokens_at)(uint64_t, Py_ssize_t, Py_ssize_t, uint64_t, int, uint64_t *);
    void (*green_products)(const float *, Py_ssize_t, Py_ssize_t, uint64_t, uint64_t, uint32_t,
                           uint8_t *, float *, float *);
    void (*transfer)(const float *, const uint8_t *, Py_ssize_t, float, float, float, float *);
    void (*tournament_run)(float *, float *, Py_ssize_t, const uint8_t *, const uint8_t *, float);
    float (*torch_row_sum8)(const float *, Py_ssize_t, int);
    float (*torch_row_sum16)(const float *, Py_ssize_t, int);
    void (*tournament_row8)(float *, Py_ssize_t, const void *, const Py_ssize_t *, Py_ssize_t, int);
    void (*tournament_row16)(float *, Py_ssize_t, const void *, const Py_ssize_t *, Py_ssize_t,
                             int);
    int (*tournament_part8)(float *, Py_ssize_t, const void *, const Py_ssize_t *, Py_ssize_t, int,
                            int, part_state_t *);
    int (*tournament_part16)(float *, Py_ssize_t, const void *, const Py_ssize_t *, Py_ssize_t,
                             int, int, part_state_t *);
    void (*dip_weights)(const double *, Py_ssize_t, double, double *, uint8_t *);
    void (*block_f32)(uint64_t, Py_ssize_t, Py_ssize_t, const float *, uint64_t *, block_t *);
    void (*block_f64)(uint64_t, Py_ssize_t, Py_ssize_t, const double *, uint64_t *, block_t *);
    void (*flags_f32)(uint64_t, Py_ssize_t, Py_ssize_t, const float *, uint64_t, uint64_t, double,
                      uint8_t *);
    void (*flags_f64)(uint64_t, Py_ssize_t, Py_ssize_t, const double *, double, uint64_t,
                      uint64_t, double, uint8_t *);
} variant_t;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__APPLE__) && \
    !defined(VOCAB_ROWS_GENERIC)
#define HAVE_X86_VARIANTS 1
#endif

#define BODY_SUFFIX portable
#define BODY_TARGET
#include "vocab_rows_body.h"
#undef BODY_SUFFIX
#undef BODY_TARGET
#ifdef HAVE_X86_VARIANTS
#define BODY_SUFFIX avx2
#define BODY_TARGET __attribute__((target("avx2")))
#include "vocab_rows_body.h"
#undef BODY_SUFFIX
#undef BODY_TARGET
#define BODY_SUFFIX avx512
#define BODY_TARGET __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw")))
#define BODY_MASKED_SELECT 1
#include "vocab_rows_body.h"
#undef BODY_SUFFIX
#undef BODY_TARGET
#undef BODY_MASKED_SELECT
#endif

#define VARIANT(s, bytes)                                                                   \
    {#s, bytes, words_##s, green_add_##s, green_mask_##s, ranks_##s, tokens_at_##s, green_products_##s, \
     transfer_##s, tournament_run_##s, torch_row_sum8_##s, torch_row_sum16_##s,             \
     tournament_row8_##s, tournament_row16_##s, tournament_part8_##s, tournament_part16_##s, \
     dip_weights_##s,                                                                      \
     block_f32_##s, block_f64_##s, flags_f32_##s, flags_f64_##s}
static const variant_t VARIANTS[] = {
    VARIANT(portable, 0),
#ifdef HAVE_X86_VARIANTS
    VARIANT(avx2, 0),
    VARIANT(avx512, 1),
#endif
};
#define NUM_VARIANTS ((int)(sizeof VARIANTS / sizeof VARIANTS[0]))

static int runs(int v) {
#ifdef HAVE_X86_VARIANTS
    __builtin_cpu_init();
    if (v == 1) return __builtin_cpu_supports("avx2");
    if (v == 2)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
#endif
    return v == 0;
}

/* the variant to run: `want` ("", or a variant's name) or the widest the CPU runs */
static const variant_t *pick(const char *want) {
    for (int v = NUM_VARIANTS - 1; v >= 0; v--)
        if (runs(v) && (!want || !*want || !strcmp(want, VARIANTS[v].name))) return &VARIANTS[v];
    if (want && *want)
        PyErr_Format(PyExc_ValueError, "variant '%s' is not built or not run by this CPU", want);
    else
        PyErr_SetString(PyExc_RuntimeError, "no build of the loops runs on this CPU");
    return NULL;
}

static int need(Py_buffer *b, Py_ssize_t items, Py_ssize_t itemsize, const char *name) {
    if (b->len != items * itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes, expected %zd items of %zd bytes", name,
                     b->len, items, itemsize);
        return -1;
    }
    return 0;
}

/* rows of `width` items `stride` apart in a buffer of `len` bytes */
static int need_rows(Py_buffer *b, Py_ssize_t rows, Py_ssize_t stride, Py_ssize_t width,
                     Py_ssize_t itemsize, const char *name) {
    if (width < 0 || stride < width || (rows > 0 && b->len < ((rows - 1) * stride + width) * itemsize)) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes do not hold %zd rows of %zd items %zd apart",
                     name, b->len, rows, width, stride);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
PyDoc_STRVAR(green_add_doc,
"green_add(scores, stride, seeds, active, n, threshold, all_green, delta, variant='')\n\n"
"scores (float32, writable, row b at b * stride) gets, at column v < n of each row b,\n"
"scores + delta (float32) where v is green for seeds[b] (pair(seed, code(v)) below\n"
"threshold = threshold53(gamma) << 11, or all_green) and active[b], else scores + 0.0.\n"
"seeds: uint64 [B]; active: uint8 [B].  Releases the GIL.");

static PyObject *green_add(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *keywords[] = {"scores", "stride", "seeds", "active", "n", "threshold",
                               "all_green", "delta", "variant", NULL};
    Py_buffer sc, sd, ac;
    Py_ssize_t stride, n;
    unsigned long long threshold;
    int all_green;
    float delta;
    const char *want = "";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "w*ny*y*nKpf|s", keywords, &sc, &stride, &sd,
                                     &ac, &n, &threshold, &all_green, &delta, &want))
        return NULL;
    PyObject *result = NULL;
    const variant_t *fn = pick(want);
    Py_ssize_t rows = sd.len / 8;
    if (!fn || need(&sd, rows, 8, "seeds") || need(&ac, rows, 1, "active") ||
        need_rows(&sc, rows, stride, n, 4, "scores"))
        goto done;
    float *x = sc.buf;
    const uint64_t *seeds = sd.buf;
    const uint8_t *active = ac.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t b = 0; b < rows; b++)
        fn->green_add(x + b * stride, n, seeds[b], active[b] ? threshold : 0,
                      active[b] && all_green ? 1u : 0u, delta);
    Py_END_ALLOW_THREADS
    result = PyUnicode_FromString(fn->name);
done:
    PyBuffer_Release(&sc);
    PyBuffer_Release(&sd);
    PyBuffer_Release(&ac);
    return result;
}

PyDoc_STRVAR(green_mask_doc,
"green_mask(seeds, n, threshold, all_green, out, variant='')\n\n"
"out (uint8 [B, n], written) = 1 where column v is green for seeds[b] (see green_add).\n"
"Releases the GIL.");

static PyObject *green_mask(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *keywords[] = {"seeds", "n", "threshold", "all_green", "out", "variant", NULL};
    Py_buffer sd, out;
    Py_ssize_t n;
    unsigned long long threshold;
    int all_green;
    const char *want = "";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nKpw*|s", keywords, &sd, &n, &threshold,
                                     &all_green, &out, &want))
        return NULL;
    PyObject *result = NULL;
    const variant_t *fn = pick(want);
    Py_ssize_t rows = sd.len / 8;
    if (!fn || need(&sd, rows, 8, "seeds") || n < 0 || need(&out, rows * n, 1, "out")) goto done;
    const uint64_t *seeds = sd.buf;
    uint8_t *o = out.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t b = 0; b < rows; b++)
        fn->green_mask(o + b * n, n, seeds[b], threshold, all_green ? 1 : 0);
    Py_END_ALLOW_THREADS
    result = PyUnicode_FromString(fn->name);
done:
    PyBuffer_Release(&sd);
    PyBuffer_Release(&out);
    return result;
}

PyDoc_STRVAR(ranks_doc,
"ranks(seeds, n, vocab, bits, out, inverse=False, variant='')\n\n"
"out (int64 [B, n], written): out[b, v] = feistel_rank(seeds[b], v, vocab) for v < n\n"
"(n <= vocab); with inverse (n == vocab) the permutation itself instead,\n"
"out[b, feistel_rank(seeds[b], v, vocab)] = v, which is argsort of the ranks.  bits =\n"
"feistel_bits(vocab).  Releases the GIL.");

static PyObject *ranks(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *keywords[] = {"seeds", "n", "vocab", "bits", "out", "inverse", "variant", NULL};
    Py_buffer sd, out;
    Py_ssize_t n;
    unsigned long long vocab;
    int bits, inverse = 0;
    const char *want = "";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nKiw*|ps", keywords, &sd, &n, &vocab, &bits,
                                     &out, &inverse, &want))
        return NULL;
    PyObject *result = NULL;
    uint64_t *y = NULL;
    const variant_t *fn = pick(want);
    Py_ssize_t rows = sd.len / 8;
    if (!fn || need(&sd, rows, 8, "seeds") || need(&out, rows * n, 8, "out")) goto done;
    if (bits < 2 || bits > 62 || vocab < 1 || vocab > (1ULL << bits) || n < 0 ||
        (unsigned long long)n > vocab || (inverse && (unsigned long long)n != vocab)) {
        PyErr_SetString(PyExc_ValueError, "ranks: need 2 <= bits <= 62, 1 <= vocab <= 2**bits, "
                        "n <= vocab (n == vocab for the inverse)");
        goto done;
    }
    y = malloc(sizeof(uint64_t) * (n ? n : 1));
    if (!y) {
        PyErr_NoMemory();
        goto done;
    }
    const uint64_t *seeds = sd.buf;
    int64_t *o = out.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t b = 0; b < rows; b++) {
        int64_t *row = o + b * n;
        if (inverse) {
            fn->ranks(seeds[b], 0, n, vocab, bits, y);
            for (Py_ssize_t v = 0; v < n; v++) row[y[v]] = v;
        } else {
            fn->ranks(seeds[b], 0, n, vocab, bits, (uint64_t *)row);
        }
    }
    Py_END_ALLOW_THREADS
    result = PyUnicode_FromString(fn->name);
done:
    free(y);
    PyBuffer_Release(&sd);
    PyBuffer_Release(&out);
    return result;
}

/* ------------------------------------------------------------------------------------------ */
PyDoc_STRVAR(green_products_doc,
"green_products(probs, seeds, active, n, threshold, all_green, green, green_p, red_p,\n"
"               variant='')\n\n"
"For rows of width W (probs: float32 [B, W]): green (uint8 [B, W], written) = 1 where\n"
"column v < n is green for seeds[b] (see green_add) and active[b]; green_p = probs *\n"
"f32(green) and red_p = probs * f32(1 - green) (float32 [B, W], written), the products\n"
"torch makes of a float tensor and a bool mask.  Releases the GIL.");

static PyObject *green_products(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *keywords[] = {"probs", "seeds", "active", "n", "threshold", "all_green", "green",
                               "green_p", "red_p", "variant", NULL};
    Py_buffer pr, sd, ac, gr, gp, rp;
    Py_ssize_t n;
    unsigned long long threshold;
    int all_green;
    const char *want = "";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*y*y*nKpw*w*w*|s", keywords, &pr, &sd, &ac,
                                     &n, &threshold, &all_green, &gr, &gp, &rp, &want))
        return NULL;
    PyObject *result = NULL;
    const variant_t *fn = pick(want);
    Py_ssize_t rows = sd.len / 8, width = rows ? pr.len / 4 / rows : 0;
    if (!fn || need(&sd, rows, 8, "seeds") || need(&ac, rows, 1, "active") ||
        need(&pr, rows * width, 4, "probs") || need(&gr, rows * width, 1, "green") ||
        need(&gp, rows * width, 4, "green_p") || need(&rp, rows * width, 4, "red_p"))
        goto done;
    if (n < 0 || n > width) {
        PyErr_SetString(PyExc_ValueError, "green_products: need 0 <= n <= the row's width");
        goto done;
    }
    const float *p = pr.buf;
    const uint64_t *seeds = sd.buf;
    const uint8_t *active = ac.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t b = 0; b < rows; b++)
        fn->green_products(p + b * width, active[b] ? n : 0, width, seeds[b], threshold,
                           all_green ? 1u : 0u, (uint8_t *)gr.buf + b * width,
                           (float *)gp.buf + b * width, (float *)rp.buf + b * width);
    Py_END_ALLOW_THREADS
    result = PyUnicode_FromString(fn->name);
done:
    PyBuffer_Release(&pr);
    PyBuffer_Release(&sd);
    PyBuffer_Release(&ac);
    PyBuffer_Release(&gr);
    PyBuffer_Release(&gp);
    PyBuffer_Release(&rp);
    return result;
}

PyDoc_STRVAR(mass_transfer_doc,
"mass_transfer(probs, green, green_mass, red_mass, beta, out, variant='')\n\n"
"MorphMark's probability transfer, elementwise in float32 as its torch code computes it:\n"
"up = nan_to_num(probs / green_mass * beta), down = nan_to_num(probs / red_mass * beta),\n"
"out = clamp(nan_to_num(where(green, probs + up, probs - down)), min=0).  probs: float32\n"
"[B, W]; green: uint8 [B, W]; green_mass, red_mass, beta: float32 [B]; out: float32\n"
"[B, W] (written).  Releases the GIL.");

static PyObject *mass_transfer(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *keywords[] = {"probs", "green", "green_mass", "red_mass", "beta", "out",
                               "variant", NULL};
    Py_buffer pr, gr, gm, rm, be, out;
    const char *want = "";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*y*y*y*y*w*|s", keywords, &pr, &gr, &gm, &rm,
                                     &be, &out, &want))
        return NULL;
    PyObject *result = NULL;
    const variant_t *fn = pick(want);
    Py_ssize_t rows = gm.len / 4, width = rows ? pr.len / 4 / rows : 0;
    if (!fn || need(&gm, rows, 4, "green_mass") || need(&rm, rows, 4, "red_mass") ||
        need(&be, rows, 4, "beta") || need(&pr, rows * width, 4, "probs") ||
        need(&gr, rows * width, 1, "green") || need(&out, rows * width, 4, "out"))
        goto done;
    const float *p = pr.buf, *g_mass = gm.buf, *r_mass = rm.buf, *beta = be.buf;
    const uint8_t *green = gr.buf;
    float *o = out.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t b = 0; b < rows; b++)
        fn->transfer(p + b * width, green + b * width, width, g_mass[b], r_mass[b], beta[b],
                     o + b * width);
    Py_END_ALLOW_THREADS
    result = PyUnicode_FromString(fn->name);
done:
    PyBuffer_Release(&pr);
    PyBuffer_Release(&gr);
    PyBuffer_Release(&gm);
    PyBuffer_Release(&rm);
    PyBuffer_Release(&be);
    PyBuffer_Release(&out);
    return result;
}

/* ------------------------------------------------------------------------------------------ */
PyDoc_STRVAR(dip_weights_doc,
"dip_weights(cdf, alpha, out, zero, variant='')\n\n"
"DiPmark's reweighted probabilities from the running sums cdf (float64 [n]) of the\n"
"permuted probabilities, as its torch code computes them: c = cdf / cdf[-1], mapped =\n"
"clamp(c - alpha, min=0) + clamp(c - (1 - alpha), min=0), w = clamp(diff(mapped,\n"
"prepend=0), min=0).  out (float64 [n], written; may be cdf itself) = w, except 1.0 where\n"
"w == 0, which zero (uint8 [n], written) marks: log(0) is -inf whatever computes it, and\n"
"the zeros are left out of the caller's log, where they cost a slow path.  clamp(min=0)\n"
"keeps NaN and -0.0, as torch's.");

static PyObject *dip_weights(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer cb, out, zb;
    double alpha;
    const char *want = "";
    if (!PyArg_ParseTuple(args, "y*dw*w*|s", &cb, &alpha, &out, &zb, &want)) return NULL;
    PyObject *result = NULL;
    const variant_t *fn = pick(want);
    Py_ssize_t n = cb.len / 8;
    if (!fn || need(&cb, n, 8, "cdf") || need(&out, n, 8, "out") || need(&zb, n, 1, "zero"))
        goto done;
    if (n) {
        Py_BEGIN_ALLOW_THREADS
        fn->dip_weights(cb.buf, n, alpha, out.buf, zb.buf);
        Py_END_ALLOW_THREADS
    }
    result = PyUnicode_FromString(fn->name);
done:
    PyBuffer_Release(&cb);
    PyBuffer_Release(&out);
    PyBuffer_Release(&zb);
    return result;
}

/* idx is a permutation of [0, n): perm (the token at each rank) or ranks (the rank of each
 * token) */
static int check_permutation(const int64_t *idx, Py_ssize_t n) {
    for (Py_ssize_t j = 0; j < n; j++)
        if (idx[j] < 0 || idx[j] >= n) {
            PyErr_SetString(PyExc_ValueError, "an index outside [0, n)");
            return -1;
        }
    return 0;
}

PyDoc_STRVAR(permute_doc,
"permute(x, idx, is_perm, out)\n\n"
"out (float64 [n], written) = float64 x (float32 or float64 [n]) in permuted order:\n"
"out[j] = x[idx[j]] when is_perm (idx: the token at each rank), else out[idx[v]] = x[v]\n"
"(idx: the rank of each token).  divisor (optional, 0: none) divides each value first,\n"
"as x / divisor in float64.");

static PyObject *permute(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer xb, ib, out;
    int is_perm;
    double divisor = 0.0;
    if (!PyArg_ParseTuple(args, "y*y*pw*|d", &xb, &ib, &is_perm, &out, &divisor)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = ib.len / 8;
    if (need(&ib, n, 8, "idx") || need(&out, n, 8, "out") || check_permutation(ib.buf, n))
        goto done;
    if (xb.len != n * 4 && xb.len != n * 8) {
        PyErr_SetString(PyExc_ValueError, "permute: x must hold n float32 or float64 values");
        goto done;
    }
    const int64_t *idx = ib.buf;
    double *o = out.buf;
#define PERMUTE_LOOP(type)                                                                   \
    do {                                                                                     \
        const type *x = xb.buf;                                                              \
        if (divisor != 0.0) {                                                                \
            if (is_perm)                                                                     \
                for (Py_ssize_t j = 0; j < n; j++) o[j] = (double)x[idx[j]] / divisor;      \
            else                                                                             \
                for (Py_ssize_t v = 0; v < n; v++) o[idx[v]] = (double)x[v] / divisor;      \
        } else if (is_perm) {                                                                \
            for (Py_ssize_t j = 0; j < n; j++) o[j] = (double)x[idx[j]];                     \
        } else {                                                                             \
            for (Py_ssize_t v = 0; v < n; v++) o[idx[v]] = (double)x[v];                     \
        }                                                                                    \
    } while (0)
    if (xb.len == n * 4)
        PERMUTE_LOOP(float);
    else
        PERMUTE_LOOP(double);
#undef PERMUTE_LOOP
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&xb);
    PyBuffer_Release(&ib);
    PyBuffer_Release(&out);
    return result;
}

PyDoc_STRVAR(dip_finish_doc,
"dip_finish(logs, zero, lse, idx, is_perm, out, scratch)\n\n"
"DiPmark's last step, back in token order: value = (zero[j] ? -inf : logs[j]) + lse in\n"
"float64 (torch.log(w) + lse, log(0) being -inf), rounded to out's type: out (float32 or\n"
"float64 [n], written) at token idx[j] (is_perm) or at the token whose rank is j.\n"
"scratch: a buffer of n items of out's type.");

static PyObject *dip_finish(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer lb, zb, ib, out, sb;
    double lse;
    int is_perm;
    if (!PyArg_ParseTuple(args, "y*y*dy*pw*w*", &lb, &zb, &lse, &ib, &is_perm, &out, &sb))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = ib.len / 8;
    if (need(&lb, n, 8, "logs") || need(&zb, n, 1, "zero") || need(&ib, n, 8, "idx") ||
        check_permutation(ib.buf, n))
        goto done;
    if ((out.len != n * 4 && out.len != n * 8) || sb.len != out.len) {
        PyErr_SetString(PyExc_ValueError, "dip_finish: out and scratch must hold n float32 or "
                        "float64 values");
        goto done;
    }
    const double *logs = lb.buf;
    const uint8_t *zero = zb.buf;
    const int64_t *idx = ib.buf;
#define FINISH_LOOP(type)                                                                    \
    do {                                                                                     \
        type *o = out.buf, *tmp = sb.buf;                                                    \
        for (Py_ssize_t j = 0; j < n; j++) tmp[j] = (type)((zero[j] ? -INFINITY : logs[j]) + lse); \
        if (is_perm)                                                                         \
            for (Py_ssize_t j = 0; j < n; j++) o[idx[j]] = tmp[j];                           \
        else                                                                                 \
            for (Py_ssize_t v = 0; v < n; v++) o[v] = tmp[idx[v]];                           \
    } while (0)
    if (out.len == n * 4)
        FINISH_LOOP(float);
    else
        FINISH_LOOP(double);
#undef FINISH_LOOP
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&lb);
    PyBuffer_Release(&zb);
    PyBuffer_Release(&ib);
    PyBuffer_Release(&out);
    PyBuffer_Release(&sb);
    return result;
}

/* ------------------------------------------------------------------------------------------ */
/* numpy's legacy MT19937 (randomkit): the state a RandomState was seeded to, its next 32-bit
 * output, and random_interval's masked rejection, as RandomState.permutation draws them */
#define MT_N 624
#define MT_M 397

typedef struct {
    uint32_t key[MT_N];
    int pos;
} mt_t;

static void mt_gen(mt_t *st) {
    uint32_t *k = st->key, y;
    int i;
    for (i = 0; i < MT_N - MT_M; i++) {
        y = (k[i] & 0x80000000u) | (k[i + 1] & 0x7fffffffu);
        k[i] = k[i + MT_M] ^ (y >> 1) ^ (((uint32_t)0 - (y & 1u)) & 0x9908b0dfu);
    }
    for (; i < MT_N - 1; i++) {
        y = (k[i] & 0x80000000u) | (k[i + 1] & 0x7fffffffu);
        k[i] = k[i + (MT_M - MT_N)] ^ (y >> 1) ^ (((uint32_t)0 - (y & 1u)) & 0x9908b0dfu);
    }
    y = (k[MT_N - 1] & 0x80000000u) | (k[0] & 0x7fffffffu);
    k[MT_N - 1] = k[MT_M - 1] ^ (y >> 1) ^ (((uint32_t)0 - (y & 1u)) & 0x9908b0dfu);
    st->pos = 0;
}

/* numpy's init_by_array (MT19937's reference seeding from a sequence of 32-bit words), as
 * RandomState.seed(sequence) runs it: the key it leaves (its position is then 624) */
static void mt_init_by_array(mt_t *st, const uint32_t *init, Py_ssize_t len) {
    uint32_t *mt = st->key, s = 19650218u;
    for (int p = 0; p < MT_N; p++) {
        mt[p] = s;
        s = 1812433253u * (s ^ (s >> 30)) + (uint32_t)(p + 1);
    }
    int i = 1;
    Py_ssize_t j = 0;
    for (Py_ssize_t k = MT_N > len ? MT_N : len; k; k--) {
        mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1664525u)) + init[j] + (uint32_t)j;
        i++;
        j++;
        if (i >= MT_N) { mt[0] = mt[MT_N - 1]; i = 1; }
        if (j >= len) j = 0;
    }
    for (int k = MT_N - 1; k; k--) {
        mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1566083941u)) - (uint32_t)i;
        i++;
        if (i >= MT_N) { mt[0] = mt[MT_N - 1]; i = 1; }
    }
    mt[0] = 0x80000000u;
    st->pos = MT_N;
}

PyDoc_STRVAR(legacy_seed_doc,
"legacy_seed(init, key)\n\n"
"key (uint32 [624], written) = the MT19937 key numpy's RandomState.seed(init) leaves (its\n"
"position is then 624), init: uint32 [m], m >= 1, the seed sequence's words.");

static PyObject *legacy_seed(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer ib, kb;
    if (!PyArg_ParseTuple(args, "y*w*", &ib, &kb)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t m = ib.len / 4;
    if (need(&ib, m, 4, "init") || need(&kb, MT_N, 4, "key")) goto done;
    if (m < 1) {
        PyErr_SetString(PyExc_ValueError, "legacy_seed: an empty seed sequence");
        goto done;
    }
    mt_t st;
    mt_init_by_array(&st, ib.buf, m);
    memcpy(kb.buf, st.key, sizeof st.key);
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&ib);
    PyBuffer_Release(&kb);
    return result;
}

PyDoc_STRVAR(legacy_permuted_doc,
"legacy_permuted(key, pos, values, out)\n\n"
"out[v] = float32(values[perm[v]]) for v < n, perm being RandomState.permutation(n) as\n"
"numpy draws it from the MT19937 state (key: uint32 [624], pos) the RandomState holds\n"
"(get_state()).  values: float64 [n]; out: float32 [n] (written).  n < 2**32.  Releases\n"
"the GIL, so rows can be drawn on several threads at once.");

static PyObject *legacy_permuted(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer kb, vb, out;
    int pos;
    if (!PyArg_ParseTuple(args, "y*iy*w*", &kb, &pos, &vb, &out)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = vb.len / 8;
    if (need(&kb, MT_N, 4, "key") || need(&vb, n, 8, "values") || need(&out, n, 4, "out"))
        goto done;
    if (pos < 0 || pos > MT_N || (uint64_t)n > 0xFFFFFFFFULL) {
        PyErr_SetString(PyExc_ValueError, "legacy_permuted: pos in [0, 624], n < 2**32");
        goto done;
    }
    mt_t st;
    memcpy(st.key, kb.buf, sizeof st.key);
    st.pos = pos;
    const double *values = vb.buf;
    float *o = out.buf;
    Py_BEGIN_ALLOW_THREADS
    /* numpy shuffles arange(n) and the caller indexes values with it; shuffling the rounded
     * values themselves with the same swaps leaves the same array, without the gather */
    for (Py_ssize_t v = 0; v < n; v++) o[v] = (float)values[v];
    /* _shuffle_raw: for i from n - 1 down to 1, swap i with random_interval(i): the least
     * all-ones mask covering i, 32-bit draws masked until one is at most i.  Written without
     * a branch on the rejection (it is taken about a third of the time, at random): a
     * rejected draw swaps i with itself and leaves i where it is.  The mask is fixed while
     * i stays in [lo, 2 lo), so the loop over draws carries only `i -= accept` (computing
     * the mask from i in each draw made the loop 1.5 times slower).  The draws come a block
     * of 624 at a time, tempered in a loop of their own. */
    uint32_t out32[MT_N];
    int avail = 0, at = 0;
    uint32_t i = n > 1 ? (uint32_t)(n - 1) : 0;
    while (i >= 1) {
        const uint32_t mask = 0xFFFFFFFFu >> __builtin_clz(i), lo = (mask >> 1) + 1;
        while (i >= lo) {
            if (at == avail) { /* the next block: the rest of a started one first */
                if (st.pos == MT_N) mt_gen(&st);
                avail = MT_N - st.pos;
                for (int q = 0; q < avail; q++) out32[q] = st.key[st.pos + q];
                st.pos = MT_N;
                for (int q = 0; q < avail; q++) {
                    uint32_t y = out32[q];
                    y ^= y >> 11;
                    y ^= (y << 7) & 0x9d2c5680u;
                    y ^= (y << 15) & 0xefc60000u;
                    out32[q] = y ^ (y >> 18);
                }
                at = 0;
            }
            while (at < avail && i >= lo) {
                uint32_t j = out32[at++] & mask;
                uint32_t accept = j <= i;
                uint32_t jj = accept ? j : i;
                float t = o[i];
                o[i] = o[jj];
                o[jj] = t;
                i -= accept;
            }
        }
    }
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&kb);
    PyBuffer_Release(&vb);
    PyBuffer_Release(&out);
    return result;
}

/* ------------------------------------------------------------------------------------------ */
PyDoc_STRVAR(tournament_layer_doc,
"tournament_layer(probs, table, offsets, mass, green_p, next_offsets, variant='')\n\n"
"One layer of SynthID's tournament, elementwise in float32 as its torch code computes it,\n"
"for rows of probs (float32 [R, W], updated in place).  The g-value of token v in row r\n"
"is table[(offsets[r] + v) % size] (table: uint8 [size], size a power of two, the sampling\n"
"table permuted so that each layer's g-values are a rotation of it; offsets: int64 [R]).\n"
"With offsets (non-empty): probs = probs * (f32(1 + g) - mass[r]) (mass: float32 [R]);\n"
"then with next_offsets (non-empty): green_p (float32 [R, W], written) = f32(g') * probs,\n"
"g' the next layer's g-value, whose row sums are the next masses.  Releases the GIL.");

static PyObject *tournament_layer(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *keywords[] = {"probs", "table", "offsets", "mass", "green_p", "next_offsets",
                               "variant", NULL};
    Py_buffer pb, tb, ob, mb, gb, nb;
    const char *want = "";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "w*y*y*y*w*y*|s", keywords, &pb, &tb, &ob, &mb,
                                     &gb, &nb, &want))
        return NULL;
    PyObject *result = NULL;
    const variant_t *fn = pick(want);
    Py_ssize_t rows = mb.len / 4, width = rows ? pb.len / 4 / rows : 0, size = tb.len;
    int update = ob.len > 0, next = nb.len > 0;
    if (!fn || need(&pb, rows * width, 4, "probs") || (update && need(&ob, rows, 8, "offsets")) ||
        (next && (need(&nb, rows, 8, "next_offsets") || need(&gb, rows * width, 4, "green_p"))))
        goto done;
    if (size < 1 || (size & (size - 1))) {
        PyErr_SetString(PyExc_ValueError, "tournament_layer: a table of a power-of-two size");
        goto done;
    }
    float *p = pb.buf, *g = next ? gb.buf : NULL;
    const uint8_t *table = tb.buf;
    const int64_t *off = update ? ob.buf : NULL, *noff = next ? nb.buf : NULL;
    const float *mass = mb.buf;
    const Py_ssize_t low = size - 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < rows; r++) {
        float *pr = p + r * width, *gr = next ? g + r * width : NULL;
        Py_ssize_t a = update ? (Py_ssize_t)(off[r] & low) : 0;
        Py_ssize_t c = next ? (Py_ssize_t)(noff[r] & low) : 0;
        const float m = mass[r];
        /* runs of tokens over which neither table index wraps: contiguous reads */
        for (Py_ssize_t v = 0; v < width;) {
            Py_ssize_t run = width - v;
            if (update && size - a < run) run = size - a;
            if (next && size - c < run) run = size - c;
            fn->tournament_run(pr + v, next ? gr + v : NULL, run, update ? table + a : NULL,
                               next ? table + c : NULL, m);
            v += run;
            a = (a + run) & low;
            c = (c + run) & low;
        }
    }
    Py_END_ALLOW_THREADS
    result = PyUnicode_FromString(fn->name);
done:
    PyBuffer_Release(&pb);
    PyBuffer_Release(&tb);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&mb);
    PyBuffer_Release(&gb);
    PyBuffer_Release(&nb);
    return result;
}

/* SynthID's g-values (bytes, 0 or 1) as the variant reads them: the bytes themselves, or
 * a new array of floats in *owned (NULL when out of memory, with the error set) */
static const void *tournament_values_for(const variant_t *fn, const uint8_t *ext, Py_ssize_t span,
                                         float **owned) {
    *owned = NULL;
    if (fn->byte_values) return ext;
    *owned = malloc(sizeof(float) * (size_t)(span ? span : 1));
    if (!*owned) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t j = 0; j < span; j++) (*owned)[j] = (float)ext[j];
    return *owned;
}

/* the vector width of torch's float sums, checked: 8 or 16 float32 lanes; and a thread
 * count for a row's sum, 0 (whole) up to MAX_SPLIT */
static int check_sum_order(int lanes, int threads) {
    if (lanes != 8 && lanes != 16) {
        PyErr_Format(PyExc_ValueError, "lanes must be 8 or 16, got %d", lanes);
        return -1;
    }
    if (threads < 0 || threads > MAX_SPLIT) {
        PyErr_Format(PyExc_ValueError, "threads must lie in [0, %d], got %d", MAX_SPLIT, threads);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(torch_row_sums_doc,
"torch_row_sums(x, width, lanes, threads, out, variant='')\n\n"
"out[r] (float32 [R], written) = the sum of row r of x (float32 [R, width]) in the order of\n"
"torch's float32 sum over the last dimension (its cascade sum with vectors of `lanes`\n"
"float32 values, 8 or 16): of a contiguous tensor of several rows, or of one row summed by\n"
"one thread, for threads 0 or 1; of a single row on that many threads otherwise (a row of\n"
"32,768 values or more is then cut into chunks summed apart, as torch's two-pass\n"
"reduction does).  Bit for bit torch's when lanes is its width.  Releases the GIL.");

static PyObject *torch_row_sums(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer xb, out;
    Py_ssize_t width;
    int lanes, threads;
    const char *want = "";
    if (!PyArg_ParseTuple(args, "y*niiw*|s", &xb, &width, &lanes, &threads, &out, &want))
        return NULL;
    PyObject *result = NULL;
    const variant_t *fn = pick(want);
    Py_ssize_t rows = out.len / 4;
    if (!fn || check_sum_order(lanes, threads) || width < 0 || need(&xb, rows * width, 4, "x"))
        goto done;
    float (*sum)(const float *, Py_ssize_t, int) =
        lanes == 8 ? fn->torch_row_sum8 : fn->torch_row_sum16;
    const float *x = xb.buf;
    float *o = out.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < rows; r++) o[r] = sum(x + r * width, width, threads);
    Py_END_ALLOW_THREADS
    result = PyUnicode_FromString(fn->name);
done:
    PyBuffer_Release(&xb);
    PyBuffer_Release(&out);
    return result;
}

PyDoc_STRVAR(tournament_doc,
"tournament(probs, ext, offsets, depth, lanes, threads, variant='')\n\n"
"SynthID's whole tournament for rows of probs (float32 [R, W], updated in place), every\n"
"layer as tournament_layer computes it and each layer's mass as torch's float32 sum of the\n"
"row's green products (torch_row_sums with `lanes` and `threads`), one row at a time, so\n"
"that a row stays in cache.  ext: the g-values (uint8, each 0 or 1), laid out so that\n"
"those of row r's layer k are ext[offsets[r, k] : offsets[r, k] + W] (offsets: int64\n"
"[R, depth]).\n"
"Releases the GIL.");

static PyObject *tournament(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer pb, eb, ob;
    Py_ssize_t depth;
    int lanes, threads;
    const char *want = "";
    if (!PyArg_ParseTuple(args, "w*y*y*nii|s", &pb, &eb, &ob, &depth, &lanes, &threads, &want))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t *o = NULL;
    float *owned = NULL;
    const variant_t *fn = pick(want);
    Py_ssize_t rows = depth > 0 ? ob.len / 8 / depth : 0, span = eb.len;
    Py_ssize_t width = rows ? pb.len / 4 / rows : 0;
    if (!fn || check_sum_order(lanes, threads)) goto done;
    if (depth < 1 || need(&ob, rows * depth, 8, "offsets") || need(&pb, rows * width, 4, "probs") ||
        need(&eb, span, 1, "ext"))
        goto done;
    const int64_t *off = ob.buf;
    for (Py_ssize_t k = 0; k < rows * depth; k++)
        if (off[k] < 0 || off[k] > span - width) {
            PyErr_SetString(PyExc_ValueError, "tournament: an offset outside ext");
            goto done;
        }
    o = malloc(sizeof(Py_ssize_t) * (size_t)depth);
    if (!o) {
        PyErr_NoMemory();
        goto done;
    }
    const void *values = tournament_values_for(fn, eb.buf, span, &owned);
    if (!values) goto done;
    void (*row)(float *, Py_ssize_t, const void *, const Py_ssize_t *, Py_ssize_t, int) =
        lanes == 8 ? fn->tournament_row8 : fn->tournament_row16;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < rows; r++) {
        for (Py_ssize_t k = 0; k < depth; k++) o[k] = (Py_ssize_t)off[r * depth + k];
        row((float *)pb.buf + r * width, width, values, o, depth, threads);
    }
    Py_END_ALLOW_THREADS
    result = PyUnicode_FromString(fn->name);
done:
    free(o);
    free(owned);
    PyBuffer_Release(&pb);
    PyBuffer_Release(&eb);
    PyBuffer_Release(&ob);
    return result;
}

PyDoc_STRVAR(tournament_part_doc,
"tournament_part(probs, ext, offsets, depth, lanes, threads, part, state, variant='')\n\n"
"tournament() of one row (probs: float32 [1, W], W >= 32,768; threads >= 2) as the calls\n"
"for parts 0 .. min(threads, ceil(W / 32,768)) - 1 compute it together, each on its own\n"
"thread: part takes its chunk of the row (the chunks torch sums the row in) through every\n"
"layer, and the parts meet at each layer's sum.  state: a zeroed writable buffer of\n"
"PART_STATE_SIZE bytes, the same for all parts of the row.  The parts must run at once:\n"
"one waits for the others at every layer (RuntimeError after 10 s without them).  Releases\n"
"the GIL.");

static PyObject *tournament_part(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer pb, eb, ob, sb;
    Py_ssize_t depth;
    int lanes, threads, part;
    const char *want = "";
    if (!PyArg_ParseTuple(args, "w*y*y*niiiw*|s", &pb, &eb, &ob, &depth, &lanes, &threads, &part,
                          &sb, &want))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t *o = NULL;
    float *owned = NULL;
    const variant_t *fn = pick(want);
    Py_ssize_t span = eb.len, width = pb.len / 4;
    if (!fn || check_sum_order(lanes, threads)) goto done;
    Py_ssize_t used = (width + TORCH_GRAIN - 1) / TORCH_GRAIN;
    if (used > threads) used = threads;
    if (threads < 2 || width < TORCH_GRAIN || part < 0 || part >= used) {
        PyErr_SetString(PyExc_ValueError, "tournament_part: a row of 32,768 values or more, "
                        "threads >= 2 and part < min(threads, ceil(W / 32,768))");
        goto done;
    }
    if (depth < 1 || need(&ob, depth, 8, "offsets") || need(&eb, span, 1, "ext") ||
        need(&sb, (Py_ssize_t)sizeof(part_state_t), 1, "state"))
        goto done;
    const int64_t *off = ob.buf;
    o = malloc(sizeof(Py_ssize_t) * (size_t)depth);
    if (!o) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < depth; k++) {
        if (off[k] < 0 || off[k] > span - width) {
            PyErr_SetString(PyExc_ValueError, "tournament: an offset outside ext");
            goto done;
        }
        o[k] = (Py_ssize_t)off[k];
    }
    const void *values = tournament_values_for(fn, eb.buf, span, &owned);
    if (!values) goto done;
    int (*run)(float *, Py_ssize_t, const void *, const Py_ssize_t *, Py_ssize_t, int, int,
               part_state_t *) = lanes == 8 ? fn->tournament_part8 : fn->tournament_part16;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = run(pb.buf, width, values, o, depth, threads, part, sb.buf);
    Py_END_ALLOW_THREADS
    if (rc) {
        PyErr_SetString(PyExc_RuntimeError, "tournament_part: the other parts of the row did "
                        "not arrive within 10 s (they must run at once, on other threads)");
        goto done;
    }
    result = PyUnicode_FromString(fn->name);
done:
    free(o);
    free(owned);
    PyBuffer_Release(&pb);
    PyBuffer_Release(&eb);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&sb);
    return result;
}

/* ------------------------------------------------------------------------------------------ */
PyDoc_STRVAR(its_choose_doc,
"its_choose(probs, stride, seeds, u, vocab, bits, out, variant='')\n\n"
"Inverse-transform sampling of each row b of probs (float32, row b at b * stride, vocab\n"
"columns): the probabilities in the order of the ranks of seeds[b]'s Feistel permutation,\n"
"their float64 cumsum (numpy's order), the first rank whose cdf reaches u[b] (numpy's\n"
"searchsorted), else the last rank with positive probability; out[b] = the token at that\n"
"rank, or -1 where the row holds a NaN (the caller takes numpy's path there).  seeds:\n"
"uint64 [B]; u: float64 [B]; out: int64 [B].  Releases the GIL.");

static PyObject *its_choose(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *keywords[] = {"probs", "stride", "seeds", "u", "vocab", "bits", "out",
                               "variant", NULL};
    Py_buffer pr, sd, uu, out;
    Py_ssize_t stride, vocab;
    int bits;
    const char *want = "";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*ny*y*niw*|s", keywords, &pr, &stride, &sd,
                                     &uu, &vocab, &bits, &out, &want))
        return NULL;
    PyObject *result = NULL;
    uint64_t *y = NULL;
    const variant_t *fn = pick(want);
    Py_ssize_t rows = sd.len / 8;
    if (!fn || need(&sd, rows, 8, "seeds") || need(&uu, rows, 8, "u") ||
        need(&out, rows, 8, "out") || need_rows(&pr, rows, stride, vocab, 4, "probs"))
        goto done;
    if (bits < 2 || bits > 62 || vocab < 2 || (uint64_t)vocab > (1ULL << bits)) {
        PyErr_SetString(PyExc_ValueError, "its_choose: need 2 <= bits <= 62, 2 <= vocab <= 2**bits");
        goto done;
    }
    y = malloc(sizeof(uint64_t) * BLOCK);
    if (!y) {
        PyErr_NoMemory();
        goto done;
    }
    const float *p = pr.buf;
    const uint64_t *seeds = sd.buf;
    const double *u = uu.buf;
    int64_t *o = out.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t b = 0; b < rows; b++) {
        const float *row = p + b * stride;
        int nan = 0;
        for (Py_ssize_t v = 0; v < vocab; v++) nan |= row[v] != row[v];
        if (nan) {
            o[b] = -1;
            continue;
        }
        /* ranks in order, a block at a time: the token at each rank (the inverse of the
         * permutation), its probability added to the running sum until the sum reaches u
         * (numpy's searchsorted over the whole cdf finds the same first rank: the sums only
         * grow); on average half the vocabulary is ranked */
        Py_ssize_t k = vocab, token = 0;
        double cdf = 0.0, target = u[b];
        for (Py_ssize_t j0 = 0; j0 < vocab && k == vocab; j0 += BLOCK) {
            Py_ssize_t m = vocab - j0 < BLOCK ? vocab - j0 : BLOCK;
            fn->tokens_at(seeds[b], j0, m, (uint64_t)vocab, bits, y);
            for (Py_ssize_t i = 0; i < m; i++) {
                cdf = j0 + i ? cdf + (double)row[y[i]] : (double)row[y[0]];
                if (!(cdf < target)) {
                    k = j0 + i;
                    token = (Py_ssize_t)y[i];
                    break;
                }
            }
        }
        if (k == vocab) { /* the last rank with positive probability; rank vocab - 1
                           * (Python's row[-1]) when none has any */
            token = -1;
            for (Py_ssize_t j0 = vocab; j0 > 0 && token < 0; j0 -= BLOCK) {
                Py_ssize_t m = j0 < BLOCK ? j0 : BLOCK;
                fn->tokens_at(seeds[b], j0 - m, m, (uint64_t)vocab, bits, y);
                for (Py_ssize_t i = m - 1; i >= 0; i--)
                    if (row[y[i]] > 0) {
                        token = (Py_ssize_t)y[i];
                        break;
                    }
            }
            if (token < 0) {
                fn->tokens_at(seeds[b], vocab - 1, 1, (uint64_t)vocab, bits, y);
                token = (Py_ssize_t)y[0];
            }
        }
        o[b] = token;
    }
    Py_END_ALLOW_THREADS
    result = PyUnicode_FromString(fn->name);
done:
    free(y);
    PyBuffer_Release(&pr);
    PyBuffer_Release(&sd);
    PyBuffer_Release(&uu);
    PyBuffer_Release(&out);
    return result;
}

/* ------------------------------------------------------------------------------------------ */
/* One row of keyed_argmax: the value of token v is combine(x[v], noise(word v)), its argmax
 * the first maximal index (NaN the largest). */
typedef struct {
    const void *x; /* float32 or float64 row */
    int x_f64, noise, combine;
    double offset; /* COMBINE_F64: subtracted from x first (x - offset, then + noise) */
} argrow_t;

static inline double input_of(const argrow_t *r, Py_ssize_t v) {
    if (r->x_f64) return ((const double *)r->x)[v] - r->offset;
    return (double)((const float *)r->x)[v];
}

static inline double value_of(const argrow_t *r, Py_ssize_t v, double noise) {
    if (r->combine == COMBINE_F32) {
        float s = ((const float *)r->x)[v] + (float)noise; /* numpy: x += f32(row) */
        return (double)s;
    }
    return input_of(r, v) + noise;
}

static Py_ssize_t argmax_all(const argrow_t *r, uint64_t seed, Py_ssize_t n) {
    Py_ssize_t best_i = 0;
    double best = 0.0;
    for (Py_ssize_t v = 0; v < n; v++) {
        double val = value_of(r, v, noise_of(mix64(seed ^ ((uint64_t)v * GOLDEN)), r->noise));
        if (val != val) return v;
        if (v == 0 || val > best) {
            best = val;
            best_i = v;
        }
    }
    return best_i;
}

static inline double exact_at(const argrow_t *r, uint64_t seed, Py_ssize_t v) {
    return value_of(r, v, noise_of(mix64(seed ^ ((uint64_t)v * GOLDEN)), r->noise));
}

/* The argmax of one row without the exact noise of every token.
 *
 * A lower bound of the largest value: the exact values of a few tokens likely to be near it
 * (the largest input, and the token of the largest noise of each block: its largest word
 * for the Gumbel noise, its least for the exponential).
 * An upper bound of each token's value: its input plus the largest noise of its word's
 * bucket (the top BUCKET_BITS bits; BOUND_HI).  A token whose upper bound is below the lower
 * bound, less a margin for rounding, can neither be the argmax nor tie with it: its value
 * is computed only otherwise.  Two vectorized filters come first (a word outside the
 * buckets any token could win from, given the largest input; an input too small for the
 * largest noise of all), and the table is read only for the tokens they let through.
 * w: BLOCK words, flags: BLOCK bytes of scratch. */
static Py_ssize_t argmax_row(const variant_t *fn, const argrow_t *r, uint64_t seed, Py_ssize_t n,
                             uint64_t *restrict w, uint8_t *restrict flags) {
    const double *hi_tab = BOUND_HI[r->noise];
    double lower = -INFINITY, biggest = 0.0;
    int64_t top_key = INT64_MIN;
    Py_ssize_t top_block = 0; /* the first block holding the largest input */
    Py_ssize_t best_i = -1; /* the token of `lower` (its first, among equal values) */
    for (Py_ssize_t v0 = 0; v0 < n; v0 += BLOCK) {
        Py_ssize_t m = n - v0 < BLOCK ? n - v0 : BLOCK;
        block_t blk;
        if (r->x_f64)
            fn->block_f64(seed, v0, m, (const double *)r->x + v0, w, &blk);
        else
            fn->block_f32(seed, v0, m, (const float *)r->x + v0, w, &blk);
        if (blk.odd) return argmax_all(r, seed, n); /* a NaN or +inf: every token computed */
        biggest = blk.top_abs > biggest ? blk.top_abs : biggest;
        if (blk.top_key > top_key) {
            top_key = blk.top_key;
            top_block = v0;
        }
        /* the word of the largest noise: the largest (gumbel) or the least (exp) */
        uint64_t loudest = r->noise == NOISE_GUMBEL ? blk.top_w : blk.bottom_w;
        for (Py_ssize_t i = 0; i < m; i++)
            if (w[i] == loudest) {
                double val = exact_at(r, seed, v0 + i);
                if (val > lower || (val == lower && v0 + i < best_i)) {
                    lower = val;
                    best_i = v0 + i;
                }
                break;
            }
    }
    /* the largest input and its first token */
    double x_max;
    if (r->x_f64) {
        uint64_t b = (uint64_t)top_key ^ ((uint64_t)(top_key >> 63) >> 1);
        x_max = bits_double(b) - r->offset; /* x - offset rounds monotonically */
        if (!(fabs(r->offset) < HUGE_VAL)) return argmax_all(r, seed, n);
        biggest += fabs(r->offset);
        for (Py_ssize_t v = top_block; v < n; v++)
            if (double_bits(((const double *)r->x)[v]) == b) {
                double val = exact_at(r, seed, v);
                if (val > lower || (val == lower && v < best_i)) {
                    lower = val;
                    best_i = v;
                }
                break;
            }
    } else {
        uint32_t b = (uint32_t)(int32_t)top_key ^ ((uint32_t)((int32_t)top_key >> 31) >> 1);
        x_max = (double)bits_float(b);
        for (Py_ssize_t v = top_block; v < n; v++)
            if (float_bits(((const float *)r->x)[v]) == b) {
                double val = exact_at(r, seed, v);
                if (val > lower || (val == lower && v < best_i)) {
                    lower = val;
                    best_i = v;
                }
                break;
            }
    }
    if (lower == -INFINITY) return argmax_all(r, seed, n); /* every input is -inf */
    /* a token's value lies within margin / 2 of its bounds (float32 rounding of values up
     * to |x| + 38, relative 2**-24, and a few double ulps) */
    double threshold = lower - (biggest + 64.0) * 0x1p-17;
    /* the buckets a token could win from, given the largest input; the least input that
     * could win, given the largest noise */
    int k_lo = BUCKETS, k_hi = -1;
    double noise_max = -INFINITY;
    for (int k = 0; k < BUCKETS; k++) {
        noise_max = hi_tab[k] > noise_max ? hi_tab[k] : noise_max;
        if (x_max + hi_tab[k] >= threshold) {
            k_lo = k < k_lo ? k : k_lo;
            k_hi = k;
        }
    }
    if (k_hi < 0) return best_i; /* no token but those already computed can reach it */
    uint64_t w_lo = (uint64_t)k_lo << (64 - BUCKET_BITS);
    uint64_t w_hi = ((uint64_t)k_hi << (64 - BUCKET_BITS)) | (~0ULL >> BUCKET_BITS);
    double x_min = threshold - noise_max;
    double best = lower;
    for (Py_ssize_t v0 = 0; v0 < n; v0 += BLOCK) {
        Py_ssize_t m = n - v0 < BLOCK ? n - v0 : BLOCK;
        if (r->x_f64)
            fn->flags_f64(seed, v0, m, (const double *)r->x + v0, r->offset, w_lo, w_hi, x_min,
                          flags);
        else
            fn->flags_f32(seed, v0, m, (const float *)r->x + v0, w_lo, w_hi, x_min, flags);
        for (Py_ssize_t i = 0; i < m; i += 8) {
            uint64_t eight = 0;
            memcpy(&eight, flags + i, m - i < 8 ? (size_t)(m - i) : 8);
            if (!eight) continue;
            for (Py_ssize_t j = i; j < i + 8 && j < m; j++) {
                if (!flags[j]) continue;
                Py_ssize_t v = v0 + j;
                uint64_t word = mix64(seed ^ ((uint64_t)v * GOLDEN));
                if (!(input_of(r, v) + hi_tab[word >> (64 - BUCKET_BITS)] >= threshold)) continue;
                double val = value_of(r, v, noise_of(word, r->noise));
                if (val > best || (val == best && v < best_i)) {
                    best = val;
                    best_i = v;
                }
            }
        }
    }
    return best_i;
}

PyDoc_STRVAR(keyed_argmax_doc,
"keyed_argmax(x, x_f64, stride, seeds, offsets, n, noise, combine, out, variant='')\n\n"
"out[b] (int64 [B]) = the first index of the maximum over v < n (NaN the largest) of\n"
"row b's value at v, from x (float32, or float64 when x_f64; row b at b * stride) and the\n"
"noise of the word pair(seeds[b], code(v)): noise 0 exp_gumbel's -exact_log(-exact_log(u)),\n"
"1 neg_log_uniform's -exact_log(u).  combine 0: f32(x + f32(noise)) (float32 x);\n"
"1: f64(x) + noise (float32 x); 2: (x - offsets[b]) + noise (float64 x).  seeds: uint64\n"
"[B]; offsets: float64 [B] (combine 2) or empty.  Releases the GIL.");

static PyObject *keyed_argmax(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *keywords[] = {"x", "x_f64", "stride", "seeds", "offsets", "n", "noise",
                               "combine", "out", "variant", NULL};
    Py_buffer xb, sd, of, out;
    int x_f64, noise, combine;
    Py_ssize_t stride, n;
    const char *want = "";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*pny*y*niiw*|s", keywords, &xb, &x_f64,
                                     &stride, &sd, &of, &n, &noise, &combine, &out, &want))
        return NULL;
    PyObject *result = NULL;
    uint64_t *buf = NULL;
    uint8_t *flags = NULL;
    const variant_t *fn = pick(want);
    Py_ssize_t rows = sd.len / 8;
    if (!fn || need(&sd, rows, 8, "seeds") || need(&out, rows, 8, "out") ||
        need_rows(&xb, rows, stride, n, x_f64 ? 8 : 4, "x") ||
        (combine == COMBINE_F64 && need(&of, rows, 8, "offsets")))
        goto done;
    if (n < 1 || (noise != NOISE_GUMBEL && noise != NOISE_EXP) ||
        (combine == COMBINE_F64) != (x_f64 != 0) || combine < 0 || combine > COMBINE_F64) {
        PyErr_SetString(PyExc_ValueError, "keyed_argmax: need n >= 1, noise 0 or 1, and combine "
                        "0 or 1 with float32 x, 2 with float64 x");
        goto done;
    }
    buf = malloc(sizeof(uint64_t) * BLOCK);
    flags = malloc(BLOCK);
    if (!buf || !flags) {
        PyErr_NoMemory();
        goto done;
    }
    const uint64_t *seeds = sd.buf;
    const double *offsets = combine == COMBINE_F64 ? of.buf : NULL;
    int64_t *o = out.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t b = 0; b < rows; b++) {
        argrow_t r = {.x_f64 = x_f64, .noise = noise, .combine = combine,
                      .offset = offsets ? offsets[b] : 0.0};
        r.x = x_f64 ? (const void *)((const double *)xb.buf + b * stride)
                    : (const void *)((const float *)xb.buf + b * stride);
        o[b] = argmax_row(fn, &r, seeds[b], n, buf, flags);
    }
    Py_END_ALLOW_THREADS
    result = PyUnicode_FromString(fn->name);
done:
    free(buf);
    free(flags);
    PyBuffer_Release(&xb);
    PyBuffer_Release(&sd);
    PyBuffer_Release(&of);
    PyBuffer_Release(&out);
    return result;
}

PyDoc_STRVAR(variants_doc,
"variants() -> list of str\n\nThe builds of the loops this CPU runs, narrowest first.");

static PyObject *variants(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    for (int v = 0; v < NUM_VARIANTS; v++) {
        if (!runs(v)) continue;
        PyObject *s = PyUnicode_FromString(VARIANTS[v].name);
        if (!s || PyList_Append(out, s)) {
            Py_XDECREF(s);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(s);
    }
    return out;
}

static PyMethodDef methods[] = {
    {"green_add", (PyCFunction)(void (*)(void))green_add, METH_VARARGS | METH_KEYWORDS,
     green_add_doc},
    {"green_mask", (PyCFunction)(void (*)(void))green_mask, METH_VARARGS | METH_KEYWORDS,
     green_mask_doc},
    {"ranks", (PyCFunction)(void (*)(void))ranks, METH_VARARGS | METH_KEYWORDS, ranks_doc},
    {"green_products", (PyCFunction)(void (*)(void))green_products, METH_VARARGS | METH_KEYWORDS,
     green_products_doc},
    {"mass_transfer", (PyCFunction)(void (*)(void))mass_transfer, METH_VARARGS | METH_KEYWORDS,
     mass_transfer_doc},
    {"legacy_seed", legacy_seed, METH_VARARGS, legacy_seed_doc},
    {"legacy_permuted", legacy_permuted, METH_VARARGS, legacy_permuted_doc},
    {"tournament_layer", (PyCFunction)(void (*)(void))tournament_layer,
     METH_VARARGS | METH_KEYWORDS, tournament_layer_doc},
    {"torch_row_sums", torch_row_sums, METH_VARARGS, torch_row_sums_doc},
    {"tournament", tournament, METH_VARARGS, tournament_doc},
    {"tournament_part", tournament_part, METH_VARARGS, tournament_part_doc},
    {"dip_weights", dip_weights, METH_VARARGS, dip_weights_doc},
    {"permute", permute, METH_VARARGS, permute_doc},
    {"dip_finish", dip_finish, METH_VARARGS, dip_finish_doc},
    {"its_choose", (PyCFunction)(void (*)(void))its_choose, METH_VARARGS | METH_KEYWORDS,
     its_choose_doc},
    {"keyed_argmax", (PyCFunction)(void (*)(void))keyed_argmax, METH_VARARGS | METH_KEYWORDS,
     keyed_argmax_doc},
    {"variants", variants, METH_NOARGS, variants_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_vocab_rows",
    "the logits processors' vocabulary-wide keyed work, compiled (kernels/vocab_rows.c).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__vocab_rows(void) {
    make_bounds();
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "PART_STATE_SIZE", (long)sizeof(part_state_t))) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
