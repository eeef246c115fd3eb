/*
 * pssm_mma.h - the dialect's warp-level matrix multiply-accumulate on 16x16 tiles (the SSD's
 * chunked products).  One interface and one semantics on every target; what runs underneath is
 * the target's business:
 *   tensor-core instructions where the target has them (PSSM_MMA_TENSOR16 is 1 there),
 *   an FMA loop elsewhere (and always for f32 operands, which keep f32 accuracy).
 *
 *   acc (16x16, f32) += A (16x16) . B (16x16)     A[m][k] = a[m * lda + k]
 *                                                 B[k][n] = b[n * ldb + k]
 * pssm_mma16_*: both operands K-contiguous (B given as its transpose, N rows of K), normally in
 * shared memory; for the 16-bit forms lda and ldb are even and a, b 4-byte aligned.
 * pssm_mma16t_* (the tile form, below): either operand in either orientation, 16-byte aligned
 * rows.  Every lane of the warp calls with the same arguments (the tensor instructions are
 * warp-collective).
 *
 * The accumulator is PSSM_MMA_ACC floats per lane in a target-defined arrangement: acc[i] of
 * lane `lane` is element (pssm_mma_row(lane, i), pssm_mma_col(lane, i)) of the tile.  Kernels
 * initialise, scale, mask and store it only through those two functions, never by assuming an
 * arrangement.
 */
#ifndef PSSM_MMA_H
#define PSSM_MMA_H
#include "pssm_dialect.h"

#define PSSM_MMA_ACC (256 / PSSM_WARP_SIZE) /* accumulator elements per lane */

/* ---------------------------------------------------------------- the arrangements
 * Each as a pure function of (lane, i), defined on every target so that the host can check
 * all of them (tests/test_dialect.c: each is a bijection onto the 16x16 tile); the target's
 * pssm_mma_row / pssm_mma_col below is one of them.
 *
 * FMA form: element e = i * warp + lane of the tile, row-major. */
PSSM_DEVICE int pssm_mma_fma_row(int warp, int lane, int i) { return (i * warp + lane) >> 4; }
PSSM_DEVICE int pssm_mma_fma_col(int warp, int lane, int i) { return (i * warp + lane) & 15; }

/* NVIDIA mma.sync (warp 32, 8 per lane): the f32 accumulator of m16n8k* for the left (i < 4)
 * and right (i >= 4) n8 halves of the tile; lane = 4 * group + t holds rows group and
 * group + 8, columns 2t and 2t + 1 of each half. */
PSSM_DEVICE int pssm_mma_nv_row(int lane, int i) { return (lane >> 2) + 8 * ((i >> 1) & 1); }
PSSM_DEVICE int pssm_mma_nv_col(int lane, int i) { return 8 * (i >> 2) + 2 * (lane & 3) + (i & 1); }

/* AMD CDNA MFMA f32_16x16x16 (wave 64, 4 per lane): lane holds column lane % 16, rows
 * 4 * (lane / 16) + i. */
PSSM_DEVICE int pssm_mma_cdna_row(int lane, int i) { return 4 * (lane >> 4) + i; }
PSSM_DEVICE int pssm_mma_cdna_col(int lane, int i) { return lane & 15; }

/* ---------------------------------------------------------------- the target's choice
 * PSSM_MMA_TENSOR_F16 / _BF16: that form runs on tensor instructions here.  PSSM_MMA_TENSOR16
 * is 1 where at least one 16-bit form does (sm_75 and gfx908 have f16 only; their bf16 form is
 * the FMA loop, in the same arrangement).  nvcc and hipcc preprocess device code once per
 * target architecture, so these differ between the images of one build. */
#if defined(PSSM_TARGET_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
#define PSSM_MMA_NV 1
#define PSSM_MMA_TENSOR_F16 1
#define PSSM_MMA_TENSOR_BF16 (__CUDA_ARCH__ >= 800)
#elif defined(PSSM_TARGET_HIP) &&                                                              \
    (defined(__gfx908__) || defined(__gfx90a__) || defined(__gfx940__) ||                       \
     defined(__gfx941__) || defined(__gfx942__))
#if PSSM_WARP_SIZE != 64
#error "pssm_mma.h: CDNA with a warp other than 64"
#endif
#define PSSM_MMA_CDNA 1
#define PSSM_MMA_TENSOR_F16 1
#if defined(__gfx908__) /* gfx908 has bf16 MFMA only with k = 8 (no _1k forms): FMA here */
#define PSSM_MMA_TENSOR_BF16 0
#else
#define PSSM_MMA_TENSOR_BF16 1
#endif
#else
#define PSSM_MMA_TENSOR_F16 0
#define PSSM_MMA_TENSOR_BF16 0
#endif

#define PSSM_MMA_TENSOR16 (PSSM_MMA_TENSOR_F16 || PSSM_MMA_TENSOR_BF16)


/* The sim at warp 32 arranges its FMA form as NVIDIA's tensor instructions do, so that the
 * kernels' paths for paired columns (PSSM_MMA_PAIRS) run in CI; at warp 64 it keeps the FMA
 * arrangement (the unpaired paths). */
#if defined(PSSM_MMA_NV) || (defined(PSSM_TARGET_SIM) && PSSM_WARP_SIZE == 32)
#define PSSM_MMA_NV_ARRANGEMENT 1
PSSM_DEVICE int pssm_mma_row(int lane, int i) { return pssm_mma_nv_row(lane, i); }
PSSM_DEVICE int pssm_mma_col(int lane, int i) { return pssm_mma_nv_col(lane, i); }
#elif defined(PSSM_MMA_CDNA)
PSSM_DEVICE int pssm_mma_row(int lane, int i) { return pssm_mma_cdna_row(lane, i); }
PSSM_DEVICE int pssm_mma_col(int lane, int i) { return pssm_mma_cdna_col(lane, i); }
#else
PSSM_DEVICE int pssm_mma_row(int lane, int i) { return pssm_mma_fma_row(PSSM_WARP_SIZE, lane, i); }
PSSM_DEVICE int pssm_mma_col(int lane, int i) { return pssm_mma_fma_col(PSSM_WARP_SIZE, lane, i); }
#endif

/* PSSM_MMA_PAIRS: 1 where acc[i] and acc[i + 1] (i even) are adjacent columns of one row, so
 * that a kernel may move them as one 8-byte pair (NVIDIA's arrangement). */
#if defined(PSSM_MMA_NV_ARRANGEMENT)
#define PSSM_MMA_PAIRS 1
#else
#define PSSM_MMA_PAIRS 0
#endif

/* ---------------------------------------------------------------- tensor forms */

#if defined(PSSM_MMA_NV) || defined(PSSM_MMA_CDNA)
/* Two adjacent 16-bit values (the lower k in the low half) as one 32-bit load: p is 4-byte
 * aligned since lda, ldb and every k offset used are even.  may_alias: the operands were
 * usually stored as 16-bit values. */
typedef uint32_t PSSM_ALIGN(4) __attribute__((may_alias)) pssm_mma_u32a;
PSSM_DEVICE uint32_t pssm_mma_ld2(const uint16_t *p) { return *(const pssm_mma_u32a *)p; }
#endif

#if defined(PSSM_MMA_NV)
/* acc[4h .. 4h+3] += A[16 x 16] . B[16 x 8 columns of half h]: one m16n8k16 (sm_80+); A
 * fragment: rows g, g + 8 and k pairs 2t, 2t + 8; B fragment: column g, k pairs 2t, 2t + 8. */
#define PSSM_MMA_NV_K16(ty)                                                                     \
    const int lane = PSSM_LANE, g = lane >> 2, t = lane & 3;                                    \
    const uint16_t *ar = a + g * lda + 2 * t;                                                   \
    const uint32_t a0 = pssm_mma_ld2(ar), a1 = pssm_mma_ld2(ar + 8 * lda);                      \
    const uint32_t a2 = pssm_mma_ld2(ar + 8), a3 = pssm_mma_ld2(ar + 8 * lda + 8);              \
    PSSM_UNROLL                                                                                 \
    for (int h = 0; h < 2; h++) {                                                               \
        const uint16_t *br = b + (8 * h + g) * ldb + 2 * t;                                     \
        const uint32_t b0 = pssm_mma_ld2(br), b1 = pssm_mma_ld2(br + 8);                        \
        float *d = acc + 4 * h;                                                                 \
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." ty "." ty ".f32 "                \
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"          \
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                           \
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));                   \
    }

/* sm_75: four m16n8k8 (k halves kk, n halves h), f16 only; the same accumulator. */
#define PSSM_MMA_NV_K8_F16                                                                      \
    const int lane = PSSM_LANE, g = lane >> 2, t = lane & 3;                                    \
    PSSM_UNROLL                                                                                 \
    for (int kk = 0; kk < 16; kk += 8) {                                                        \
        const uint16_t *ar = a + g * lda + kk + 2 * t;                                          \
        const uint32_t a0 = pssm_mma_ld2(ar), a1 = pssm_mma_ld2(ar + 8 * lda);                  \
        PSSM_UNROLL                                                                             \
        for (int h = 0; h < 2; h++) {                                                           \
            const uint32_t b0 = pssm_mma_ld2(b + (8 * h + g) * ldb + kk + 2 * t);               \
            float *d = acc + 4 * h;                                                             \
            asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "                   \
                         "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"                  \
                         : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                       \
                         : "r"(a0), "r"(a1), "r"(b0));                                          \
        }                                                                                       \
    }
#endif /* PSSM_MMA_NV */

#if defined(PSSM_MMA_CDNA)
typedef _Float16 pssm_mma_half4 __attribute__((ext_vector_type(4)));
typedef short pssm_mma_short4 __attribute__((ext_vector_type(4)));
typedef float pssm_mma_float4 __attribute__((ext_vector_type(4)));

#endif /* PSSM_MMA_CDNA */

/* ---------------------------------------------------------------- the tile form
 * pssm_mma16t_*: the same product with either operand in either orientation, for kernels whose
 * shared tiles are straight copies of token-major activations (no transposing stores):
 *
 *   A[m][k] = at ? a[k * lda + m] : a[m * lda + k]
 *   B[k][n] = bt ? b[k * ldb + n] : b[n * ldb + k]
 *
 * at and bt are constants at every call (the forms fold after inlining).  For the 16-bit forms
 * every 8-element row segment the product reads starts 16-byte aligned: a and b 16-byte
 * aligned, lda and ldb multiples of 8.  On NVIDIA (sm_75+) that lets ldmatrix load each
 * operand's fragments in one instruction (.trans for a transposed orientation) instead of four
 * to eight 32-bit shared loads; for conflict-free loads make lda / 2 and ldb / 2 (in words) an
 * odd multiple of 4.  Elsewhere the orientation is only indexing: the FMA form (f32 always,
 * 16-bit forms without tensor instructions) in the target's arrangement, whichever it is. */
#define PSSM_MMA_FMA_T_BODY(load)                                                               \
    const int lane = PSSM_LANE;                                                                 \
    PSSM_UNROLL                                                                                 \
    for (int i = 0; i < PSSM_MMA_ACC; i++) {                                                    \
        const int m = pssm_mma_row(lane, i), n = pssm_mma_col(lane, i);                         \
        float s = acc[i];                                                                       \
        PSSM_UNROLL                                                                             \
        for (int k = 0; k < 16; k++)                                                            \
            s += load(a[at ? k * lda + m : m * lda + k]) * load(b[bt ? k * ldb + n : n * ldb + k]); \
        acc[i] = s;                                                                             \
    }

#if defined(PSSM_MMA_NV)
/* The 32-bit shared-window address of a generic pointer into shared memory. */
PSSM_DEVICE uint32_t pssm_mma_smem_addr(const void *p)
{
    uint32_t a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

/* Four 8x8 16-bit matrices, one row address per lane (lanes 8q..8q+7: matrix q's rows); r[q]
 * is matrix q's fragment: element (lane / 4, 2 (lane % 4) + {0, 1}) of it, or of its
 * transpose with .trans. */
#define PSSM_MMA_NV_LDSM_AT(r, addr, trans)                                                     \
    asm volatile("ldmatrix.sync.aligned.m8n8.x4" trans ".shared.b16 {%0, %1, %2, %3}, [%4];"    \
                 : "=r"((r)[0]), "=r"((r)[1]), "=r"((r)[2]), "=r"((r)[3])                       \
                 : "r"(addr))
#define PSSM_MMA_NV_LDSM(r, p, trans) PSSM_MMA_NV_LDSM_AT(r, pssm_mma_smem_addr(p), trans)

/* A's fragments (a0..a3 of m16n8k16: rows g / g + 8, k pairs 2t / 2t + 8) and B's (b0, b1 of
 * the left n8 half, then of the right), loaded by matrices: q = lane / 8 takes A's block
 * (m half q & 1, k half q >> 1) and B's block (n half q >> 1, k half q & 1). */
#define PSSM_MMA_NV_T_FRAGS                                                                     \
    const int lane = PSSM_LANE, q = lane >> 3, i8 = lane & 7;                                   \
    uint32_t fa[4], fb[4];                                                                      \
    if (at)                                                                                     \
        PSSM_MMA_NV_LDSM(fa, a + (8 * (q >> 1) + i8) * lda + 8 * (q & 1), ".trans");            \
    else                                                                                        \
        PSSM_MMA_NV_LDSM(fa, a + (8 * (q & 1) + i8) * lda + 8 * (q >> 1), "");                  \
    if (bt)                                                                                     \
        PSSM_MMA_NV_LDSM(fb, b + (8 * (q & 1) + i8) * ldb + 8 * (q >> 1), ".trans");            \
    else                                                                                        \
        PSSM_MMA_NV_LDSM(fb, b + (8 * (q >> 1) + i8) * ldb + 8 * (q & 1), "");

#define PSSM_MMA_NV_T_K16(ty)                                                                   \
    PSSM_MMA_NV_T_FRAGS                                                                         \
    PSSM_UNROLL                                                                                 \
    for (int h = 0; h < 2; h++) {                                                               \
        float *d = acc + 4 * h;                                                                 \
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." ty "." ty ".f32 "                \
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"          \
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                           \
                     : "r"(fa[0]), "r"(fa[1]), "r"(fa[2]), "r"(fa[3]), "r"(fb[2 * h]),          \
                       "r"(fb[2 * h + 1]));                                                     \
    }

/* sm_75: the same fragments through m16n8k8 (k halves kk: A's a0/a1 then a2/a3). */
#define PSSM_MMA_NV_T_K8_F16                                                                    \
    PSSM_MMA_NV_T_FRAGS                                                                         \
    PSSM_UNROLL                                                                                 \
    for (int kk = 0; kk < 2; kk++)                                                              \
        PSSM_UNROLL                                                                             \
        for (int h = 0; h < 2; h++) {                                                           \
            float *d = acc + 4 * h;                                                             \
            asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "                   \
                         "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"                  \
                         : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                       \
                         : "r"(fa[2 * kk]), "r"(fa[2 * kk + 1]), "r"(fb[2 * h + kk]));          \
        }
#endif /* PSSM_MMA_NV */

#if defined(PSSM_MMA_CDNA)
/* Two 16-bit elements p[0] and p[stride] as one 32-bit word (p[0] in the low half). */
PSSM_DEVICE uint32_t pssm_mma_pair(const uint16_t *p, int stride)
{
    return stride == 1 ? pssm_mma_ld2(p) : (uint32_t)p[0] | (uint32_t)p[stride] << 16;
}

/* The CDNA body with orientations: A[r][4q + j] and B[4q + j][r] as two pairs each. */
#define PSSM_MMA_CDNA_T_BODY(vec, builtin)                                                      \
    const int lane = PSSM_LANE, r = lane & 15, q = lane >> 4;                                   \
    const uint16_t *ap = at ? a + 4 * q * lda + r : a + r * lda + 4 * q;                        \
    const uint16_t *bp = bt ? b + 4 * q * ldb + r : b + r * ldb + 4 * q;                        \
    const int as = at ? lda : 1, bs = bt ? ldb : 1;                                             \
    const uint32_t aw[2] = {pssm_mma_pair(ap, as), pssm_mma_pair(ap + 2 * as, as)};            \
    const uint32_t bw[2] = {pssm_mma_pair(bp, bs), pssm_mma_pair(bp + 2 * bs, bs)};            \
    vec av, bv;                                                                                 \
    __builtin_memcpy(&av, aw, 8);                                                               \
    __builtin_memcpy(&bv, bw, 8);                                                               \
    pssm_mma_float4 c = {acc[0], acc[1], acc[2], acc[3]};                                       \
    c = builtin(av, bv, c, 0, 0, 0);                                                            \
    acc[0] = c[0];                                                                              \
    acc[1] = c[1];                                                                              \
    acc[2] = c[2];                                                                              \
    acc[3] = c[3];
#endif /* PSSM_MMA_CDNA */

PSSM_DEVICE void pssm_mma16t_f32(float *acc, const float *a, int lda, int at, const float *b,
                                 int ldb, int bt)
{
    PSSM_MMA_FMA_T_BODY(pssm_load_f32)
}

PSSM_DEVICE void pssm_mma16t_bf16(float *acc, const pssm_bf16 *a, int lda, int at,
                                  const pssm_bf16 *b, int ldb, int bt)
{
#if defined(PSSM_MMA_NV) && PSSM_MMA_TENSOR_BF16
    PSSM_MMA_NV_T_K16("bf16")
#elif defined(PSSM_MMA_CDNA) && PSSM_MMA_TENSOR_BF16
    PSSM_MMA_CDNA_T_BODY(pssm_mma_short4, __builtin_amdgcn_mfma_f32_16x16x16bf16_1k)
#else
    PSSM_MMA_FMA_T_BODY(pssm_load_bf16)
#endif
}

PSSM_DEVICE void pssm_mma16t_f16(float *acc, const pssm_f16 *a, int lda, int at,
                                 const pssm_f16 *b, int ldb, int bt)
{
#if defined(PSSM_MMA_NV) && __CUDA_ARCH__ >= 800
    PSSM_MMA_NV_T_K16("f16")
#elif defined(PSSM_MMA_NV)
    PSSM_MMA_NV_T_K8_F16
#elif defined(PSSM_MMA_CDNA)
    PSSM_MMA_CDNA_T_BODY(pssm_mma_half4, __builtin_amdgcn_mfma_f32_16x16x16f16)
#else
    PSSM_MMA_FMA_T_BODY(pssm_load_f16)
#endif
}

/* ---------------------------------------------------------------- the strip form
 * pssm_mma16s_*: a warp's strip of nt tiles side by side, over ks steps of 16 along k:
 *
 *   acc[j] += A (16 x 16 ks) . B_j (16 ks x 16),   j < nt,
 *
 * A as in the tile form (a, lda, at); B_j the columns 16 j .. 16 j + 15 of the tile form's B
 * (b, ldb, bt).  nt (at most PSSM_MMA_STRIP_MAX) and ks are constants at every call.  The sums
 * are those of nt * ks tile-form calls in the same order along k, bit for bit.  On NVIDIA
 * (m16n8k16) A's fragments are loaded once for the strip's nt tiles, and each step's fragments
 * are loaded before the previous step's multiplies, so that ldmatrix's latency runs under the
 * mma instead of before it (the SSD kernels' short-scoreboard stalls, run 30).  Elsewhere the
 * tile form, call after call. */
#define PSSM_MMA_STRIP_MAX 4
#define PSSM_MMA_STRIP_A(a, lda, at, k) ((at) ? (a) + (k) * (lda) : (a) + (k))
#define PSSM_MMA_STRIP_B(b, ldb, bt, j, k)                                                      \
    ((bt) ? (b) + 16 * (j) + (k) * (ldb) : (b) + 16 * (j) * (ldb) + (k))
#define PSSM_MMA_STRIP_LOOP(fn)                                                                 \
    PSSM_UNROLL                                                                                 \
    for (int s = 0; s < ks; s++)                                                                \
        PSSM_UNROLL                                                                             \
        for (int j = 0; j < nt; j++)                                                            \
            fn(acc[j], PSSM_MMA_STRIP_A(a, lda, at, 16 * s), lda, at,                           \
               PSSM_MMA_STRIP_B(b, ldb, bt, j, 16 * s), ldb, bt);

#if defined(PSSM_MMA_NV)
/* Step k's fragments of the strip: A's (as PSSM_MMA_NV_T_FRAGS) and each B_j's, from the
 * lane's row addresses in the shared window (al, bl: pssm_mma_nv_lane_addr) plus constants (a
 * conversion and its arithmetic per ldmatrix were 5-6% of the SSD kernels' instructions, H200
 * run 61). */
PSSM_DEVICE uint32_t pssm_mma_nv_lane_addr(const uint16_t *m, int ld, int trans_a, int t)
{
    const int lane = PSSM_LANE, q = lane >> 3, i8 = lane & 7;
    /* A (trans_a): q takes (m half q & 1, k half q >> 1); B: (n half q >> 1, k half q & 1) */
    const int r = trans_a ? (t ? 8 * (q >> 1) : 8 * (q & 1)) : (t ? 8 * (q & 1) : 8 * (q >> 1));
    const int c = trans_a ? (t ? 8 * (q & 1) : 8 * (q >> 1)) : (t ? 8 * (q >> 1) : 8 * (q & 1));
    return pssm_mma_smem_addr(m + (r + i8) * ld + c);
}

PSSM_DEVICE void pssm_mma_nv_strip_frags(uint32_t *fa, uint32_t (*fb)[4], int nt, uint32_t al,
                                         int lda, int at, uint32_t bl, int ldb, int bt, int k)
{
    const uint32_t ak = al + 2u * (uint32_t)(at ? k * lda : k);
    if (at)
        PSSM_MMA_NV_LDSM_AT(fa, ak, ".trans");
    else
        PSSM_MMA_NV_LDSM_AT(fa, ak, "");
    PSSM_UNROLL
    for (int j = 0; j < nt; j++) {
        const uint32_t bk = bl + 2u * (uint32_t)(bt ? 16 * j + k * ldb : 16 * j * ldb + k);
        if (bt)
            PSSM_MMA_NV_LDSM_AT(fb[j], bk, ".trans");
        else
            PSSM_MMA_NV_LDSM_AT(fb[j], bk, "");
    }
}

/* Two buffers of fragments: step s + 1's loads are issued before step s's multiplies (the asm
 * statements are volatile, so they stay in this order). */
#define PSSM_MMA_NV_STRIP_K16(ty)                                                               \
    uint32_t fa[2][4], fb[2][PSSM_MMA_STRIP_MAX][4];                                            \
    const uint32_t al = pssm_mma_nv_lane_addr((const uint16_t *)a, lda, 1, at);                 \
    const uint32_t bl = pssm_mma_nv_lane_addr((const uint16_t *)b, ldb, 0, bt);                 \
    pssm_mma_nv_strip_frags(fa[0], fb[0], nt, al, lda, at, bl, ldb, bt, 0);                     \
    PSSM_UNROLL                                                                                 \
    for (int s = 0; s < ks; s++) {                                                              \
        const int cur = s & 1;                                                                  \
        if (s + 1 < ks)                                                                         \
            pssm_mma_nv_strip_frags(fa[cur ^ 1], fb[cur ^ 1], nt, al, lda, at, bl, ldb, bt,     \
                                    16 * (s + 1));                                              \
        PSSM_UNROLL                                                                             \
        for (int j = 0; j < nt; j++)                                                            \
            PSSM_UNROLL                                                                         \
            for (int h = 0; h < 2; h++) {                                                       \
                float *d = acc[j] + 4 * h;                                                      \
                asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." ty "." ty ".f32 "        \
                             "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"  \
                             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                   \
                             : "r"(fa[cur][0]), "r"(fa[cur][1]), "r"(fa[cur][2]),               \
                               "r"(fa[cur][3]), "r"(fb[cur][j][2 * h]),                         \
                               "r"(fb[cur][j][2 * h + 1]));                                     \
            }                                                                                   \
    }
#endif /* PSSM_MMA_NV */

PSSM_DEVICE void pssm_mma16s_f32(float (*acc)[PSSM_MMA_ACC], int nt, int ks, const float *a,
                                 int lda, int at, const float *b, int ldb, int bt)
{
    PSSM_MMA_STRIP_LOOP(pssm_mma16t_f32)
}

PSSM_DEVICE void pssm_mma16s_bf16(float (*acc)[PSSM_MMA_ACC], int nt, int ks,
                                  const pssm_bf16 *a, int lda, int at, const pssm_bf16 *b,
                                  int ldb, int bt)
{
#if defined(PSSM_MMA_NV) && PSSM_MMA_TENSOR_BF16
    PSSM_MMA_NV_STRIP_K16("bf16")
#else
    PSSM_MMA_STRIP_LOOP(pssm_mma16t_bf16)
#endif
}

PSSM_DEVICE void pssm_mma16s_f16(float (*acc)[PSSM_MMA_ACC], int nt, int ks, const pssm_f16 *a,
                                 int lda, int at, const pssm_f16 *b, int ldb, int bt)
{
#if defined(PSSM_MMA_NV) && __CUDA_ARCH__ >= 800
    PSSM_MMA_NV_STRIP_K16("f16")
#else
    PSSM_MMA_STRIP_LOOP(pssm_mma16t_f16)
#endif
}

/* ---------------------------------------------------------------- the register form
 * pssm_mma16rs_*: a strip as in the strip form, one step of 16 along k, with A in registers:
 *
 *   acc[j] += A (16 x 16) . B_j (16 x 16),   j < nt,
 *
 * A given as a pssm_mma_a16, its 16x16 elements in the accumulator's arrangement (element
 * (pssm_mma_row(lane, i), pssm_mma_col(lane, i)) is value i of the lane) already rounded to the
 * operand type by pssm_mma_a16_* (the same rounding as the operand's stores); B_j as in the
 * strip form (b, ldb, bt).  So that a kernel forms an operand (a masked, weighted product) in
 * the arrangement its accumulator has and multiplies it without a round trip through shared
 * memory and a block barrier.  On NVIDIA (m16n8k16; m16n8k8 for f16 on sm_75) that arrangement
 * of a 16x16 tile is exactly m16n8k16's A fragment: the words are the fragment.  Elsewhere the
 * values go into scratch, a warp-private shared tile of 16 x PSSM_MMA_RS_LD operands (16-byte
 * aligned; PSSM_MMA_RS_SCRATCH operands, fewer on NVIDIA, which never touches it), between two
 * warp barriers, and the strip form multiplies from there.  Every lane of the warp calls it
 * with the same nt, b, ldb, bt and scratch. */
#define PSSM_MMA_RS_LD 24
#if defined(PSSM_MMA_NV)
#define PSSM_MMA_RS_SCRATCH 8
#else
#define PSSM_MMA_RS_SCRATCH (16 * PSSM_MMA_RS_LD)
#endif

/* value pairs (2w, 2w + 1) in word w, the first in the low half */
typedef struct pssm_mma_a16 {
    uint32_t w[PSSM_MMA_ACC / 2];
} pssm_mma_a16;

PSSM_DEVICE pssm_mma_a16 pssm_mma_a16_bf16(const float *am)
{
    pssm_mma_a16 a;
    PSSM_UNROLL
    for (int w = 0; w < PSSM_MMA_ACC / 2; w++)
        a.w[w] = pssm_store_bf16x2(am[2 * w], am[2 * w + 1]);
    return a;
}

PSSM_DEVICE pssm_mma_a16 pssm_mma_a16_f16(const float *am)
{
    pssm_mma_a16 a;
    PSSM_UNROLL
    for (int w = 0; w < PSSM_MMA_ACC / 2; w++)
        a.w[w] = (uint32_t)pssm_store_f16(am[2 * w]) | (uint32_t)pssm_store_f16(am[2 * w + 1]) << 16;
    return a;
}

#if defined(PSSM_MMA_NV)
/* B_j's fragments of the step (as pssm_mma_nv_strip_frags loads them), then the multiplies:
 * m16n8k16, or m16n8k8 over the k halves (A's words 0, 1 then 2, 3) */
#define PSSM_MMA_NV_RS(k8, ty)                                                                  \
    const int lane = PSSM_LANE, q = lane >> 3, i8 = lane & 7;                                   \
    const uint16_t *b16 = (const uint16_t *)b;                                                  \
    uint32_t fb[PSSM_MMA_STRIP_MAX][4];                                                         \
    /* the lane's row address once, in the shared window (32-bit), then B_j's by a constant */  \
    const uint32_t ba = pssm_mma_smem_addr(                                                     \
        bt ? b16 + (8 * (q & 1) + i8) * ldb + 8 * (q >> 1) : b16 + (8 * (q >> 1) + i8) * ldb + 8 * (q & 1)); \
    PSSM_UNROLL                                                                                 \
    for (int j = 0; j < nt; j++) {                                                              \
        const uint32_t bj = ba + 2u * (uint32_t)(PSSM_MMA_STRIP_B(b16, ldb, bt, j, 0) - b16);   \
        if (bt)                                                                                 \
            PSSM_MMA_NV_LDSM_AT(fb[j], bj, ".trans");                                           \
        else                                                                                    \
            PSSM_MMA_NV_LDSM_AT(fb[j], bj, "");                                                 \
    }                                                                                           \
    PSSM_UNROLL                                                                                 \
    for (int j = 0; j < nt; j++)                                                                \
        PSSM_UNROLL                                                                             \
        for (int h = 0; h < 2; h++) {                                                           \
            float *d = acc[j] + 4 * h;                                                          \
            if (k8) {                                                                           \
                PSSM_UNROLL                                                                     \
                for (int kk = 0; kk < 2; kk++)                                                  \
                    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "           \
                                 "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"          \
                                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])               \
                                 : "r"(a.w[2 * kk]), "r"(a.w[2 * kk + 1]),                      \
                                   "r"(fb[j][2 * h + kk]));                                     \
            } else {                                                                            \
                asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." ty "." ty ".f32 "        \
                             "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"  \
                             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                   \
                             : "r"(a.w[0]), "r"(a.w[1]), "r"(a.w[2]), "r"(a.w[3]),              \
                               "r"(fb[j][2 * h]), "r"(fb[j][2 * h + 1]));                       \
            }                                                                                   \
        }
#endif

/* Elsewhere: the values into scratch at their positions, then the strip form. */
#define PSSM_MMA_RS_STAGED(fns)                                                                 \
    const int lane = PSSM_LANE;                                                                 \
    uint16_t *const sc = (uint16_t *)scratch;                                                   \
    PSSM_SYNC_WARP(); /* the previous call's reads are done */                                  \
    PSSM_UNROLL                                                                                 \
    for (int i = 0; i < PSSM_MMA_ACC; i++)                                                      \
        sc[pssm_mma_row(lane, i) * PSSM_MMA_RS_LD + pssm_mma_col(lane, i)] =                    \
            (uint16_t)(a.w[i / 2] >> (16 * (i & 1)));                                           \
    PSSM_SYNC_WARP();                                                                           \
    fns(acc, nt, 1, scratch, PSSM_MMA_RS_LD, 0, b, ldb, bt);

PSSM_DEVICE void pssm_mma16rs_bf16(float (*acc)[PSSM_MMA_ACC], int nt, pssm_mma_a16 a,
                                   const pssm_bf16 *b, int ldb, int bt, pssm_bf16 *scratch)
{
#if defined(PSSM_MMA_NV) && PSSM_MMA_TENSOR_BF16
    (void)scratch;
    PSSM_MMA_NV_RS(0, "bf16")
#else
    PSSM_MMA_RS_STAGED(pssm_mma16s_bf16)
#endif
}

PSSM_DEVICE void pssm_mma16rs_f16(float (*acc)[PSSM_MMA_ACC], int nt, pssm_mma_a16 a,
                                  const pssm_f16 *b, int ldb, int bt, pssm_f16 *scratch)
{
#if defined(PSSM_MMA_NV)
    (void)scratch;
    PSSM_MMA_NV_RS(__CUDA_ARCH__ < 800, "f16")
#else
    PSSM_MMA_RS_STAGED(pssm_mma16s_f16)
#endif
}
#undef PSSM_MMA_RS_STAGED

/* ---------------------------------------------------------------- the interface
 * pssm_mma16_*: K-contiguous operands with 4-byte alignment only (lda, ldb even): on NVIDIA by
 * 32-bit shared loads of the fragments; elsewhere the tile form's orientation at = bt = 0. */

PSSM_DEVICE void pssm_mma16_f32(float *acc, const float *a, int lda, const float *b, int ldb)
{
    pssm_mma16t_f32(acc, a, lda, 0, b, ldb, 0);
}

PSSM_DEVICE void pssm_mma16_bf16(float *acc, const pssm_bf16 *a, int lda, const pssm_bf16 *b,
                                 int ldb)
{
#if defined(PSSM_MMA_NV) && PSSM_MMA_TENSOR_BF16
    PSSM_MMA_NV_K16("bf16")
#else
    pssm_mma16t_bf16(acc, a, lda, 0, b, ldb, 0);
#endif
}

PSSM_DEVICE void pssm_mma16_f16(float *acc, const pssm_f16 *a, int lda, const pssm_f16 *b,
                                int ldb)
{
#if defined(PSSM_MMA_NV) && __CUDA_ARCH__ >= 800
    PSSM_MMA_NV_K16("f16")
#elif defined(PSSM_MMA_NV)
    PSSM_MMA_NV_K8_F16
#else
    pssm_mma16t_f16(acc, a, lda, 0, b, ldb, 0);
#endif
}

#endif /* PSSM_MMA_H */
