/*
 * evalrun.kernels._fisher_yates: is a token among the first `size` entries of the CPU
 * torch.randperm(n) of a generator seeded with a 32-bit seed?  Compiled twin of the numpy
 * trace in kernels/fisher_yates.py, which states the algorithm and is the fallback when this
 * module was not built; tests require both to give the same flags.
 *
 * Why compiled: a selfhash text seeds a new generator at almost every token, and deciding
 * one token takes up to `size` mt19937 outputs (8,000 at V = 32,000, gamma = 0.25).  numpy
 * draws them one by one through a function pointer; here eight generators run side by side
 * in one vector register (GCC/Clang vector extensions; on x86-64 a second build for AVX2 is
 * picked at load time), and the test "does step i pull from the token's position p", i.e.
 * r_i mod (n - i) == p - i, is an exact divisibility test of r_i - (p - i) by n - i with a
 * multiply, a rotate (only for even n - i) and a compare (Granlund and Montgomery 1994, as
 * in Hacker's Delight, 2nd ed., section 10-17).  Over a chunk of steps the lanes keep only
 * their least product, compared once at the chunk's end: a filter; the rare chunks that
 * pass it, and the steps that push a token on, are replayed with the plain remainder.  A
 * token found green is settled at once; sixteen groups of lanes run block by block, and the
 * lanes still running are moved into as few groups as hold them, so a green token stops
 * costing draws (most tokens of a watermarked text are green).
 *
 * The same generators also draw whole prefixes of the permutation (`randperm`, and packed
 * into membership bits, `green_bits`): lefthash green lists and the selfhash hashint table,
 * so that reference-compatible detection needs no torch.  Tests compare them with
 * torch.randperm itself.
 *
 * Facts reproduced (not code): torch's CPUGeneratorImpl seeds mt19937 with the low 32 bits
 * and the standard init_genrand recurrence; randperm_cpu (ATen TensorFactories.cpp, n below
 * 2**32 / 20) swaps r[i] with r[i + random() % (n - i)] for i = 0 .. n - 2, random() being the
 * next tempered 32-bit output (Matsumoto and Nishimura 1998).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MT_N 624
#define MT_M 397
#define LANES 8
#define NEVER UINT32_MAX
#define PARKED 0x7FFFFFFFu /* a lane's offset once settled: far from every divisor's range */
#define CHUNK 16 /* steps tested between two branches on the lanes' results */

typedef uint32_t lanes_t __attribute__((vector_size(4 * LANES)));

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__APPLE__)
#define LANE_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define LANE_CLONES
#endif

/* Per step i: the divisor d = n - i as odd * 2**shift, the inverse of odd modulo 2**32, and
 * floor((2**32 - 1) / d).  x is a multiple of d iff rotr(x * inverse, shift) <= limit. */
typedef struct {
    uint32_t *inverse, *shift, *limit;
} steps_t;

static int steps_init(steps_t *st, uint32_t n, uint32_t size) {
    uint32_t *mem = malloc(3 * sizeof(uint32_t) * (size ? size : 1));
    if (!mem) return -1;
    st->inverse = mem;
    st->shift = mem + size;
    st->limit = mem + 2 * (size_t)size;
    for (uint32_t i = 0; i < size; i++) {
        uint32_t d = n - i, k = (uint32_t)__builtin_ctz(d), odd = d >> k, inv = odd;
        for (int it = 0; it < 5; it++) inv *= 2u - odd * inv; /* Newton: 3, 6, 12, 24, 48 bits */
        st->inverse[i] = inv;
        st->shift[i] = k;
        st->limit[i] = UINT32_MAX / d;
    }
    return 0;
}

/* init_genrand's recurrence: state word j of LANES generators from word j - 1 */
static inline lanes_t mt_seed_next(lanes_t prev, uint32_t j) {
    return 1812433253u * (prev ^ (prev >> 30)) + j;
}

/* init_genrand: the state of LANES generators from their 32-bit seeds */
static inline void mt_seed(lanes_t *mt, lanes_t state) {
    mt[0] = state;
    for (uint32_t j = 1; j < MT_N; j++) mt[j] = mt_seed_next(mt[j - 1], j);
}

/* the next `count` (at most MT_N) untempered outputs, in place: output k needs only state
 * words k, k + 1 and k + MT_M (mod MT_N), so a last block that draws fewer than MT_N twists
 * no more; the state is then no generator's and must not be drawn from again */
static inline void mt_twist(lanes_t *mt, uint32_t count) {
    uint32_t k, first = count < MT_N - MT_M ? count : MT_N - MT_M;
    uint32_t second = count < MT_N ? count : MT_N - 1;
    lanes_t y;
    for (k = 0; k < first; k++) {
        y = (mt[k] & 0x80000000u) | (mt[k + 1] & 0x7fffffffu);
        mt[k] = mt[k + MT_M] ^ (y >> 1) ^ (-(y & 1u) & 0x9908b0dfu);
    }
    for (; k < second; k++) {
        y = (mt[k] & 0x80000000u) | (mt[k + 1] & 0x7fffffffu);
        mt[k] = mt[k + MT_M - MT_N] ^ (y >> 1) ^ (-(y & 1u) & 0x9908b0dfu);
    }
    if (count < MT_N) return;
    y = (mt[MT_N - 1] & 0x80000000u) | (mt[0] & 0x7fffffffu);
    mt[MT_N - 1] = mt[MT_M - 1] ^ (y >> 1) ^ (-(y & 1u) & 0x9908b0dfu);
}

/* mt19937's output tempering */
static inline lanes_t tempered(lanes_t r) {
    r ^= r >> 11;
    r ^= (r << 7) & 0x9d2c5680u;
    r ^= (r << 15) & 0xefc60000u;
    return r ^ (r >> 18);
}

/* x rotated right by 1 <= shift <= 31 */
static inline lanes_t rotr(lanes_t x, uint32_t shift) {
    return (x >> shift) | (x << (32 - shift));
}

/* (r - offset) * inverse, rotated right by shift: at most the step's limit iff r - offset is a
 * multiple of the step's divisor (exact for r >= offset; a wrapped r - offset may pass too,
 * and is settled by the remainder) */
static inline lanes_t probe(lanes_t r, lanes_t offset, uint32_t inverse, uint32_t shift) {
    lanes_t x = (r - offset) * inverse;
    return shift ? rotr(x, shift) : x;
}

/* all ones in the lanes where step i may pull the token (see probe) */
static inline lanes_t may_pull(lanes_t r, lanes_t offset, uint32_t inverse, uint32_t shift,
                               uint32_t limit) {
    return (lanes_t)(probe(r, offset, inverse, shift) <= limit);
}

static inline int any_lane(lanes_t v) {
    uint64_t words[LANES / 2], any = 0;
    memcpy(words, &v, sizeof words);
    for (int q = 0; q < LANES / 2; q++) any |= words[q];
    return any != 0;
}

/* LANES (seed, target) pairs traced side by side: their generators (state column l of mt),
 * and per lane the token's position, the step that would push it on, p - i, and the pair it
 * answers (-1: an empty lane) */
typedef struct {
    lanes_t mt[MT_N];
    lanes_t offset;
    uint32_t pos[LANES], push[LANES], next_push;
    int pair[LANES], live;
} group_t;

/* groups traced block by block together: 16 of them (320 KiB) stay in a core's L2 cache */
#define COHORT 16

/* Moves the running lanes of the emptiest groups into the free lanes of the others while
 * some group can be emptied that way: a lane's whole state goes with it. */
static void compact_groups(group_t *groups, int used) {
    for (;;) {
        int running = 0, free_lanes = 0, donor = -1;
        for (int gi = 0; gi < used; gi++) {
            if (groups[gi].live == 0) continue;
            running++;
            free_lanes += LANES - groups[gi].live;
            if (donor < 0 || groups[gi].live < groups[donor].live) donor = gi;
        }
        group_t *src = &groups[donor];
        /* the donor's own free lanes do not count: its lanes must fit in the others' */
        if (running < 2 || free_lanes - (LANES - src->live) < src->live) return;
        for (int l = 0; l < LANES && src->live > 0; l++) {
            if (src->pair[l] < 0) continue;
            group_t *dst = NULL;
            for (int gi = 0; gi < used && !dst; gi++)
                if (gi != donor && groups[gi].live > 0 && groups[gi].live < LANES)
                    dst = &groups[gi];
            int m = 0;
            while (dst->pair[m] >= 0) m++;
            for (uint32_t j = 0; j < MT_N; j++) dst->mt[j][m] = src->mt[j][l];
            dst->offset[m] = src->offset[l];
            dst->pos[m] = src->pos[l];
            dst->push[m] = src->push[l];
            dst->pair[m] = src->pair[l];
            if (dst->push[m] < dst->next_push) dst->next_push = dst->push[m];
            dst->live++;
            src->pair[l] = -1;
            src->live--;
        }
    }
}

/* trace_lanes, twice: portable vector code, and (x86-64, GCC or Clang) an AVX2 build whose
 * per-chunk filter keeps the lanes' running minimum in one instruction per step; the AVX2 one
 * is picked at load time where the CPU has it */
typedef void (*trace_fn)(const uint32_t *, const uint32_t *, int, uint32_t, uint32_t,
                         const steps_t *, uint8_t *, group_t *);

/* lane-wise unsigned minimum by compare and select (GCC does not make this one vpminud) */
static inline lanes_t lanes_min_portable(lanes_t a, lanes_t b) {
    lanes_t a_less = (lanes_t)(a < b);
    return (a & a_less) | (b & ~a_less);
}

#define TRACE_FN trace_lanes_portable
#define TRACE_TARGET
#define LANES_MIN(a, b) lanes_min_portable(a, b)
#include "fisher_yates_trace.h"
#undef TRACE_FN
#undef TRACE_TARGET
#undef LANES_MIN

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_TRACE_AVX2 1
#define TRACE_FN trace_lanes_avx2
#define TRACE_TARGET __attribute__((target("avx2")))
#define LANES_MIN(a, b) ((lanes_t)_mm256_min_epu32((__m256i)(a), (__m256i)(b)))
#include "fisher_yates_trace.h"
#undef TRACE_FN
#undef TRACE_TARGET
#undef LANES_MIN
#endif

static trace_fn best_trace(void) {
#ifdef HAVE_TRACE_AVX2
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) return trace_lanes_avx2;
#endif
    return trace_lanes_portable;
}

/* The first `size` entries of randperm(n) for up to LANES seeds: the draws side by side, the
 * swaps lane by lane in `work` (count * n items).  Written as count rows of `size` ids to
 * `ids`, or as count rows of ceil(n / 8) bytes to `bits`, numpy.packbits order (token t is
 * bit 7 - t % 8 of byte t / 8), whichever is not NULL. */
LANE_CLONES
static void randperm_lanes(const uint32_t *seeds, int count, uint32_t n, uint32_t size,
                           const uint64_t *fastmod, uint32_t *work, uint32_t *ids,
                           uint8_t *bits) {
    lanes_t mt[MT_N];
    lanes_t state = {0};
    for (int l = 0; l < count; l++) {
        state[l] = seeds[l];
        for (uint32_t x = 0; x < n; x++) work[(size_t)l * n + x] = x;
    }
    mt_seed(mt, state);
    /* randperm_cpu stops at i = n - 2; the last entry is then settled */
    uint32_t steps = size < n - 1 ? size : n - 1, i = 0;
    while (i < steps) {
        uint32_t stop = steps - i < MT_N ? steps - i : MT_N;
        mt_twist(mt, stop);
        for (uint32_t k = 0; k < stop; k++, i++) {
            lanes_t r = tempered(mt[k]);
            uint32_t d = n - i;
            for (int l = 0; l < count; l++) {
                uint32_t rem;
#ifdef __SIZEOF_INT128__
                /* r % d without a division (Lemire, Kaser and Kurz 2019): exact for 32-bit
                 * r and d, with fastmod[i] = floor((2**64 - 1) / d) + 1 */
                if (fastmod)
                    rem = (uint32_t)(((unsigned __int128)(fastmod[i] * r[l]) * d) >> 64);
                else
#endif
                    rem = r[l] % d;
                uint32_t *w = work + (size_t)l * n, z = i + rem, held = w[i];
                w[i] = w[z];
                w[z] = held;
            }
        }
    }
    size_t row_bytes = ((size_t)n + 7) / 8;
    for (int l = 0; l < count; l++) {
        const uint32_t *w = work + (size_t)l * n;
        if (ids) memcpy(ids + (size_t)l * size, w, sizeof(uint32_t) * size);
        if (bits) {
            uint8_t *row = bits + (size_t)l * row_bytes;
            memset(row, 0, row_bytes);
            for (uint32_t x = 0; x < size; x++) row[w[x] >> 3] |= (uint8_t)(0x80u >> (w[x] & 7));
        }
    }
}

/* "y*" asks for a plain contiguous byte view: the wrapper passes uint32 arrays */
static int whole_words(Py_buffer *b, const char *name) {
    if (b->len % 4) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes is not a whole number of uint32 items",
                     name, b->len);
        return -1;
    }
    return 0;
}

/* the domain where torch's randperm_cpu shuffles as reproduced here */
static int check_sizes(Py_ssize_t n, Py_ssize_t size) {
    if (n < 1 || n >= (Py_ssize_t)(UINT32_MAX / 20) || size < 0 || size > n) {
        PyErr_Format(PyExc_ValueError,
                     "need 1 <= n < 2**32 / 20 and 0 <= size <= n (n=%zd, size=%zd)", n, size);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(trace_doc,
"trace(seeds, targets, out, n, size, portable=False)\n\n"
"For each pair k: out[k] = 1 if targets[k] is among the first `size` entries of CPU\n"
"torch.randperm(n) seeded with seeds[k], else 0.  seeds and targets: uint32 buffers of\n"
"equal length; out: a writable byte buffer of that many items; 1 <= n < 2**32 / 20,\n"
"0 <= size <= n.  portable=True runs the portable vector code (what CPUs without AVX2\n"
"run) where an AVX2 build would be picked.  Releases the GIL.");

static PyObject *trace(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"seeds", "targets", "out", "n", "size", "portable", NULL};
    Py_buffer seeds, targets, out;
    Py_ssize_t n, size;
    int portable = 0;
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*y*w*nn|p", keywords, &seeds, &targets,
                                     &out, &n, &size, &portable))
        return NULL;
    trace_fn trace_lanes = portable ? trace_lanes_portable : best_trace();
    PyObject *result = NULL;
    if (whole_words(&seeds, "seeds") || whole_words(&targets, "targets")) goto done;
    Py_ssize_t count = seeds.len / 4;
    if (targets.len != seeds.len || out.len != count) {
        PyErr_SetString(PyExc_ValueError,
                        "seeds, targets and out must hold the same number of items");
        goto done;
    }
    if (check_sizes(n, size)) goto done;
    uint8_t *flags = out.buf;
    if (size == 0 || count == 0) {
        memset(flags, 0, (size_t)count);
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    steps_t st;
    if (steps_init(&st, (uint32_t)n, (uint32_t)size)) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t cohort = count < COHORT * LANES ? (count + LANES - 1) / LANES : COHORT;
    group_t *groups = aligned_alloc(64, ((sizeof(group_t) * cohort + 63) / 64) * 64);
    if (!groups) {
        free(st.inverse);
        PyErr_NoMemory();
        goto done;
    }
    const uint32_t *s = seeds.buf, *t = targets.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t b = 0; b < count; b += COHORT * LANES) {
        int pairs = count - b < COHORT * LANES ? (int)(count - b) : COHORT * LANES;
        trace_lanes(s + b, t + b, pairs, (uint32_t)n, (uint32_t)size, &st, flags + b, groups);
    }
    Py_END_ALLOW_THREADS
    free(groups);
    free(st.inverse);
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&seeds);
    PyBuffer_Release(&targets);
    PyBuffer_Release(&out);
    return result;
}

/* randperm and green_bits: `out` holds len(seeds) rows of `row_bytes` bytes each */
static PyObject *draw_prefixes(PyObject *args, int packed) {
    Py_buffer seeds, out;
    Py_ssize_t n, size;
    if (!PyArg_ParseTuple(args, "y*w*nn", &seeds, &out, &n, &size)) return NULL;
    PyObject *result = NULL;
    uint32_t *work = NULL;
    uint64_t *fastmod = NULL;
    if (whole_words(&seeds, "seeds")) goto done;
    if (check_sizes(n, size)) goto done;
    Py_ssize_t count = seeds.len / 4;
    Py_ssize_t row_bytes = packed ? (n + 7) / 8 : 4 * size;
    if (out.len != count * row_bytes) {
        PyErr_Format(PyExc_ValueError, "out must hold len(seeds) * %s bytes",
                     packed ? "ceil(n / 8)" : "size * 4");
        goto done;
    }
    int lanes_max = count < LANES ? (int)count : LANES;
    work = malloc(sizeof(uint32_t) * (size_t)n * (lanes_max ? lanes_max : 1));
    /* one division per step makes the constants: worth it from a full group of lanes on */
    if (count >= LANES) fastmod = malloc(sizeof(uint64_t) * (size ? (size_t)size : 1));
    if (!work || (count >= LANES && !fastmod)) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; fastmod && i < size; i++)
        fastmod[i] = UINT64_MAX / (uint64_t)(n - i) + 1;
    const uint32_t *s = seeds.buf;
    uint8_t *o = out.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t b = 0; b < count; b += LANES) {
        int lanes = count - b < LANES ? (int)(count - b) : LANES;
        uint8_t *row = o + b * row_bytes;
        randperm_lanes(s + b, lanes, (uint32_t)n, (uint32_t)size, fastmod, work,
                       packed ? NULL : (uint32_t *)row, packed ? row : NULL);
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    free(work);
    free(fastmod);
    PyBuffer_Release(&seeds);
    PyBuffer_Release(&out);
    return result;
}

PyDoc_STRVAR(randperm_doc,
"randperm(seeds, out, n, size)\n\n"
"Row k of out (uint32, len(seeds) rows of `size`) = the first `size` entries of CPU\n"
"torch.randperm(n) seeded with seeds[k] (uint32).  1 <= n < 2**32 / 20, 0 <= size <= n.\n"
"Releases the GIL.");

static PyObject *randperm(PyObject *self, PyObject *args) {
    (void)self;
    return draw_prefixes(args, 0);
}

PyDoc_STRVAR(green_bits_doc,
"green_bits(seeds, out, n, size)\n\n"
"As randperm, but row k of out (len(seeds) rows of ceil(n / 8) bytes) is the membership\n"
"mask of that prefix, packed as numpy.packbits packs a boolean row.  Releases the GIL.");

static PyObject *green_bits(PyObject *self, PyObject *args) {
    (void)self;
    return draw_prefixes(args, 1);
}

static PyMethodDef methods[] = {
    {"trace", (PyCFunction)(void (*)(void))trace, METH_VARARGS | METH_KEYWORDS, trace_doc},
    {"randperm", randperm, METH_VARARGS, randperm_doc},
    {"green_bits", green_bits, METH_VARARGS, green_bits_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fisher_yates",
    "torch's CPU randperm prefixes and membership in them, compiled (kernels/fisher_yates.c).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__fisher_yates(void) { return PyModule_Create(&module); }
