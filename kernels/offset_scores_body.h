/*
 * The loops of kernels/offset_scores.c, included there once per build variant with
 * BODY_SUFFIX (a name suffix) and BODY_TARGET (a target attribute, or nothing) defined.
 * Every variant performs the same scalar operations lane by lane: only the vector width
 * differs, never a result.
 */
#define BODY_JOIN2(a, b) a##_##b
#define BODY_JOIN(a, b) BODY_JOIN2(a, b)
#define BODY_FN(name) BODY_JOIN(name, BODY_SUFFIX)

/* row[m] = M[k, i, m] for m < key_len: the centred statistic of token i against key position
 * m of key k (Sampler.centered_stat), or +0.0 where the position is skipped (_offset_matrix).
 * scratch: key_len words. Branch-free loops, so that they vectorize. */
BODY_TARGET
static void BODY_FN(stat_row)(const plan_t *p, Py_ssize_t k, Py_ssize_t i, double *restrict row,
                              uint64_t *restrict scratch) {
    const Py_ssize_t L = p->key_len;
    const uint64_t *restrict seeds = p->pos_words + k * L;
    const uint8_t *restrict active = p->active + k * L;
    switch (p->kind) {
    case KIND_KGW: { /* f64(below(pair(seed, code(token)), gamma)) - gamma */
        const uint64_t code = p->tok_words[i], threshold = p->threshold;
        const uint64_t all = p->all_green ? 1 : 0, one = double_bits(1.0);
        const double gamma = p->null_mean;
        for (Py_ssize_t m = 0; m < L; m++) {
            uint64_t green = (uint64_t)(mix64(seeds[m] ^ code) < threshold) | all;
            double v = bits_double(one & mask_of(green)) - gamma; /* 1.0 or +0.0, - gamma */
            row[m] = select_bits(mask_of(active[m]), v, 0.0);
        }
        break;
    }
    case KIND_EXP: { /* neg_log_uniform(complement(pair(seed, code(token)))) - 1.0 */
        /* the words first, then the floats: two loops that vectorize on their own (the
         * float one also where 64-bit multiplies do not, e.g. the portable x86-64 build) */
        const uint64_t code = p->tok_words[i];
        for (Py_ssize_t m = 0; m < L; m++) scratch[m] = ~mix64(seeds[m] ^ code);
        for (Py_ssize_t m = 0; m < L; m++) {
            double v = neg_log_uniform(scratch[m]) - 1.0;
            row[m] = select_bits(mask_of(active[m]), v, 0.0);
        }
        break;
    }
    case KIND_ITS: { /* (1.0 - |u(seed) - f64(rank) / (V - 1)|) - its_null_mean(V) */
        const uint64_t token = p->tok_words[i], vocab = p->vocab;
        const int bits = p->bits;
        const double *restrict u = p->pos_floats + k * L;
        for (Py_ssize_t m = 0; m < L; m++) scratch[m] = feistel_once(seeds[m], token, bits);
        for (Py_ssize_t m = 0; m < L; m++) /* cycle walking: a few per cent of the ranks */
            while (scratch[m] >= vocab) scratch[m] = feistel_once(seeds[m], scratch[m], bits);
        const double denom = p->denom, null_mean = p->null_mean;
        for (Py_ssize_t m = 0; m < L; m++) {
            double eta = u53_to_double(scratch[m]) / denom;
            double d = bits_double(double_bits(u[m] - eta) & 0x7FFFFFFFFFFFFFFFULL); /* |.| */
            double v = (1.0 - d) - null_mean;
            row[m] = select_bits(mask_of(active[m]), v, 0.0);
        }
        break;
    }
    default: { /* binary: ordered_sum over the path of where(valid, bit_stat - 1.0, 0.0) */
        const Py_ssize_t D = p->depth, len = p->tok_len[i];
        const uint64_t *restrict nodes = p->tok_words + i * D;
        const uint8_t *restrict bits = p->tok_bits + i * D;
        /* len >= 1: the root's bit starts the sum; bit 1 takes the complement of the word
         * (its uniform is 1 - u) */
        for (Py_ssize_t d = 0; d < len; d++) {
            const uint64_t node = nodes[d], flip = mask_of(bits[d]);
            for (Py_ssize_t m = 0; m < L; m++) scratch[m] = mix64(seeds[m] ^ node) ^ flip;
            if (d == 0)
                for (Py_ssize_t m = 0; m < L; m++) row[m] = neg_log_uniform(scratch[m]) - 1.0;
            else
                for (Py_ssize_t m = 0; m < L; m++)
                    row[m] = row[m] + (neg_log_uniform(scratch[m]) - 1.0);
        }
        for (Py_ssize_t d = len; d < D; d++) /* the padding adds 0.0, as numpy's sum does */
            for (Py_ssize_t m = 0; m < L; m++) row[m] = row[m] + 0.0;
        for (Py_ssize_t m = 0; m < L; m++) row[m] = select_bits(mask_of(active[m]), row[m], 0.0);
        break;
    }
    }
}

/* kernels/align.py align_prefix for key k: acc[j] = sum over i' <= i of M[i', (i' + j) mod L],
 * added in numpy.cumsum's order, then its maximum (and first maximal j) over the offsets */
BODY_TARGET
static void BODY_FN(align_key)(const plan_t *p, Py_ssize_t k, double *work) {
    const Py_ssize_t L = p->key_len, n = p->n;
    double *restrict row = work, *restrict acc = work + L;
    uint64_t *restrict scratch = (uint64_t *)(work + 2 * L);
    double *best = p->best + k * n;
    int64_t *arg = p->arg ? p->arg + k * n : NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        BODY_FN(stat_row)(p, k, i, row, scratch);
        Py_ssize_t r = i % L;
        if (i == 0) {
            memcpy(acc, row, sizeof(double) * L);
        } else {
            for (Py_ssize_t j = 0; j < L - r; j++) acc[j] += row[j + r];
            for (Py_ssize_t j = L - r; j < L; j++) acc[j] += row[j + r - L];
        }
        double mx = acc[0];
        Py_ssize_t j = 0;
        if (L >= 8) {
            double lane[8];
            for (int q = 0; q < 8; q++) lane[q] = acc[q];
            for (j = 8; j + 8 <= L; j += 8)
                for (int q = 0; q < 8; q++) lane[q] = acc[j + q] > lane[q] ? acc[j + q] : lane[q];
            for (int q = 0; q < 8; q++) mx = lane[q] > mx ? lane[q] : mx;
        }
        for (; j < L; j++) mx = acc[j] > mx ? acc[j] : mx;
        best[i] = mx;
        if (arg) {
            Py_ssize_t at = 0;
            while (acc[at] != mx) at++;
            arg[i] = at;
        }
    }
}

/* kernels/align.py edit_prefix for key k.  Its DP state E[j, c] (offset j, key column c) is
 * swept EDIT_LANES offsets at a time (one vector), over all n rows, with the arithmetic of
 * the numpy code:
 *   cur[c] = max(prev[c] - psi, prev[c - 1] + W[i, (j + c - 1) mod L])  (c >= 1),
 *   cur[0] = prev[0] - psi, then a running max along c,
 * where W = M + psi; the prefix score of row i is max_j cur[j, i + 1] - psi * (i + 1).
 * No -0.0 arises: E starts at +0, psi >= 0 and a sum or difference is -0 only from -0
 * operands, so max's choice between equal values never shows in the bits. */
BODY_TARGET
static void BODY_FN(edit_key)(const plan_t *p, Py_ssize_t k, double *work) {
    const Py_ssize_t L = p->key_len, n = p->n;
    const double psi = p->psi;
    double *restrict W = work;                               /* [n, L] */
    uint64_t *restrict scratch = (uint64_t *)(W + n * L);    /* [L] */
    double *restrict win = W + n * L + L;                    /* [n + EDIT_LANES - 1] */
    double *restrict E = win + n + EDIT_LANES;               /* [n + 1, EDIT_LANES] */
    double *best = p->best + k * n;
    int64_t *arg = p->arg ? p->arg + k * n : NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        double *wi = W + i * L;
        BODY_FN(stat_row)(p, k, i, wi, scratch);
        for (Py_ssize_t m = 0; m < L; m++) wi[m] = wi[m] + psi;
    }
    const Py_ssize_t width = n + EDIT_LANES - 1;
    enum { NV = EDIT_LANES / VEC_N };
    const VEC psi_v = VEC_SET1(psi);
    for (Py_ssize_t b0 = 0; b0 < L; b0 += EDIT_LANES) {
        const Py_ssize_t lanes = L - b0 < EDIT_LANES ? L - b0 : EDIT_LANES;
        memset(E, 0, sizeof(double) * (size_t)(n + 1) * EDIT_LANES);
        for (Py_ssize_t i = 0; i < n; i++) {
            /* win[t] = W[i, (b0 + t) mod L]: lane q reads win[q + c - 1] at column c */
            const double *wi = W + i * L;
            Py_ssize_t t = 0, from = b0;
            while (t < width) {
                Py_ssize_t take = L - from < width - t ? L - from : width - t;
                memcpy(win + t, wi + from, sizeof(double) * take);
                t += take;
                from = 0;
            }
            VEC old[NV], run[NV];
            for (int v = 0; v < NV; v++) {
                old[v] = VEC_LOAD(E + v * VEC_N);
                run[v] = VEC_SUB(old[v], psi_v);
                VEC_STORE(E + v * VEC_N, run[v]);
            }
            for (Py_ssize_t c = 1; c <= n; c++) {
                double *e = E + c * EDIT_LANES;
                const double *w = win + c - 1;
                for (int v = 0; v < NV; v++) {
                    VEC prev = VEC_LOAD(e + v * VEC_N);
                    VEC x = VEC_MAX(VEC_SUB(prev, psi_v), VEC_ADD(old[v], VEC_LOAD(w + v * VEC_N)));
                    run[v] = VEC_MAX(x, run[v]);
                    old[v] = prev;
                    VEC_STORE(e + v * VEC_N, run[v]);
                }
            }
            const double *diag = E + (i + 1) * EDIT_LANES;
            for (Py_ssize_t q = 0; q < lanes; q++)
                if ((b0 == 0 && q == 0) || diag[q] > best[i]) {
                    best[i] = diag[q];
                    if (arg) arg[i] = b0 + q;
                }
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) best[i] = best[i] - psi * (double)(i + 1);
}

BODY_TARGET
static void BODY_FN(keys)(const plan_t *p, int mode, Py_ssize_t k0, Py_ssize_t k1, double *work) {
    for (Py_ssize_t k = k0; k < k1; k++) {
        if (mode == MODE_ALIGN)
            BODY_FN(align_key)(p, k, work);
        else
            BODY_FN(edit_key)(p, k, work);
    }
}

#undef BODY_JOIN2
#undef BODY_JOIN
#undef BODY_FN
