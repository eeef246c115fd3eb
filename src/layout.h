/*
 * layout.h - facts about a strided tensor's memory: the bytes it reaches (with every int64
 * product and sum checked for overflow), whether it aliases itself, whether two may overlap.
 * Inputs to these functions are tensors whose dtype, ndim (1..4) and shapes (>= 1) are valid.
 */
#ifndef PSSM_LAYOUT_H
#define PSSM_LAYOUT_H

#include "portssm.h"

#include <stddef.h>
#include <stdint.h>

typedef struct pssm_extent {
    uintptr_t lo, hi; /* first and last byte any element touches */
} pssm_extent;

/* 1 and *e when every offset and the byte range fit; else 0 and the reason in `why`. */
int pssm_extent_of(const portssm_tensor *t, pssm_extent *e, char *why, size_t why_size);

/* 1 when two different indices may address the same element (a zero stride, or strides that do
 * not separate the dims), with the reason in `why`; 0 when every element is distinct. */
int pssm_self_overlaps(const portssm_tensor *t, char *why, size_t why_size);

/* 0 when a and b certainly share no byte; 1 when they may. */
int pssm_may_overlap(const portssm_tensor *a, const pssm_extent *ea, const portssm_tensor *b,
                     const pssm_extent *eb);

#endif /* PSSM_LAYOUT_H */
