/*
 * ops_ssd.h - what the SSD's forward (ops_ssd_fwd.c) and backward (ops_ssd_bwd.c) share: the
 * parts of their args structs the planning reads, the chunking, the workspace's first
 * sub-buffer (the per-token sequences of a packed row) and the kernels that fill it, and the
 * kernel parameters both fill alike (ops_ssd.c).
 */
#ifndef PSSM_GPU_OPS_SSD_H
#define PSSM_GPU_OPS_SSD_H

#include "gpu.h"
#include "workspace_plan.h"

#include "../../kernels/params.h"

#include <string.h>

/* The parts of the two args structs the planning shares (the fwd's fields, by name). */
typedef struct ssd_common {
    const portssm_tensor *x, *dt, *A, *B, *C, *D, *z, *dt_bias, *init, *seq_idx, *cu;
    int32_t softplus, dt_limit;
    float dt_min, dt_max;
    int32_t chunk_size;
} ssd_common;

#define SSD_COMMON_OF(a)                                                                           \
    {                                                                                              \
        &(a)->x, &(a)->dt, &(a)->A, &(a)->B, &(a)->C, &(a)->D, &(a)->z, &(a)->dt_bias,             \
            &(a)->initial_states, &(a)->seq_idx, &(a)->cu_seqlens, (a)->dt_softplus,               \
            (a)->dt_limit, (a)->dt_min, (a)->dt_max, (a)->chunk_size                               \
    }

/* Workspace: the per-token sequences of a packed row (cu_seqlens), then the op's own. */
typedef struct ssd_ws {
    size_t seq_off;
    pssm_ws_plan w;
} ssd_ws;

static inline void ssd_ws_begin(const ssd_common *s, ssd_ws *ws)
{
    memset(ws, 0, sizeof *ws);
    ws->seq_off = pssm_ws_take(&ws->w, s->cu->data ? s->x->shape[1] : 0, sizeof(int32_t));
}

/* The planned workspace's bytes, or a clear failure where its size does not fit size_t (the
 * size queries of both ops). */
portssm_status pssm_gpu_ssd_ws_bytes(pssm_bctx *c, const ssd_ws *ws, const char *op,
                                     size_t *bytes);

/* The chunks: chunk_size is a performance choice (DESIGN.md), rounded up to a multiple of the
 * dtype's tile (64 for 16-bit activations, 32 for f32) and capped at PSSM_SSD_CHUNK_MAX; 0
 * takes the maximum. */
typedef struct ssd_chunking {
    int64_t tile, chunk, nchunks;
} ssd_chunking;

ssd_chunking pssm_gpu_ssd_chunking(const ssd_common *s);

/* The parameters the forward's and the backward's kernels read alike: inputs, their strides,
 * the chunking, the sequences (from the workspace for a packed row), the dt options.  The
 * states, decay and the op's own outputs are the caller's to set. */
/* The call's state dtype (pssm_ssd_chunk_params.state_dt): that of the first of its three
 * states present (validate_ssd.c: they share one), else F32. */
int32_t pssm_gpu_ssd_state_dt(const portssm_tensor *a, const portssm_tensor *b,
                              const portssm_tensor *c);
void pssm_gpu_ssd_fill(const ssd_common *s, const ssd_chunking *k, void *ws_base, const ssd_ws *ws,
                       pssm_ssd_chunk_params *p);

/* An operand of the chunk products (kernels/ssd_chunk.body.h): t's data and strides, and
 * whether 16-byte loads along its last dimension are valid (unit stride, 16-byte aligned base
 * and strides, `extent` whole vectors). */
pssm_ssd_opnd pssm_gpu_ssd_opnd(const portssm_tensor *t, int grouped, int64_t extent);

/* A grid extent, or a clear failure where it passes the targets' limit (x: 2^31 - 1, y: 65535). */
portssm_status pssm_gpu_ssd_grid(pssm_gpu *g, const char *op, int64_t n, int64_t max,
                                 uint32_t *dim);

/* Each chunk's dt', cs and seg, (B, H, nchunks, 3, Q) floats: written by the chunk states'
 * forward form, read by the products and the backward's dt (kernels/ssd_params.h, prep). */
size_t pssm_gpu_ssd_take_prep(const ssd_common *s, const ssd_chunking *k, pssm_ws_plan *w);
/* The blocks of the forward's state pass (pssm_ssd_state_pass: p's shape and vec set). */
int64_t pssm_gpu_ssd_pass_blocks(const pssm_ssd_chunk_params *p);

/* The chunks' C B^T per group (kernels/ssd_chunk.body.h, chunk_cb): its workspace sub-buffer
 * (planned, returning 1, only where a group has several heads: else the products form their
 * own), the grid of the
 * kernel that writes it (checked with the op's other grids, before anything runs), and its
 * launch, with the products' U = C and V = B set in p.  Nothing is launched where p->cb is
 * NULL. */
int pssm_gpu_ssd_take_cb(const ssd_common *s, const ssd_chunking *k, pssm_ws_plan *w,
                         size_t *off);
portssm_status pssm_gpu_ssd_cb_grid(pssm_gpu *g, const char *op, const pssm_ssd_chunk_params *p,
                                    pssm_dim3 *grid);
portssm_status pssm_gpu_ssd_launch_cb(pssm_gpu *g, const pssm_ssd_chunk_params *p,
                                      pssm_dim3 grid, pssm_dim3 block, int dtype_index);

/* The per-dtype kernels (index: pssm_plan_dtype_index). */
extern const pssm_kernel_id pssm_ssd_chunk_state_kernels[3];
/* The stamp of the backward's chunk product p.mode (Y, DX, DB, DC, W: ssd_params.h) for p's
 * operands: Y and DX have vector stamps (PSSM_SSD_VEC_EPILOGUE). */
pssm_kernel_id pssm_gpu_ssd_prod_kernel(const pssm_ssd_chunk_params *p, int dtype_index);

/* cu_seqlens -> per-token sequences at `seq` (nothing without cu_seqlens); with varlen, the
 * final states of the empty sequences (their start states). */
portssm_status pssm_gpu_ssd_launch_seq(pssm_gpu *g, const ssd_common *s, int32_t *seq,
                                       const portssm_tensor *varlen);

#endif
