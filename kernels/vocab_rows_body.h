/*
 * The vocabulary-wide loops of kernels/vocab_rows.c, included there once per build variant
 * with BODY_SUFFIX (a name suffix) and BODY_TARGET (a target attribute, or nothing) defined.
 * Every variant performs the same scalar operations element by element: only the vector
 * width differs, never a result.  Branch-free loops, so that they vectorize.
 */
#define BODY_JOIN2(a, b) a##_##b
#define BODY_JOIN(a, b) BODY_JOIN2(a, b)
#define BODY_FN(name) BODY_JOIN(name, BODY_SUFFIX)

/* out[v] = pair(seed, code(v)) = mix64(seed ^ v * GOLDEN) for v in [v0, v0 + n) */
BODY_TARGET
static void BODY_FN(words)(uint64_t seed, Py_ssize_t v0, Py_ssize_t n, uint64_t *restrict out) {
    for (Py_ssize_t i = 0; i < n; i++) out[i] = mix64(seed ^ ((uint64_t)(v0 + i) * GOLDEN));
}

/* x[v] = x[v] + (green ? delta : 0.0f) for v < n: green when the word is below threshold
 * (threshold53(gamma) << 11) or all_green; float32 adds, as numpy's and torch's */
BODY_TARGET
static void BODY_FN(green_add)(float *restrict x, Py_ssize_t n, uint64_t seed, uint64_t threshold,
                               uint32_t all_green, float delta) {
    const uint32_t bits = float_bits(delta);
    for (Py_ssize_t v = 0; v < n; v++) {
        uint32_t green = (uint32_t)(mix64(seed ^ ((uint64_t)v * GOLDEN)) < threshold) | all_green;
        x[v] = x[v] + bits_float(bits & ((uint32_t)0 - green));
    }
}

/* out[v] = green (0 or 1) for v < n */
BODY_TARGET
static void BODY_FN(green_mask)(uint8_t *restrict out, Py_ssize_t n, uint64_t seed,
                                uint64_t threshold, uint8_t all_green) {
    for (Py_ssize_t v = 0; v < n; v++)
        out[v] = (uint8_t)(mix64(seed ^ ((uint64_t)v * GOLDEN)) < threshold) | all_green;
}

/* y[i] = the token whose feistel_rank is j0 + i, for i < n (ranks below vocab): the
 * inverse network, then cycle walking backwards for the few that land outside */
BODY_TARGET
static void BODY_FN(tokens_at)(uint64_t seed, Py_ssize_t j0, Py_ssize_t n, uint64_t vocab,
                               int bits, uint64_t *restrict y) {
    for (Py_ssize_t i = 0; i < n; i++) y[i] = feistel_back(seed, (uint64_t)(j0 + i), bits);
    for (Py_ssize_t i = 0; i < n; i++)
        while (y[i] >= vocab) y[i] = feistel_back(seed, y[i], bits);
}

/* green[v] = green (0 or 1) for v < n, 0 for n <= v < width; gp[v] = p[v] * f32(green) and
 * rp[v] = p[v] * f32(!green), float32 products as torch's (p * mask, NaN * 0 included) */
BODY_TARGET
static void BODY_FN(green_products)(const float *restrict p, Py_ssize_t n, Py_ssize_t width,
                                    uint64_t seed, uint64_t threshold, uint32_t all_green,
                                    uint8_t *restrict green, float *restrict gp,
                                    float *restrict rp) {
    for (Py_ssize_t v = 0; v < width; v++) {
        uint32_t g = ((uint32_t)(mix64(seed ^ ((uint64_t)v * GOLDEN)) < threshold) | all_green) &
                     (uint32_t)(v < n);
        green[v] = (uint8_t)g;
        gp[v] = p[v] * (float)g;
        rp[v] = p[v] * (float)(g ^ 1u);
    }
}

/* MorphMark's transfer over one row (see mass_transfer in vocab_rows.c): float32 divisions,
 * products and sums as torch's, nan_to_num and clamp as selects, so that it vectorizes */
BODY_TARGET
static void BODY_FN(transfer)(const float *restrict p, const uint8_t *restrict green,
                              Py_ssize_t width, float green_mass, float red_mass, float beta,
                              float *restrict out) {
    for (Py_ssize_t v = 0; v < width; v++) {
        float up = nan_to_num(p[v] / green_mass * beta);
        float down = nan_to_num(p[v] / red_mass * beta);
        float plus = p[v] + up, minus = p[v] - down;
        float q = nan_to_num(green[v] ? plus : minus);
        out[v] = q < 0.0f ? 0.0f : q; /* clamp(min=0) keeps -0.0, as torch's max(x, 0) */
    }
}

/* SynthID's tournament over a run of n tokens (see tournament_layer in vocab_rows.c): with
 * g (this layer's g-values, contiguous), p = p * (f32(1 + g) - mass); then with gn (the next
 * layer's), green_p = f32(gn) * p */
BODY_TARGET
static void BODY_FN(tournament_run)(float *restrict p, float *restrict green_p, Py_ssize_t n,
                                    const uint8_t *restrict g, const uint8_t *restrict gn,
                                    float mass) {
    if (g)
        for (Py_ssize_t v = 0; v < n; v++) p[v] = p[v] * ((float)(1u + (uint32_t)g[v]) - mass);
    if (gn)
        for (Py_ssize_t v = 0; v < n; v++) green_p[v] = (float)(uint32_t)gn[v] * p[v];
}

/* torch's float32 sum of a contiguous row of n values (its cascade_sum for an inner
 * reduction, aten/src/ATen/native/cpu/SumKernel.cpp) with LANES-wide vector accumulators:
 * the row as n / LANES vectors read four at a time, each of the four summed in four levels
 * of 2**power steps (power = max(4, ceil(log2(groups)) / 4)), a level emptied into the next
 * every 2**power additions; the leftover vectors into the first sum, the four sums added in
 * order, the leftover values and then the lanes in order into a scalar.  Lane by lane the
 * same float32 additions in the same order, so any vector width gives the bits.  ADD(e, cnt,
 * acc) adds the cnt values from element base + e to acc[0, cnt): the row's own, or values
 * computed in the same pass (straight into the sums: a block stored and loaded again wider stalls
 * store forwarding).  Sets `total`. */
#define TORCH_ROW_SUM(LANES, base, n, ADD)                                                   \
    do {                                                                                      \
        const Py_ssize_t nvec_ = (n) / LANES, groups_ = nvec_ / 4;                            \
        int power_ = ceil_log2(groups_) / 4;                                                  \
        if (power_ < 4) power_ = 4;                                                           \
        const Py_ssize_t step_ = (Py_ssize_t)1 << power_, mask_ = step_ - 1;                  \
        /* level 0 apart from the others, so that it can live in registers */                \
        float a0_[4 * LANES], up_[3][4 * LANES], tail_[LANES];                                \
        for (int l_ = 0; l_ < 4 * LANES; l_++)                                                \
            a0_[l_] = up_[0][l_] = up_[1][l_] = up_[2][l_] = 0.0f;                            \
        Py_ssize_t i_ = 0;                                                                    \
        while (i_ + step_ <= groups_) {                                                       \
            for (Py_ssize_t j_ = 0; j_ < step_; j_++, i_++)                                   \
                ADD((base) + i_ * 4 * LANES, 4 * LANES, a0_);                                 \
            for (int l_ = 0; l_ < 4 * LANES; l_++) {                                          \
                up_[0][l_] += a0_[l_];                                                        \
                a0_[l_] = 0.0f;                                                               \
            }                                                                                 \
            for (int j_ = 1; j_ < 4 && !(i_ & (mask_ << (j_ * power_))); j_++)                \
                if (j_ < 3)                                                                   \
                    for (int l_ = 0; l_ < 4 * LANES; l_++) {                                  \
                        up_[j_][l_] += up_[j_ - 1][l_];                                       \
                        up_[j_ - 1][l_] = 0.0f;                                               \
                    }                                                                         \
        }                                                                                     \
        for (; i_ < groups_; i_++) ADD((base) + i_ * 4 * LANES, 4 * LANES, a0_);              \
        for (int j_ = 0; j_ < 3; j_++)                                                        \
            for (int l_ = 0; l_ < 4 * LANES; l_++) a0_[l_] += up_[j_][l_];                    \
        for (Py_ssize_t v_ = groups_ * 4; v_ < nvec_; v_++) ADD((base) + v_ * LANES, LANES, a0_); \
        for (int k_ = 1; k_ < 4; k_++)                                                        \
            for (int l_ = 0; l_ < LANES; l_++) a0_[l_] += a0_[k_ * LANES + l_];               \
        total = 0.0f;                                                                         \
        if (nvec_ * LANES < (n)) { /* 0 + v is v (-0.0 aside, which adds to total alike) */ \
            for (int l_ = 0; l_ < LANES; l_++) tail_[l_] = 0.0f;                              \
            ADD((base) + nvec_ * LANES, (n) - nvec_ * LANES, tail_);                          \
            for (Py_ssize_t t_ = 0; t_ < (n) - nvec_ * LANES; t_++) total += tail_[t_];       \
        }                                                                                     \
        for (int l_ = 0; l_ < LANES; l_++) total += a0_[l_];                                  \
    } while (0)

/* TORCH_ROW_SUM as torch runs it for n values: with LANES-wide vectors, or for fewer values
 * than a vector holds one value at a time (its scalar loop: the same cascade, one lane) */
#define TORCH_SUM(LANES, base, n, ADD)                                                        \
    do {                                                                                      \
        if ((n) >= LANES)                                                                     \
            TORCH_ROW_SUM(LANES, base, n, ADD);                                               \
        else                                                                                  \
            TORCH_ROW_SUM(1, base, n, ADD);                                                   \
    } while (0)

/* torch's sum of a row of n values as torch.sum(dim=-1) gives it (0 + the sum: the output
 * is zeroed, then added to), `threads` 0 or 1 for a row summed whole (a tensor of several
 * rows, or one summed by one thread), else for one row on that many threads: a row of
 * TORCH_GRAIN values or more is cut into min(threads, ceil(n / grain)) chunks of
 * ceil(n / chunks) (at::parallel_for), each summed alone into its thread's slot of a buffer
 * of `threads` zeros, and the buffer summed (TensorIteratorReduce's two_pass_reduction).
 * Sets `total`. */
#define ADD_BUF(e, cnt, acc) for (Py_ssize_t k_ = 0; k_ < (cnt); k_++) (acc)[k_] += buf_[(e) + k_]
#define TORCH_SUM_AS_CALLED(LANES, n, ADD, threads)                                          \
    do {                                                                                      \
        if ((threads) <= 1 || (n) < TORCH_GRAIN) {                                            \
            TORCH_SUM(LANES, 0, n, ADD);                                                      \
        } else {                                                                              \
            float buf_[MAX_SPLIT];                                                            \
            for (int t_ = 0; t_ < (threads); t_++) buf_[t_] = 0.0f;                           \
            Py_ssize_t used_ = ((n) + TORCH_GRAIN - 1) / TORCH_GRAIN;                         \
            if (used_ > (threads)) used_ = (threads);                                         \
            const Py_ssize_t chunk_ = ((n) + used_ - 1) / used_;                              \
            for (Py_ssize_t t_ = 0; t_ < used_ && t_ * chunk_ < (n); t_++) {                  \
                Py_ssize_t len_ = (n) - t_ * chunk_;                                          \
                if (len_ > chunk_) len_ = chunk_;                                             \
                TORCH_SUM(LANES, t_ * chunk_, len_, ADD);                                     \
                buf_[t_] = 0.0f + total;                                                      \
            }                                                                                 \
            TORCH_SUM(LANES, 0, (threads), ADD_BUF);                                          \
        }                                                                                     \
        total = 0.0f + total;                                                                 \
    } while (0)

/* the row's own values */
#define ADD_COPY(e, cnt, acc)                                                                 \
    for (Py_ssize_t k_ = 0; k_ < (cnt); k_++) (acc)[k_] += x[(e) + k_]

/* SynthID's g-values as this build reads them.  With masked vector operations (AVX-512)
 * bytes, 0 or 1, and the tournament's two products as selects (a conditional is one blend
 * there): f32(1 + g) - mass is c1 = 2 - mass or c0 = 1 - mass (the same two float32
 * operations), f32(g) * q is q or q * 0 (NaN for NaN).  Without them (AVX2, portable) a
 * conditional on bytes becomes a branch per value, 30 times slower on random bits, so the
 * values come as floats (the caller converts the bytes) and the products are the
 * multiplications themselves.  Either way tournament_run's numbers. */
#undef G_T
#undef G_UPDATE
#undef G_TIMES
#ifdef BODY_MASKED_SELECT
#define G_T uint8_t
#define G_UPDATE(gv) ((gv) ? c1 : c0)
#define G_TIMES(gv, q) ((gv) ? (q) : (q) * 0.0f)
#else
#define G_T float
#define G_UPDATE(gv) ((1.0f + (gv)) - mass)
#define G_TIMES(gv, q) ((gv) * (q))
#endif

/* the first layer's green products f32(g) * p of the values from e */
#define ADD_GREEN(e, cnt, acc)                                                                \
    for (Py_ssize_t k_ = 0; k_ < (cnt); k_++) {                                               \
        const float x_ = p[(e) + k_];                                                         \
        (acc)[k_] += G_TIMES(gn[(e) + k_], x_);                                               \
    }

/* one layer of SynthID's tournament over the values from e: p updated with g and mass, then
 * the next layer's green products */
#define ADD_TOURNAMENT(e, cnt, acc)                                                           \
    for (Py_ssize_t k_ = 0; k_ < (cnt); k_++) {                                               \
        const float q_ = p[(e) + k_] * G_UPDATE(g[(e) + k_]);                                 \
        p[(e) + k_] = q_;                                                                     \
        (acc)[k_] += G_TIMES(gn[(e) + k_], q_);                                               \
    }

#define TORCH_ROW_SUMS(LANES)                                                                 \
    BODY_TARGET                                                                               \
    static float BODY_FN(torch_row_sum##LANES)(const float *restrict x, Py_ssize_t n,         \
                                                int threads) {                                \
        float total;                                                                          \
        TORCH_SUM_AS_CALLED(LANES, n, ADD_COPY, threads);                                     \
        return total;                                                                         \
    }                                                                                         \
    /* a row's whole tournament: the first layer's green products summed, then each layer's \
     * update with the next layer's products summed in the same pass (the last: the update \
     * alone); the sums as torch's (TORCH_SUM_AS_CALLED).  ext: the table (0 or 1 each)   \
     * repeated, so that a layer's g-values are the n bytes from its offset o[layer] */      \
    BODY_TARGET                                                                               \
    static void BODY_FN(tournament_row##LANES)(float *restrict p, Py_ssize_t n,              \
                                                const void *ext_,                             \
                                                const Py_ssize_t *o, Py_ssize_t depth,        \
                                                int threads) {                                \
        const G_T *restrict ext = (const G_T *)ext_;                                          \
        float mass, total;                                                                    \
        {                                                                                     \
            const G_T *restrict gn = ext + o[0];                                              \
            TORCH_SUM_AS_CALLED(LANES, n, ADD_GREEN, threads);                                \
            mass = total;                                                                     \
        }                                                                                     \
        for (Py_ssize_t layer = 0; layer + 1 < depth; layer++) {                              \
            const G_T *restrict g = ext + o[layer], *restrict gn = ext + o[layer + 1];        \
            const float c0 = 1.0f - mass, c1 = 2.0f - mass; (void)c0; (void)c1;               \
            TORCH_SUM_AS_CALLED(LANES, n, ADD_TOURNAMENT, threads);                           \
            mass = total;                                                                     \
        }                                                                                     \
        const G_T *restrict g = ext + o[depth - 1];                                           \
        const float c0 = 1.0f - mass, c1 = 2.0f - mass; (void)c0; (void)c1;                   \
        for (Py_ssize_t v = 0; v < n; v++) p[v] = p[v] * G_UPDATE(g[v]);                   \
    }                                                                                         \
    /* the same tournament of one row split as torch splits its sums (threads >= 2, n >=     \
     * TORCH_GRAIN): this call takes chunk `part` of the row through every layer; the calls \
     * for the other chunks, on other threads, meet it at each layer's sum, where each adds \
     * the chunks' sums in torch's order.  0, or -1 when a part did not arrive in time */    \
    BODY_TARGET                                                                               \
    static int BODY_FN(tournament_part##LANES)(float *restrict p, Py_ssize_t n,              \
                                                const void *ext_,                             \
                                                const Py_ssize_t *o, Py_ssize_t depth,        \
                                                int threads, int part, part_state_t *st) {    \
        const G_T *restrict ext = (const G_T *)ext_;                                          \
        Py_ssize_t used = (n + TORCH_GRAIN - 1) / TORCH_GRAIN;                                \
        if (used > threads) used = threads;                                                   \
        const Py_ssize_t chunk = (n + used - 1) / used, b = part * chunk;                     \
        Py_ssize_t len = n - b < chunk ? n - b : chunk;                                       \
        if (len < 0) len = 0;                                                                 \
        float mass = 0.0f, total;                                                             \
        for (Py_ssize_t layer = -1; layer + 1 < depth; layer++) {                             \
            const G_T *restrict g = layer >= 0 ? ext + o[layer] : NULL;                       \
            const G_T *restrict gn = ext + o[layer + 1];                                      \
            const float c0 = 1.0f - mass, c1 = 2.0f - mass; (void)c0; (void)c1;               \
            if (layer < 0)                                                                    \
                TORCH_SUM(LANES, b, len, ADD_GREEN);                                          \
            else                                                                              \
                TORCH_SUM(LANES, b, len, ADD_TOURNAMENT);                                     \
            float *slot = st->buf[(layer + 1) & 1];                                           \
            slot[part] = 0.0f + total;                                                        \
            if (part_barrier(st, (int32_t)(used * (layer + 2)))) return -1;                  \
            const float *buf_ = slot;                                                         \
            TORCH_SUM(LANES, 0, threads, ADD_BUF);                                            \
            mass = 0.0f + total;                                                              \
        }                                                                                     \
        const G_T *restrict g = ext + o[depth - 1];                                           \
        const float c0 = 1.0f - mass, c1 = 2.0f - mass; (void)c0; (void)c1;                   \
        for (Py_ssize_t v = b; v < b + len; v++) p[v] = p[v] * G_UPDATE(g[v]);             \
        return 0;                                                                             \
    }
TORCH_ROW_SUMS(8)
TORCH_ROW_SUMS(16)
#undef TORCH_ROW_SUMS

/* DiPmark's weights from the running sums (see dip_weights in vocab_rows.c): the mapped
 * cdf first (o may be c: c[i] is read before o[i] is written), then the differences from the
 * end back, then the zeros marked and replaced by 1.0; loops without a carried dependency */
BODY_TARGET
static void BODY_FN(dip_weights)(const double *c, Py_ssize_t n, double alpha, double *o,
                                 uint8_t *restrict zero) {
    const double last = c[n - 1], beta = 1.0 - alpha;
    for (Py_ssize_t i = 0; i < n; i++) {
        double q = c[i] / last, a = q - alpha, b = q - beta;
        o[i] = (a < 0.0 ? 0.0 : a) + (b < 0.0 ? 0.0 : b); /* clamp(min=0) keeps NaN, -0.0 */
    }
    for (Py_ssize_t i = n - 1; i >= 1; i--) {
        double d = o[i] - o[i - 1];
        o[i] = d < 0.0 ? 0.0 : d;
    }
    double d0 = o[0] - 0.0;
    o[0] = d0 < 0.0 ? 0.0 : d0;
    for (Py_ssize_t i = 0; i < n; i++) {
        zero[i] = o[i] == 0.0;
        o[i] = o[i] == 0.0 ? 1.0 : o[i];
    }
}

/* y[i] = feistel_rank(seed, v0 + i, vocab) for i < n: one pass of the network over all, then
 * cycle walking for the few that land outside [0, vocab) */
BODY_TARGET
static void BODY_FN(ranks)(uint64_t seed, Py_ssize_t v0, Py_ssize_t n, uint64_t vocab, int bits,
                           uint64_t *restrict y) {
    for (Py_ssize_t i = 0; i < n; i++) y[i] = feistel_once(seed, (uint64_t)(v0 + i), bits);
    for (Py_ssize_t i = 0; i < n; i++)
        while (y[i] >= vocab) y[i] = feistel_once(seed, y[i], bits);
}

/* keyed_argmax's first pass over a block of m tokens from v0 (x points at token v0): their
 * words into w, and the block's largest word, largest input (as an order key of its bits),
 * largest finite |input| (as its bits, which order like the values) and whether it holds a
 * NaN or +inf.  Integer reductions only, so that the loop vectorizes. */
BODY_TARGET
static void BODY_FN(block_words)(uint64_t seed, Py_ssize_t v0, Py_ssize_t m,
                                 uint64_t *restrict w, block_t *out) {
    uint64_t top = 0, bottom = ~0ULL;
    for (Py_ssize_t i = 0; i < m; i++) {
        uint64_t word = mix64(seed ^ ((uint64_t)(v0 + i) * GOLDEN));
        w[i] = word;
        top = word > top ? word : top;
        bottom = word < bottom ? word : bottom;
    }
    out->top_w = top;
    out->bottom_w = bottom;
}

#define BLOCK_STATS(suffix, type, utype, itype, ABS, INF, NEG_INF, SIGN_SHIFT, as_float)     \
    BODY_TARGET                                                                               \
    static void BODY_FN(block_##suffix)(uint64_t seed, Py_ssize_t v0, Py_ssize_t m,           \
                                        const type *restrict x, uint64_t *restrict w,         \
                                        block_t *out) {                                       \
        BODY_FN(block_words)(seed, v0, m, w, out);                                            \
        const utype *restrict xb = (const utype *)x;                                          \
        itype top_key = (itype)((utype)1 << SIGN_SHIFT);                                      \
        utype top_abs = 0;                                                                    \
        for (Py_ssize_t i = 0; i < m; i++) { /* two max reductions: they vectorize */         \
            utype b = xb[i], a = b & ABS;                                                     \
            itype key = (itype)(b ^ ((utype)((itype)b >> SIGN_SHIFT) >> 1));                  \
            top_key = key > top_key ? key : top_key;                                          \
            top_abs = a > top_abs ? a : top_abs;                                              \
        }                                                                                     \
        out->top_key = top_key;                                                               \
        out->odd = 0;                                                                         \
        if (top_abs >= INF) { /* an infinity or NaN: only -inf is an ordinary input */        \
            top_abs = 0;                                                                      \
            for (Py_ssize_t i = 0; i < m; i++) {                                              \
                utype b = xb[i], a = b & ABS;                                                 \
                if (a < INF) top_abs = a > top_abs ? a : top_abs;                             \
                else if (b != NEG_INF) out->odd = 1;                                          \
            }                                                                                 \
        }                                                                                     \
        out->top_abs = (double)as_float(top_abs);                                             \
    }

BLOCK_STATS(f32, float, uint32_t, int32_t, 0x7FFFFFFFu, 0x7F800000u, 0xFF800000u, 31, bits_float)
BLOCK_STATS(f64, double, uint64_t, int64_t, 0x7FFFFFFFFFFFFFFFULL, 0x7FF0000000000000ULL,
            0xFFF0000000000000ULL, 63, bits_double)
#undef BLOCK_STATS

/* keyed_argmax's second pass: flags[i] = 1 for the tokens whose word lies in [w_lo, w_hi]
 * and whose input reaches x_min (float32 inputs widened to double; float64 ones less
 * offset, as the values take them) */
BODY_TARGET
static void BODY_FN(flags_f32)(uint64_t seed, Py_ssize_t v0, Py_ssize_t m, const float *restrict x,
                               uint64_t w_lo, uint64_t w_hi, double x_min, uint8_t *restrict flags) {
    for (Py_ssize_t i = 0; i < m; i++) {
        uint64_t word = mix64(seed ^ ((uint64_t)(v0 + i) * GOLDEN));
        flags[i] = (uint8_t)((word >= w_lo) & (word <= w_hi) & ((double)x[i] >= x_min));
    }
}

BODY_TARGET
static void BODY_FN(flags_f64)(uint64_t seed, Py_ssize_t v0, Py_ssize_t m, const double *restrict x,
                               double offset, uint64_t w_lo, uint64_t w_hi, double x_min,
                               uint8_t *restrict flags) {
    for (Py_ssize_t i = 0; i < m; i++) {
        uint64_t word = mix64(seed ^ ((uint64_t)(v0 + i) * GOLDEN));
        flags[i] = (uint8_t)((word >= w_lo) & (word <= w_hi) & (x[i] - offset >= x_min));
    }
}

#undef BODY_FN
#undef BODY_JOIN
#undef BODY_JOIN2
