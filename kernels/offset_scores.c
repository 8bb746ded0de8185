/*
 * evalrun.kernels._offset_scores: the fixed-key detectors' scores (align and edit over every
 * cyclic offset of a key sequence), compiled.  Compiled twin of the numpy path of
 * NativeDetection._analyse_fixed (evalrun/watermark/engine/detection.py: _offset_matrix, then
 * kernels/align.py's align_prefix or edit_prefix), which stays the reference and the
 * fallback where this module was not built; tests require both to give the same bits.
 *
 * Why compiled: a permutation test rescores the text under every null key, and numpy builds
 * the evidence M[k, i, m] of every (key, token, key position) triple (200 keys x 200 tokens x
 * 256 positions = 10 M hashes a text), gathers its cyclic diagonals and takes their running
 * sums, each in a separate pass over [K, n, L] arrays that do not fit in the caches.  Here
 * one key at a time, one text row at a time: the row of evidence is made in a buffer of L
 * floats and added at once into the L running sums (align) or swept by the DP (edit), and
 * only each prefix's best score (and, for the observed key, its offset) comes out.
 *
 * Same bits as numpy, by construction:
 *  - integer hashing (SplitMix64's finaliser, the Feistel ranks of its) is exact;
 *  - every float is made by the operations numpy performs, in the same order, each rounded
 *    to double (IEEE basic operations: +, -, *, /, |x|, int -> double, frexp by its bits);
 *    setup.py builds this file with -ffp-contract=off so that no a * b + c becomes an FMA;
 *    exact_log is the polynomial of kernels/keyed_hash.py, not libm's log;
 *  - running sums add in numpy.cumsum's order (s[i] = s[i - 1] + x[i], s[0] = x[0]);
 *  - max and argmax (first maximal index) are exact; no NaN or signed zero can occur in
 *    these sums (every input is finite, and -0.0 is never made: see the notes at the DP).
 * Vector widths do not change results (each lane performs the same scalar operations), so
 * the three builds of the loops (portable, AVX2, AVX-512, picked at load time) agree.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "keyed_hash.h"

enum { KIND_KGW = 0, KIND_EXP = 1, KIND_ITS = 2, KIND_BINARY = 3, KINDS };
enum { MODE_ALIGN = 0, MODE_EDIT = 1 };

/* offsets swept side by side by the edit DP (its state, [n + 1] x EDIT_LANES floats, stays
 * in the L1 cache up to n = 250); a multiple of every variant's vector width */
#define EDIT_LANES 16

/* One call's inputs (see scores_doc). */
typedef struct {
    int kind;
    Py_ssize_t keys, key_len, n, depth;
    const uint64_t *pos_words; /* [keys, key_len]: key sequence (binary: its node-tagged seeds) */
    const double *pos_floats;  /* [keys, key_len]: its' uniform u of each seed */
    const uint8_t *active;     /* [keys, key_len]: key positions not skipped */
    const uint64_t *tok_words; /* [n, depth]: code(token) (its: the token; binary: node codes) */
    const uint8_t *tok_bits;   /* [n, depth]: binary's path bits */
    const int64_t *tok_len;    /* [n]: binary's path lengths */
    double null_mean;          /* kgw: gamma; its: its_null_mean(V); exp, binary: 1.0 */
    double denom;              /* its: float(V - 1) */
    uint64_t threshold;        /* kgw: threshold53(gamma) << 11 */
    int all_green;             /* kgw: threshold53(gamma) >= 2**53 */
    uint64_t vocab;            /* its */
    int bits;                  /* its: feistel_bits(V) */
    double psi;                /* edit */
    double *best;              /* [keys, n] */
    int64_t *arg;              /* [keys, n] or NULL */
} plan_t;

/* where(mask, a, b) for a mask of all ones or zeros, by the bits (a compare and a branch on
 * unpredictable evidence would cost more than the select, and keep loops from vectorizing) */
static inline __attribute__((always_inline)) double select_bits(uint64_t mask, double a,
                                                                double b) {
    return bits_double((double_bits(a) & mask) | (double_bits(b) & ~mask));
}

/* all ones where flag is 1, 0 where it is 0 */
static inline __attribute__((always_inline)) uint64_t mask_of(uint64_t flag) {
    return (uint64_t)0 - flag;
}

/* (double)t for t < 2**53, exactly, from two exact 2**52-offset conversions (vectorizes
 * without AVX-512's int64 -> double) */
static inline __attribute__((always_inline)) double u53_to_double(uint64_t t) {
    double hi = bits_double(0x4330000000000000ULL | (t >> 26)) - 0x1p52;
    double lo = bits_double(0x4330000000000000ULL | (t & 0x3FFFFFFULL)) - 0x1p52;
    return hi * 0x1p26 + lo; /* an integer below 2**53: the sum is exact */
}

/* keyed_hash.exact_log for the positive normal floats it is given here (uniforms, at least
 * 2**-54): frexp read off the bits (exact), then the same operations in the same order */
static inline __attribute__((always_inline)) double exact_log(double x) {
    uint64_t b = double_bits(x);
    /* frexp's exponent as a float: (biased exponent) - 1022, exactly */
    double e = bits_double(0x4330000000000000ULL | ((b >> 52) & 0x7FF)) - (0x1p52 + 1022.0);
    double m = bits_double((b & 0x800FFFFFFFFFFFFFULL) | (1022ULL << 52));
    uint64_t low = mask_of(m < SQRT_HALF);
    m = select_bits(low, m * 2.0, m); /* numpy computes both sides of its where */
    e = select_bits(low, e - 1.0, e);
    return log_of_frexp(m, e);
}

/* keyed_hash.neg_log_uniform: -exact_log((f64(top53(h)) + 0.5) * 2**-53) */
static inline __attribute__((always_inline)) double neg_log_uniform(uint64_t h) {
    double u = (u53_to_double(h >> 11) + 0.5) * 0x1p-53;
    return -exact_log(u);
}

/* keyed_hash.feistel_rank (cycle walking) */
static inline uint64_t feistel_rank(uint64_t seed, uint64_t x, uint64_t vocab, int bits) {
    uint64_t y = feistel_once(seed, x, bits);
    while (y >= vocab) y = feistel_once(seed, y, bits);
    return y;
}

/* The loops, once per build variant (kernels/offset_scores_body.h) */
typedef void (*keys_fn)(const plan_t *, int mode, Py_ssize_t k0, Py_ssize_t k1, double *work);

/* Each variant's vector of doubles for the edit DP: VEC_N lanes, and load, store, +, -, a
 * broadcast and VEC_MAX(a, b) = a > b ? a : b (what x86's MAXPD computes, operand order
 * included).  Off x86 the "vector" is one double. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__APPLE__) && \
    !defined(OFFSET_SCORES_GENERIC) /* the generic code off x86, or where asked for (tests) */
#define HAVE_X86_VARIANTS 1
#include <immintrin.h>
#endif

#ifdef HAVE_X86_VARIANTS
#define VEC __m128d
#define VEC_N 2
#define VEC_LOAD _mm_loadu_pd
#define VEC_STORE _mm_storeu_pd
#define VEC_ADD _mm_add_pd
#define VEC_SUB _mm_sub_pd
#define VEC_MAX _mm_max_pd
#define VEC_SET1 _mm_set1_pd
#else
#define VEC double
#define VEC_N 1
#define VEC_LOAD(x) (*(x))
#define VEC_STORE(x, v) (*(x) = (v))
#define VEC_ADD(a, b) ((a) + (b))
#define VEC_SUB(a, b) ((a) - (b))
#define VEC_MAX(a, b) ((a) > (b) ? (a) : (b))
#define VEC_SET1(x) (x)
#endif
#define BODY_SUFFIX portable
#define BODY_TARGET
#include "offset_scores_body.h"
#undef BODY_SUFFIX
#undef BODY_TARGET
#undef VEC
#undef VEC_N
#undef VEC_LOAD
#undef VEC_STORE
#undef VEC_ADD
#undef VEC_SUB
#undef VEC_MAX
#undef VEC_SET1

#ifdef HAVE_X86_VARIANTS
#define VEC __m256d
#define VEC_N 4
#define VEC_LOAD _mm256_loadu_pd
#define VEC_STORE _mm256_storeu_pd
#define VEC_ADD _mm256_add_pd
#define VEC_SUB _mm256_sub_pd
#define VEC_MAX _mm256_max_pd
#define VEC_SET1 _mm256_set1_pd
#define BODY_SUFFIX avx2
#define BODY_TARGET __attribute__((target("avx2")))
#include "offset_scores_body.h"
#undef BODY_SUFFIX
#undef BODY_TARGET
#undef VEC
#undef VEC_N
#undef VEC_LOAD
#undef VEC_STORE
#undef VEC_ADD
#undef VEC_SUB
#undef VEC_MAX
#undef VEC_SET1

#define VEC __m512d
#define VEC_N 8
#define VEC_LOAD _mm512_loadu_pd
#define VEC_STORE _mm512_storeu_pd
#define VEC_ADD _mm512_add_pd
#define VEC_SUB _mm512_sub_pd
#define VEC_MAX _mm512_max_pd
#define VEC_SET1 _mm512_set1_pd
#define BODY_SUFFIX avx512
#define BODY_TARGET __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw")))
#include "offset_scores_body.h"
#undef BODY_SUFFIX
#undef BODY_TARGET
#endif

static const char *VARIANTS[] = {"portable", "avx2", "avx512"};

/* the variant to run: `want` ("", or a name from VARIANTS) or the widest the CPU has */
static keys_fn pick(const char *want, const char **name) {
    keys_fn fns[3] = {keys_portable, NULL, NULL};
#ifdef HAVE_X86_VARIANTS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) fns[1] = keys_avx2;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw"))
        fns[2] = keys_avx512;
#endif
    if (want && *want) {
        for (int v = 0; v < 3; v++)
            if (!strcmp(want, VARIANTS[v])) {
                *name = VARIANTS[v];
                return fns[v];
            }
        *name = NULL;
        return NULL;
    }
    for (int v = 2; v >= 0; v--)
        if (fns[v]) {
            *name = VARIANTS[v];
            return fns[v];
        }
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

PyDoc_STRVAR(scores_doc,
"scores(mode, kind, pos_words, pos_floats, active, tok_words, tok_bits, tok_len, keys,\n"
"       key_len, n, depth, null_mean, denom, threshold, all_green, vocab, bits, psi,\n"
"       best, arg, variant='')\n\n"
"Per key k and prefix i: best[k, i] = the align (mode 0) or edit (mode 1) score of the\n"
"first i + 1 tokens under key k, maximised over the key_len cyclic offsets, and arg[k, i]\n"
"the first best offset (arg may be empty: not computed).  The evidence of token i at key\n"
"position m is the sampler's centred statistic (kind: 0 kgw, 1 exp, 2 its, 3 binary) of\n"
"pos_words[k, m] and token i, or 0 where active[k, m] is 0.  Buffers (C order):\n"
"pos_words uint64 [keys, key_len]; pos_floats float64 [keys, key_len] (its) or empty;\n"
"active uint8 [keys, key_len]; tok_words uint64 [n, depth]; tok_bits uint8 [n, depth] and\n"
"tok_len int64 [n] (binary) or empty; best float64 [keys, n]; arg int64 [keys, n] or\n"
"empty.  variant: '' (the widest build this CPU runs), 'portable', 'avx2' or 'avx512'.\n"
"Releases the GIL.");

static PyObject *scores(PyObject *self, PyObject *args, PyObject *kwargs) {
    (void)self;
    static char *keywords[] = {"mode", "kind", "pos_words", "pos_floats", "active",
                               "tok_words", "tok_bits", "tok_len", "keys", "key_len", "n",
                               "depth", "null_mean", "denom", "threshold", "all_green",
                               "vocab", "bits", "psi", "best", "arg", "variant", NULL};
    int mode, kind, all_green, bits;
    Py_ssize_t keys, key_len, n, depth;
    double null_mean, denom, psi;
    unsigned long long threshold, vocab;
    const char *variant = "";
    Py_buffer pw, pf, ac, tw, tb, tl, best, arg;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iiy*y*y*y*y*y*nnnnddKpKidw*w*|s", keywords,
                                     &mode, &kind, &pw, &pf, &ac, &tw, &tb, &tl, &keys,
                                     &key_len, &n, &depth, &null_mean, &denom, &threshold,
                                     &all_green, &vocab, &bits, &psi, &best, &arg, &variant))
        return NULL;
    PyObject *result = NULL;
    double *work = NULL;
    const char *name = NULL;
    keys_fn fn = pick(variant, &name);
    if (!fn) {
        PyErr_Format(PyExc_ValueError, "variant '%s' is not built or not run by this CPU",
                     variant);
        goto done;
    }
    if (mode != MODE_ALIGN && mode != MODE_EDIT) {
        PyErr_SetString(PyExc_ValueError, "mode must be 0 (align) or 1 (edit)");
        goto done;
    }
    if (kind < 0 || kind >= KINDS) {
        PyErr_SetString(PyExc_ValueError, "kind must be 0 kgw, 1 exp, 2 its or 3 binary");
        goto done;
    }
    if (keys < 0 || key_len < 1 || n < 1 || depth < 1 || (kind != KIND_BINARY && depth != 1)) {
        PyErr_SetString(PyExc_ValueError, "need keys >= 0, key_len >= 1, n >= 1 and depth >= 1 "
                        "(1 unless binary)");
        goto done;
    }
    if (kind == KIND_ITS && (bits < 1 || bits > 62 || vocab < 2 || vocab > (1ULL << bits))) {
        PyErr_SetString(PyExc_ValueError, "its: need 2 <= vocab <= 2**bits, bits in [1, 62]");
        goto done;
    }
    if (need(&pw, keys * key_len, 8, "pos_words") || need(&ac, keys * key_len, 1, "active") ||
        need(&tw, n * depth, 8, "tok_words") || need(&best, keys * n, 8, "best") ||
        (kind == KIND_ITS && need(&pf, keys * key_len, 8, "pos_floats")) ||
        (kind == KIND_BINARY && (need(&tb, n * depth, 1, "tok_bits") ||
                                 need(&tl, n, 8, "tok_len"))) ||
        (arg.len && need(&arg, keys * n, 8, "arg")))
        goto done;
    if (kind == KIND_ITS) {
        const uint64_t *t = tw.buf;
        for (Py_ssize_t i = 0; i < n; i++)
            if (t[i] >= vocab) {
                PyErr_SetString(PyExc_ValueError, "its: token outside the vocabulary");
                goto done;
            }
    }
    if (kind == KIND_BINARY) {
        const int64_t *t = tl.buf;
        for (Py_ssize_t i = 0; i < n; i++)
            if (t[i] < 1 || t[i] > depth) {
                PyErr_SetString(PyExc_ValueError, "binary: path lengths must lie in [1, depth]");
                goto done;
            }
    }
    plan_t p = {
        .kind = kind, .keys = keys, .key_len = key_len, .n = n, .depth = depth,
        .pos_words = pw.buf, .pos_floats = pf.buf, .active = ac.buf, .tok_words = tw.buf,
        .tok_bits = tb.buf, .tok_len = tl.buf, .null_mean = null_mean, .denom = denom,
        .threshold = threshold, .all_green = all_green, .vocab = vocab, .bits = bits,
        .psi = psi, .best = best.buf, .arg = arg.len ? arg.buf : NULL,
    };
    /* align: a row of evidence and the L running sums; edit: the rows of one key
     * (n x key_len), a tiled window and the DP state of EDIT_LANES offsets */
    size_t words = mode == MODE_ALIGN
        ? 3 * (size_t)key_len
        : (size_t)n * key_len + (size_t)key_len + (size_t)n + EDIT_LANES +
              (size_t)(n + 1) * EDIT_LANES;
    work = aligned_alloc(64, (sizeof(double) * words + 63) / 64 * 64);
    if (!work) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    fn(&p, mode, 0, keys, work);
    Py_END_ALLOW_THREADS
    result = PyUnicode_FromString(name);
done:
    free(work);
    PyBuffer_Release(&pw);
    PyBuffer_Release(&pf);
    PyBuffer_Release(&ac);
    PyBuffer_Release(&tw);
    PyBuffer_Release(&tb);
    PyBuffer_Release(&tl);
    PyBuffer_Release(&best);
    PyBuffer_Release(&arg);
    return result;
}

PyDoc_STRVAR(variants_doc,
"variants() -> list of str\n\nThe builds of the loops this CPU runs, narrowest first.");

static PyObject *variants(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    for (int v = 0; v < 3; v++) {
        const char *name;
        if (pick(VARIANTS[v], &name)) {
            PyObject *s = PyUnicode_FromString(name);
            if (!s || PyList_Append(out, s)) {
                Py_XDECREF(s);
                Py_DECREF(out);
                return NULL;
            }
            Py_DECREF(s);
        }
    }
    return out;
}

static PyMethodDef methods[] = {
    {"scores", (PyCFunction)(void (*)(void))scores, METH_VARARGS | METH_KEYWORDS, scores_doc},
    {"variants", variants, METH_NOARGS, variants_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_offset_scores",
    "align and edit scores of the fixed-key detectors, compiled (kernels/offset_scores.c).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__offset_scores(void) { return PyModule_Create(&module); }
