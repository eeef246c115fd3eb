/*
 * kernel_parts.h - the kernels split into parts that compile separately.
 *
 * Why: one translation unit of every kernel took one compiler process per target several
 * minutes (sm_90: scan 94 s, conv1d 48 s, SSD 35 s), so a build could use at most one core per
 * target and any kernel edit recompiled everything.  Each part is compiled on its own (the build
 * passes -DPSSM_KERNEL_PART=<name>) into its own image part; the GPU modules load every part of
 * an image and look each kernel up in the part that has it; the sim compiles every part into its
 * own object, so a kernel compiled in no part, or in two, fails the sim's link.
 *
 * Without PSSM_KERNEL_PART, every part is compiled (one translation unit, as a tool may want).
 * The build reads the part names from the PSSM_PART_ID_<name> lines below
 * (kernels/kernel_parts.cmake): this list is the only one.
 */
#ifndef PSSM_KERNEL_PARTS_H
#define PSSM_KERNEL_PARTS_H

/* base: the dtype-free kernels of every family (self-test, reduce, SSD state passes and packed
 * rows); <family>_<dtype>: that family's kernels stamped for one activation dtype; norm: the
 * row norms of every dtype (small kernels: one part). */
#define PSSM_PART_ID_base 1
#define PSSM_PART_ID_conv1d_f32 2
#define PSSM_PART_ID_conv1d_f16 3
#define PSSM_PART_ID_conv1d_bf16 4
#define PSSM_PART_ID_scan_f32 5
#define PSSM_PART_ID_scan_f16 6
#define PSSM_PART_ID_scan_bf16 7
#define PSSM_PART_ID_ssd_f32 8
#define PSSM_PART_ID_ssd_f16 9
#define PSSM_PART_ID_ssd_bf16 10
#define PSSM_PART_ID_norm 11
#define PSSM_PART_COUNT 11

#define PSSM_PART_ID_(name) PSSM_PART_ID_##name
#define PSSM_PART_ID(name) PSSM_PART_ID_(name)

/* PSSM_IN_PART(name): whether this compile includes part `name`. */
#ifdef PSSM_KERNEL_PART
#if PSSM_PART_ID(PSSM_KERNEL_PART) < 1 || PSSM_PART_ID(PSSM_KERNEL_PART) > PSSM_PART_COUNT
#error "PSSM_KERNEL_PART names no part of kernel_parts.h"
#endif
#define PSSM_IN_PART(name) (PSSM_PART_ID(PSSM_KERNEL_PART) == PSSM_PART_ID_##name)
#else
#define PSSM_IN_PART(name) 1
#endif

#endif /* PSSM_KERNEL_PARTS_H */
