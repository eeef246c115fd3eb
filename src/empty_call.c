/*
 * empty_call.c - what an op writes when a tensor of its call has no element (L = 0, B = 0,
 * D = 0, H = 0, P = 0, T = 0, rows = 0: portssm.h, "empty tensors").  Validation accepts those
 * sizes and marks the call (pssm_bctx.empty); the core answers it here, the same on every
 * backend, and no backend sees it.
 *
 * The math of every op reduces to two rules when one of those sizes is 0: an output that still
 * has elements is either a state carried through no step (final_states = initial_states,
 * dinitial_states = dfinal_states, both only when L = 0; zeros where the state is absent), or a
 * sum over no term (dweight, dbias, dA, dB, dC, dD, ddelta_bias, ddt, ddt_bias: zeros).  In-out
 * tensors (decode states) are left as they are; outputs with no element need nothing.
 *
 * Writes go through the backend's memory entries on the context's stream: zeros by
 * memset of each contiguous run of the tensor, copies by a device-to-device copy of each run
 * (which on a GPU waits for the stream, so an empty call that copies a state is refused while
 * the stream is captured into a graph).
 */
#include "empty_call.h"

#include <stdlib.h>
#include <string.h>

/* A tensor as runs of contiguous elements: the dims that index runs (outer) and the run. */
typedef struct runs {
    int n;                   /* outer dims                                   */
    int64_t shape[4];        /* their sizes                                  */
    int64_t dst[4], src[4];  /* their strides in elements, in dst and src    */
    int64_t run;             /* elements per run (contiguous in both)        */
    char *dst_base;
    const char *src_base;    /* NULL: a fill                                 */
} runs;

typedef struct dim {
    int64_t n, d, s;
} dim;

static int by_dst_stride_desc(const void *pa, const void *pb)
{
    const dim *a = pa, *b = pb;
    return (a->d < b->d) - (a->d > b->d);
}

/* Plans the runs of dst (and of src, of dst's shape, where given): dims of size 1 dropped, dst's
 * negative strides turned around (with src's along), dims ordered by dst's stride and merged
 * where both tensors are contiguous across them.  Outputs do not overlap themselves
 * (validation), so every run of dst is written once. */
static void plan(runs *r, const portssm_tensor *dst, const portssm_tensor *src, size_t es)
{
    dim dims[4];
    int n = 0;
    char *d0 = (char *)dst->data;
    const char *s0 = src ? (const char *)src->data : NULL;
    for (int i = 0; i < dst->ndim; i++) {
        if (dst->shape[i] == 1)
            continue;
        dim x = {dst->shape[i], dst->stride[i], src ? src->stride[i] : 0};
        if (x.d < 0) { /* start at the lowest address, walk up */
            d0 += (x.n - 1) * x.d * (int64_t)es;
            if (s0)
                s0 += (x.n - 1) * x.s * (int64_t)es;
            x.d = -x.d;
            x.s = -x.s;
        }
        dims[n++] = x;
    }
    qsort(dims, (size_t)n, sizeof dims[0], by_dst_stride_desc);
    /* merge dim i+1 into dim i where i's stride steps over the whole of i+1, in both */
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m > 0 && dims[m - 1].d == dims[i].d * dims[i].n &&
            (!src || dims[m - 1].s == dims[i].s * dims[i].n)) {
            dims[m - 1].n *= dims[i].n;
            dims[m - 1].d = dims[i].d;
            dims[m - 1].s = dims[i].s;
        } else {
            dims[m++] = dims[i];
        }
    }
    r->run = 1;
    if (m > 0 && dims[m - 1].d == 1 && (!src || dims[m - 1].s == 1))
        r->run = dims[--m].n;
    r->n = m;
    for (int i = 0; i < m; i++) {
        r->shape[i] = dims[i].n;
        r->dst[i] = dims[i].d;
        r->src[i] = dims[i].s;
    }
    r->dst_base = d0;
    r->src_base = s0;
}

/* Fills (src NULL: zeros) or copies every run. */
static portssm_status write_runs(portssm_context *ctx, const runs *r, size_t es)
{
    int64_t idx[4] = {0, 0, 0, 0};
    const size_t bytes = (size_t)r->run * es;
    for (;;) {
        int64_t d = 0, s = 0;
        for (int i = 0; i < r->n; i++) {
            d += idx[i] * r->dst[i];
            s += idx[i] * r->src[i];
        }
        char *to = r->dst_base + d * (int64_t)es;
        portssm_status st =
            r->src_base ? ctx->be->mem_copy(&ctx->b, to, r->src_base + s * (int64_t)es, bytes,
                                            PORTSSM_DEVICE_TO_DEVICE)
                        : ctx->be->mem_set(&ctx->b, to, 0, bytes);
        if (st != PORTSSM_OK)
            return st;
        int i = r->n - 1; /* the next outer index, last dim fastest */
        while (i >= 0 && ++idx[i] == r->shape[i])
            idx[i--] = 0;
        if (i < 0)
            return PORTSSM_OK;
    }
}

static int has_elements(const portssm_tensor *t)
{
    return pssm_present(t) && !pssm_tensor_empty(t);
}

/* out (when it has elements) = src where src has elements (the same shape and dtype, which
 * validation checked), else zeros. */
static portssm_status put(portssm_context *ctx, const char *op, const portssm_tensor *out,
                          const char *out_name, const portssm_tensor *src, const char *src_name)
{
    if (!has_elements(out))
        return PORTSSM_OK;
    const size_t es = portssm_dtype_size(out->dtype);
    const int copy = src && has_elements(src);
    if (copy && ctx->be->stream_capturing) {
        int capturing = 0;
        portssm_status st = ctx->be->stream_capturing(&ctx->b, &capturing);
        if (st != PORTSSM_OK)
            return st;
        if (capturing)
            return pssm_fail(&ctx->b, PORTSSM_ERR_UNSUPPORTED,
                             "%s: an empty call (no token) copies '%s' into '%s', which waits "
                             "for the stream and cannot be captured into a graph",
                             op, src_name, out_name);
    }
    runs r;
    plan(&r, out, copy ? src : NULL, es);
    return write_runs(ctx, &r, es);
}

static portssm_status zero(portssm_context *ctx, const char *op, const portssm_tensor *out,
                           const char *name)
{
    return put(ctx, op, out, name, NULL, NULL);
}

/* A view of rows [first, first + count) of dim 0 of t. */
static portssm_tensor rows_of(const portssm_tensor *t, int64_t first, int64_t count)
{
    portssm_tensor r = *t;
    r.data = (char *)t->data + first * t->stride[0] * (int64_t)portssm_dtype_size(t->dtype);
    r.shape[0] = count;
    return r;
}

portssm_status pssm_empty_causal_conv1d_fwd(portssm_context *ctx,
                                            const portssm_causal_conv1d_fwd_args *a)
{
    return put(ctx, "causal_conv1d_fwd", &a->final_states, "final_states", &a->initial_states,
               "initial_states");
}

portssm_status pssm_empty_causal_conv1d_bwd(portssm_context *ctx,
                                            const portssm_causal_conv1d_bwd_args *a)
{
    const char *op = "causal_conv1d_bwd";
    PSSM_TRY(zero(ctx, op, &a->dweight, "dweight"));
    PSSM_TRY(zero(ctx, op, &a->dbias, "dbias"));
    return put(ctx, op, &a->dinitial_states, "dinitial_states", &a->dfinal_states,
               "dfinal_states");
}

portssm_status pssm_empty_causal_conv1d_update(portssm_context *ctx,
                                               const portssm_causal_conv1d_update_args *a)
{
    (void)ctx; /* out has no element (B, D or T is 0); the state is not touched */
    (void)a;
    return PORTSSM_OK;
}

portssm_status pssm_empty_selective_scan_fwd(portssm_context *ctx,
                                             const portssm_selective_scan_fwd_args *a)
{
    return put(ctx, "selective_scan_fwd", &a->final_state, "final_state", &a->initial_state,
               "initial_state");
}

portssm_status pssm_empty_selective_scan_bwd(portssm_context *ctx,
                                             const portssm_selective_scan_bwd_args *a)
{
    const char *op = "selective_scan_bwd";
    PSSM_TRY(zero(ctx, op, &a->dA, "dA"));
    PSSM_TRY(zero(ctx, op, &a->dB, "dB"));
    PSSM_TRY(zero(ctx, op, &a->dC, "dC"));
    PSSM_TRY(zero(ctx, op, &a->dD, "dD"));
    PSSM_TRY(zero(ctx, op, &a->ddelta_bias, "ddelta_bias"));
    return put(ctx, op, &a->dinitial_state, "dinitial_state", &a->dfinal_state, "dfinal_state");
}

portssm_status pssm_empty_selective_state_update(portssm_context *ctx,
                                                 const portssm_selective_state_update_args *a)
{
    (void)ctx; /* out has no element; the state is not touched */
    (void)a;
    return PORTSSM_OK;
}

portssm_status pssm_empty_ssd_chunk_scan_fwd(portssm_context *ctx,
                                             const portssm_ssd_chunk_scan_fwd_args *a)
{
    const char *op = "ssd_chunk_scan_fwd";
    PSSM_TRY(put(ctx, op, &a->final_states, "final_states", &a->initial_states, "initial_states"));
    if (!has_elements(&a->varlen_states))
        return PORTSSM_OK;
    /* L = 0 with cu_seqlens (B = 1): every sequence is empty; the first starts from the row's
     * initial state, the others from zero, and each ends where it starts */
    const portssm_tensor first = rows_of(&a->varlen_states, 0, 1);
    const portssm_tensor rest =
        rows_of(&a->varlen_states, 1, a->varlen_states.shape[0] - 1);
    PSSM_TRY(put(ctx, op, &first, "varlen_states", &a->initial_states, "initial_states"));
    return zero(ctx, op, &rest, "varlen_states");
}

portssm_status pssm_empty_ssd_chunk_scan_bwd(portssm_context *ctx,
                                             const portssm_ssd_chunk_scan_bwd_args *a)
{
    const char *op = "ssd_chunk_scan_bwd";
    PSSM_TRY(zero(ctx, op, &a->ddt, "ddt"));
    PSSM_TRY(zero(ctx, op, &a->dA, "dA"));
    PSSM_TRY(zero(ctx, op, &a->dB, "dB"));
    PSSM_TRY(zero(ctx, op, &a->dC, "dC"));
    PSSM_TRY(zero(ctx, op, &a->dD, "dD"));
    PSSM_TRY(zero(ctx, op, &a->ddt_bias, "ddt_bias"));
    return put(ctx, op, &a->dinitial_states, "dinitial_states", &a->dfinal_states,
               "dfinal_states");
}

portssm_status pssm_empty_norm_fwd(portssm_context *ctx, const portssm_norm_fwd_args *a)
{
    (void)ctx; /* every output has the rows, which are 0 */
    (void)a;
    return PORTSSM_OK;
}

portssm_status pssm_empty_norm_bwd(portssm_context *ctx, const portssm_norm_bwd_args *a)
{
    PSSM_TRY(zero(ctx, "norm_bwd", &a->dweight, "dweight"));
    return zero(ctx, "norm_bwd", &a->dbias, "dbias");
}
