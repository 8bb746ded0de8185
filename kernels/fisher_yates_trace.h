/*
 * The body of trace_lanes, included by kernels/fisher_yates.c once per build variant, with
 * TRACE_FN (the function's name), TRACE_TARGET (its target attribute, or nothing) and
 * LANES_MIN (a lane-wise unsigned minimum) defined.
 */
#define TRACE_JOIN2(a, b) a##b
#define TRACE_JOIN(a, b) TRACE_JOIN2(a, b)
#define SCAN_FN TRACE_JOIN(TRACE_FN, _scan)

/* The least probe (see probe) of each lane over the CHUNK steps from mt[0]: the divisors
 * n - i alternate in parity, and an odd one needs no rotate; odd_first says whether the
 * first one is odd (CHUNK is even). */
TRACE_TARGET
static inline __attribute__((always_inline)) lanes_t SCAN_FN(
        const lanes_t *mt, lanes_t off, const uint32_t *inverse, const uint32_t *shift,
        int odd_first) {
    lanes_t least = ~(lanes_t){0};
    for (uint32_t q = 0; q < CHUNK; q += 2) {
        lanes_t a = (tempered(mt[q]) - off) * inverse[q];
        lanes_t b = (tempered(mt[q + 1]) - (off - 1u)) * inverse[q + 1];
        if (odd_first)
            b = rotr(b, shift[q + 1]);
        else
            a = rotr(a, shift[q]);
        least = LANES_MIN(least, LANES_MIN(a, b));
        off -= 2u;
    }
    return least;
}

/* Up to LANES (seed, target) pairs; out[l] = 1 when target l is green. */
TRACE_TARGET
static void TRACE_FN(const uint32_t *seeds, const uint32_t *targets, int count, uint32_t n,
                     uint32_t size, const steps_t *st, uint8_t *out) {
    lanes_t mt[MT_N];
    lanes_t state = {0}, offset;
    uint32_t pos[LANES], push[LANES];
    int live[LANES], remaining = count;
    uint32_t next_push = NEVER;
    const uint32_t *inverse = st->inverse, *shift = st->shift, *limit = st->limit;
    for (int l = 0; l < LANES; l++) {
        live[l] = l < count;
        pos[l] = live[l] ? targets[l] : NEVER;
        /* the token waits at position pos until a step pulls it; step pos itself pushes it
         * on unless that step fixes it in place */
        push[l] = (live[l] && pos[l] < size) ? pos[l] : NEVER;
        if (push[l] < next_push) next_push = push[l];
        state[l] = live[l] ? seeds[l] : 0;
        offset[l] = live[l] && pos[l] < PARKED ? pos[l] : PARKED; /* p - i at step i = 0 */
        if (live[l]) out[l] = 0;
    }
    mt_seed(mt, state);
    uint32_t i = 0;
    while (i < size && remaining > 0) {
        uint32_t k;
        mt_twist(mt);
        uint32_t stop = size - i < MT_N ? size - i : MT_N;
        k = 0;
        while (k < stop) {
            uint32_t len = stop - k < CHUNK ? stop - k : CHUNK;
            if (next_push - i >= len) {
                /* no push due: test the chunk's steps for pulls, one branch at its end, on the
                 * lanes' least probe against the chunk's largest limit (its last step's: the
                 * divisor shrinks along it) -- a filter; the replay below is exact */
                lanes_t off = offset, least = ~(lanes_t){0};
                if (len == CHUNK) {
                    least = (n - i) & 1u ? SCAN_FN(mt + k, off, inverse + i, shift + i, 1)
                                         : SCAN_FN(mt + k, off, inverse + i, shift + i, 0);
                } else {
                    for (uint32_t q = 0; q < len; q++)
                        least = LANES_MIN(least, probe(tempered(mt[k + q]), off - q,
                                                       inverse[i + q], shift[i + q]));
                }
                off -= len;
                if (!any_lane((lanes_t)(least <= limit[i + len - 1]))) {
                    offset = off;
                    k += len;
                    i += len;
                    continue;
                }
            }
            /* a candidate or a push in this chunk: replay it step by step */
            for (uint32_t q = 0; q < len; q++, k++, i++) {
                lanes_t r = tempered(mt[k]);
                if (any_lane(may_pull(r, offset, inverse[i], shift[i], limit[i])) ||
                    i == next_push) {
                    uint32_t d = n - i;
                    next_push = NEVER;
                    for (int l = 0; l < LANES; l++) {
                        if (!live[l]) continue;
                        uint32_t j = i + r[l] % d;
                        if (j == pos[l]) { /* pulled to position i < size: green, settled */
                            out[l] = 1;
                            live[l] = 0;
                            remaining--;
                            offset[l] = PARKED;
                            push[l] = NEVER;
                        } else if (i == pos[l]) { /* pushed on to j */
                            pos[l] = j;
                            offset[l] = j - i;
                            push[l] = j < size ? j : NEVER;
                        }
                        if (push[l] < next_push) next_push = push[l];
                    }
                }
                offset -= 1u;
            }
        }
    }
}


#undef SCAN_FN
