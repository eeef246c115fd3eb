/*
 * ops_scan_bwd.h - planning and launching of the selective scan's backward kernel
 * (kernels/scan_bwd.body.h) for selective_scan_bwd (ops_selective_scan_bwd.c).
 *
 * The op fills the kernel's operands, strides, dims and flags into pl->p, plans (geometry and
 * its part of the workspace), computes checkpoints when pl->need_ck, runs the windows (the
 * kernel and the reduction of each window's per-step sums), then reduces the sums over time
 * (dA, dD, ...) in its own layout.
 */
#ifndef PSSM_GPU_OPS_SCAN_BWD_H
#define PSSM_GPU_OPS_SCAN_BWD_H

#include "gpu.h"
#include "workspace_plan.h"

#include "../../kernels/params.h"

typedef struct pssm_scan_bwd_plan {
    pssm_scan_bwd_params p;
    int kernel, threads;
    int64_t blocks;
    int64_t kbB, kbC;   /* blocks per group of a variable B / C: their partials per step */
    int64_t window;     /* steps per launch (the last window may be shorter)              */
    int64_t nck;        /* checkpoints per row                                            */
    int need_ck;        /* the op computes the checkpoints into pl->p.ck (the workspace)  */
} pssm_scan_bwd_plan;

/*
 * Plans the kernel for pl->p as the op filled it (operands, strides, dims, var_B/C,
 * B_dpg/C_dpg/B_groups/C_groups; p.ck with its strides when the caller brought
 * checkpoints).  The workspace continues on *w; with base NULL it only sizes.  dD / dbias
 * say whether their partials are wanted.
 */
portssm_status pssm_gpu_scan_bwd_plan(pssm_gpu *g, pssm_scan_bwd_plan *pl, pssm_ws_plan *w,
                                      void *base, int want_dD, int want_dbias, portssm_dtype act,
                                      const char *op);

/*
 * Runs the windows, last first: the kernel, then the reduction of the window's per-step
 * partials into dB_v / dC_v (variable operands only; views in (b, g, n, t) order, NULL when
 * constant).
 */
portssm_status pssm_gpu_scan_bwd_launch(pssm_gpu *g, pssm_scan_bwd_plan *pl,
                                        const portssm_tensor *dB_v, const portssm_tensor *dC_v);

/* A view of t with its dims in the order perm[0..n) (perm[i]: the dim of t that comes i-th). */
portssm_tensor pssm_scan_bwd_view(const portssm_tensor *t, const int *perm, int n);

#endif
