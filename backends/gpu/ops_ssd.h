/*
 * ops_ssd.h - what the SSD's forward (ops_ssd_fwd.c) and backward (ops_ssd.c) share: the parts
 * of their args structs the planning reads, the workspace's first sub-buffer (the per-token
 * sequences of a packed row) and the kernels that fill it.
 */
#ifndef PSSM_GPU_OPS_SSD_H
#define PSSM_GPU_OPS_SSD_H

#include "gpu.h"
#include "workspace_plan.h"

#include <string.h>

/* The parts of the two args structs the planning shares (the fwd's fields, by name). */
typedef struct ssd_common {
    const portssm_tensor *x, *dt, *A, *B, *C, *D, *z, *dt_bias, *init, *seq_idx, *cu;
    int32_t softplus, dt_limit;
    float dt_min, dt_max;
} ssd_common;

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

/* cu_seqlens -> per-token sequences at `seq` (nothing without cu_seqlens); with varlen, the
 * final states of the empty sequences (their start states). */
portssm_status pssm_gpu_ssd_launch_seq(pssm_gpu *g, const ssd_common *s, int32_t *seq,
                                       const portssm_tensor *varlen);

#endif
