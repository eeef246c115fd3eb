/*
 * tuning.h - launch-plan knobs a developer can override from the environment, to sweep plans on
 * a real GPU without rebuilding (bench/tune_sweep.sh; bench/RESULTS.md records which plan won
 * and why the defaults are what they are).
 *
 * Knobs: UPDATE_SLOTS, UPDATE_THREADS, UPDATE_BLOCKS_PER_SM, UPDATE_FLAT (0: the pipelined
 * kernels even where the flat one applies), UPDATE_FLAT_MAX_N (ops_scan.c, state update),
 * SCAN_LANES_PER_SM, SCAN_THREADS (ops_scan.c, scan), C1_CF_WARPS_PER_SM (ops_conv1d.c),
 * SCAN_BWD_LANES_PER_SM, SCAN_BWD_THREADS (ops_scan_bwd.c), SSD_YR, SSD_DXR (0: the backward's
 * Y, DX by the generic product stamps, ops_ssd_bwd.c), SSD_YSAVED (0: the backward's Y forms y
 * again even where the caller gives the forward's), SSD_DBC_ACT (0: dB and dC read the f32
 * states and convert them, not their 16-bit copies), SSD_S16 (0: the backward's S_in in f32
 * too, and the reverse pass reads that), SSD_CKPT (0: the backward computes the states again
 * even where the caller gives the forward's checkpoints), SSD_DSE16 (0: the reverse pass
 * writes dS_e in f32 too), NORM_BWD_ROWS (rows a unit of the norm backward sums dweight over;
 * 0: planned), NORM_BWD_THREADS_PER_SM (the threads in flight that plan aims for),
 * NORM_BWD_PREFETCH (0: the gated forms' backward without its row prefetch; ops_norm.c),
 * CARVEOUT (every kernel's preferred shared-memory carveout in percent, set at each launch;
 * device_context.c, CUDA only).
 *
 * Compiled in only with -DPORTSSM_TUNING=ON: a normal library plans the same way on every run,
 * whatever the environment.  pssm_tune("X", v) is PORTSSM_TUNE_X when set (tuning builds), else v.
 */
#ifndef PSSM_GPU_TUNING_H
#define PSSM_GPU_TUNING_H

#include <stdint.h>

#ifdef PSSM_TUNING
int64_t pssm_tune(const char *name, int64_t fallback);
#else
#define pssm_tune(name, fallback) ((void)(name), (int64_t)(fallback))
#endif

#endif
