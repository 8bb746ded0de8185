/*
 * The body of trace_lanes, included by kernels/fisher_yates.c once per build variant, with
 * TRACE_FN (the function's name), TRACE_TARGET (its target attribute, or nothing) and
 * LANES_MIN (a lane-wise unsigned minimum) defined.
 */
#define TRACE_JOIN2(a, b) a##b
#define TRACE_JOIN(a, b) TRACE_JOIN2(a, b)
#define SCAN_FN TRACE_JOIN(TRACE_FN, _scan)
#define BLOCK_FN TRACE_JOIN(TRACE_FN, _block)

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

/* One block of steps [i, i + stop) for one group, its generators twisted to that block. */
TRACE_TARGET
static void BLOCK_FN(group_t *g, uint32_t i, uint32_t stop, uint32_t n, uint32_t size,
                     const steps_t *st, uint8_t *out) {
    const uint32_t *inverse = st->inverse, *shift = st->shift, *limit = st->limit;
    lanes_t *mt = g->mt, offset = g->offset;
    uint32_t k = 0;
    while (k < stop && g->live > 0) {
        uint32_t len = stop - k < CHUNK ? stop - k : CHUNK;
        if (g->next_push - i >= len) {
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
                i == g->next_push) {
                uint32_t d = n - i;
                g->next_push = NEVER;
                for (int l = 0; l < LANES; l++) {
                    if (g->pair[l] < 0) continue;
                    uint32_t j = i + r[l] % d;
                    if (j == g->pos[l]) { /* pulled to position i < size: green, settled */
                        out[g->pair[l]] = 1;
                        g->pair[l] = -1;
                        g->live--;
                        offset[l] = PARKED;
                        g->push[l] = NEVER;
                    } else if (i == g->pos[l]) { /* pushed on to j */
                        g->pos[l] = j;
                        offset[l] = j - i;
                        g->push[l] = j < size ? j : NEVER;
                    }
                    if (g->push[l] < g->next_push) g->next_push = g->push[l];
                }
            }
            offset -= 1u;
        }
    }
    /* a group left early (all settled) is not run again; its offsets no longer matter */
    g->offset = offset - (stop - k);
}

/* Up to COHORT * LANES (seed, target) pairs; out[k] = 1 when target k is green.  The groups
 * of a cohort run block by block, and after each block the lanes still running are moved
 * into as few groups as hold them (their generators' state columns with them: every group
 * is at the same step), so a lane settled early stops costing draws. */
TRACE_TARGET
static void TRACE_FN(const uint32_t *seeds, const uint32_t *targets, int count, uint32_t n,
                     uint32_t size, const steps_t *st, uint8_t *out, group_t *groups) {
    int used = (count + LANES - 1) / LANES;
    for (int gi = 0; gi < used; gi++) {
        group_t *g = &groups[gi];
        lanes_t state = {0};
        g->live = 0;
        g->next_push = NEVER;
        for (int l = 0; l < LANES; l++) {
            int k = gi * LANES + l;
            int live = k < count;
            g->pair[l] = live ? k : -1;
            g->pos[l] = live ? targets[k] : NEVER;
            /* the token waits at position pos until a step pulls it; step pos itself pushes
             * it on unless that step fixes it in place */
            g->push[l] = (live && g->pos[l] < size) ? g->pos[l] : NEVER;
            if (g->push[l] < g->next_push) g->next_push = g->push[l];
            state[l] = live ? seeds[k] : 0;
            g->offset[l] = live && g->pos[l] < PARKED ? g->pos[l] : PARKED; /* p - i, i = 0 */
            if (live) out[k] = 0;
            g->live += live;
        }
        g->mt[0] = state;
    }
    /* init_genrand of all groups word by word: one group's recurrence is a chain of
     * dependent multiplies (latency-bound alone), the groups' chains are independent */
    for (uint32_t j = 1; j < MT_N; j++)
        for (int gi = 0; gi < used; gi++)
            groups[gi].mt[j] = mt_seed_next(groups[gi].mt[j - 1], j);
    for (uint32_t i = 0; i < size;) {
        uint32_t stop = size - i < MT_N ? size - i : MT_N;
        int running = 0;
        for (int gi = 0; gi < used; gi++) {
            if (groups[gi].live == 0) continue;
            mt_twist(groups[gi].mt, stop);
            BLOCK_FN(&groups[gi], i, stop, n, size, st, out);
            running += groups[gi].live > 0;
        }
        i += stop;
        if (running == 0) break;
        compact_groups(groups, used);
    }
}
#undef SCAN_FN
#undef BLOCK_FN
