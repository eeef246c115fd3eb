/*
 * conv1d_update.body.h - causal_conv1d_update (decode) of one dtype (conv1d_dtype.body.h) for
 * the width PSSM_C1_W in 1..8 (stamped for 2..4), or for the width p.width when PSSM_C1_W is 0:
 * pssm_conv1d_update_w<W>_<dt> and pssm_conv1d_update_any_<dt>.
 *
 * One thread per (b, d) channel, channels fastest so a warp's accesses stay together.  A thread
 * computes all T outputs from the state as it was, then rewrites its own state row, so the
 * in-place update needs no barrier.  (One thread per 16-byte vector of channels was tried: at
 * B64 D4096 W4 bf16 it took 6.7 us against 4.7 on an H200, too few threads to hide latency.)
 */
#if PSSM_C1_W > 0
#define C1U_NAME PSSM_C1_CAT4(pssm_conv1d_update_w, PSSM_C1_W, _, PSSM_C1_DT)
#define C1U_W PSSM_C1_W
#define C1U_UNROLL PSSM_UNROLL
#define C1U_WGT(k) wv[k]
#else
#define C1U_NAME PSSM_C1_CAT2(pssm_conv1d_update_any_, PSSM_C1_DT)
#define C1U_W p.width
#define C1U_UNROLL
#define C1U_WGT(k) pssm_load_any(p.weight, d * p.w_sd + (k)*p.w_sw, p.weight_dtype)
#endif

PSSM_C1_KERNEL_BOUNDED(C1U_NAME, pssm_conv1d_update_params, p, PSSM_C1_BLOCK)
{
    const int64_t threads = PSSM_GRIDDIM_X * PSSM_BLOCKDIM_X;
    const int64_t S = p.state_len, T = p.tokens, hw = (int64_t)C1U_W - 1;
    for (int64_t item = PSSM_BLOCK_X * PSSM_BLOCKDIM_X + PSSM_THREAD_X; item < p.work;
         item += threads) {
        const int64_t b = pssm_c1_div(item, p.dim), d = item - b * p.dim;
        const PSSM_C1_T *x = (const PSSM_C1_T *)p.x + b * p.x_sb + d * p.x_sd;
        PSSM_C1_T *o = (PSSM_C1_T *)p.out + b * p.o_sb + d * p.o_sd;
        const int64_t row = p.state_indices ? (int64_t)p.state_indices[b * p.indices_s] : b;
        if (row < 0 || row >= p.pool) {
            PSSM_NOUNROLL
            for (int64_t i = 0; i < T; i++)
                o[i * p.o_st] = PSSM_C1_ST(0.0f);
            continue;
        }
        PSSM_C1_T *st = (PSSM_C1_T *)p.state + row * p.s_sb + d * p.s_sd;
        /* Window position pos < 0 (pos >= -(W-1) >= -S) is state slot base + pos, wrapped:
         * the shift register reads its last W-1 slots, the ring buffer the W-1 slots before
         * cache_seqlens mod S. */
        const int64_t head = p.cache_seqlens
                                 ? pssm_c1_emod(p.cache_seqlens[b * p.seqlens_s], S)
                                 : 0;
        const int64_t base = p.cache_seqlens ? head : S;
#if PSSM_C1_W > 0
        float wv[PSSM_C1_W];
        PSSM_C1_FN(load_params)(wv, 1, PSSM_C1_W, p.weight, d * p.w_sd, 0, p.w_sw,
                                p.weight_dtype);
#endif
        const float bv = p.bias ? pssm_load_any(p.bias, d * p.bias_sd, p.weight_dtype) : 0.0f;
#if PSSM_C1_W > 0
        if (T == 1) { /* the decode step: every load first and at once, then the stores */
            PSSM_C1_T win[PSSM_C1_W]; /* the W-1 state entries of the window, then x */
            PSSM_UNROLL
            for (int k = 0; k + 1 < PSSM_C1_W; k++) {
                const int64_t s = base - hw + k;
                win[k] = st[(s < 0 ? s + S : s) * p.s_ss];
            }
            win[PSSM_C1_W - 1] = x[0];
            float acc = bv;
            PSSM_UNROLL
            for (int k = 0; k < PSSM_C1_W; k++)
                acc += wv[k] * PSSM_C1_LD(win[k]);
            pssm_c1_activate(&acc, 1, p.silu);
            o[0] = PSSM_C1_ST(acc);
            if (p.cache_seqlens) {
                st[head * p.s_ss] = win[PSSM_C1_W - 1];
            } else { /* slot j takes slot j+1; the last W slots come from registers */
                PSSM_NOUNROLL
                for (int64_t j = 0; j + 1 < S - hw; j++)
                    st[j * p.s_ss] = st[(j + 1) * p.s_ss];
                PSSM_UNROLL
                for (int k = 0; k < PSSM_C1_W; k++)
                    if (S - PSSM_C1_W + k >= 0)
                        st[(S - PSSM_C1_W + k) * p.s_ss] = win[k];
            }
            continue;
        }
#endif

        PSSM_NOUNROLL
        for (int64_t i = 0; i < T; i++) {
            float acc = bv;
            C1U_UNROLL
            for (int k = 0; k < C1U_W; k++) {
                const int64_t pos = i - hw + k;
                float v;
                if (pos >= 0) {
                    v = PSSM_C1_LD(x[pos * p.x_st]);
                } else {
                    int64_t s = base + pos;
                    s = s < 0 ? s + S : s;
                    v = PSSM_C1_LD(st[s * p.s_ss]);
                }
                acc += C1U_WGT(k) * v;
            }
            pssm_c1_activate(&acc, 1, p.silu);
            o[i * p.o_st] = PSSM_C1_ST(acc);
        }

        if (p.cache_seqlens) { /* x[i] to slot (cache_seqlens + i) mod S; later tokens win */
            const int64_t first = T > S ? T - S : 0;
            int64_t s = pssm_c1_emod(head + first, S);
            PSSM_NOUNROLL
            for (int64_t i = first; i < T; i++) {
                st[s * p.s_ss] = x[i * p.x_st];
                s = s + 1 == S ? 0 : s + 1;
            }
        } else { /* the last S of [state | x], in increasing slot order (reads run ahead) */
            PSSM_NOUNROLL
            for (int64_t j = 0; j < S; j++) {
                const int64_t src = j + T;
                st[j * p.s_ss] = src < S ? st[src * p.s_ss] : x[(src - S) * p.x_st];
            }
        }
    }
}

#undef C1U_NAME
#undef C1U_W
#undef C1U_UNROLL
#undef C1U_WGT
