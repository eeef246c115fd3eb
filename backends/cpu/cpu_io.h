/*
 * cpu_io.h - what the cpu ops share: strided tensors <-> contiguous double arrays, and a scratch
 * list so that an op allocates everything first, fails with nothing written, and frees once.
 */
#ifndef PSSM_CPU_IO_H
#define PSSM_CPU_IO_H

#include "backend.h"

#include <stdint.h>

#define PSSM_CPU_MAX_BLOCKS 32

typedef struct pssm_cpu_scratch {
    void *blocks[PSSM_CPU_MAX_BLOCKS];
    int n;
    int failed;           /* an allocation failed (or its size overflowed) */
    double held_bytes;    /* what the blocks hold, for the out-of-memory message */
    double failed_bytes;  /* what the failed allocation asked for (count * elem_size) */
} pssm_cpu_scratch;

/* count elements of elem_size bytes; NULL and s->failed on failure. */
void *pssm_cpu_alloc(pssm_cpu_scratch *s, int64_t count, size_t elem_size);
void pssm_cpu_release(pssm_cpu_scratch *s);
/* Releases the scratch and reports PORTSSM_ERR_OUT_OF_MEMORY for `op`. */
portssm_status pssm_cpu_oom(pssm_bctx *c, pssm_cpu_scratch *s, const char *op);

int64_t pssm_cpu_numel(const portssm_tensor *t);

/* A float tensor (F32/F16/BF16) as contiguous row-major doubles; NULL when t is absent
 * (data == NULL) or on failure (s->failed tells which). */
double *pssm_cpu_load(pssm_cpu_scratch *s, const portssm_tensor *t);
/* An I32 tensor as contiguous int32; NULL when absent or on failure. */
int32_t *pssm_cpu_load_i32(pssm_cpu_scratch *s, const portssm_tensor *t);
/* Room for an output: numel(t) doubles; NULL when t is absent or on failure. */
double *pssm_cpu_out(pssm_cpu_scratch *s, const portssm_tensor *t);

/* Writes contiguous v into t (skipped when t is absent), each element rounded once to t's
 * dtype.  store_rows writes only the rows r (leading index) with keep[r] != 0. */
void pssm_cpu_store(const portssm_tensor *t, const double *v);
void pssm_cpu_store_rows(const portssm_tensor *t, const double *v, const unsigned char *keep);

/* Marks (1) the rows of a state pool of Bp rows that sequences b < B use: row indices[b]
 * (b without indices), none for an index outside [0, Bp).  NULL on failure. */
unsigned char *pssm_cpu_rows_used(pssm_cpu_scratch *s, const int32_t *indices, int64_t B,
                                  int64_t Bp);

/* double -> f16 / bf16 bits, rounded once to nearest even (not through a rounded float). */
uint16_t pssm_cpu_to_f16(double v);
uint16_t pssm_cpu_to_bf16(double v);

#endif /* PSSM_CPU_IO_H */
