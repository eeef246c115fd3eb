/*
 * cpu_io.h - what the cpu ops share: views of the caller's tensors for ref.h, a scratch list so
 * that an op allocates everything first, fails with nothing written, and frees once, and the
 * few double copies the math does need (gradients summed over loops, rows of a decode pool).
 *
 * Scratch is proportional to what an op addresses, never to a tensor's logical extent: inputs
 * are read where they lie (a stride-0 dimension costs nothing), outputs written in place.
 */
#ifndef PSSM_CPU_IO_H
#define PSSM_CPU_IO_H

#include "backend.h"
#include "ref_view.h"

#include <stdint.h>

#define PSSM_CPU_MAX_BLOCKS 32

typedef struct pssm_cpu_scratch {
    void *blocks[PSSM_CPU_MAX_BLOCKS];
    int n;
    int failed;           /* an allocation failed (or its size overflowed) */
    double held_bytes;    /* what the blocks hold, for the out-of-memory message */
    double failed_bytes;  /* what the failed allocation asked for (-1: past 64 bits) */
    double limit;         /* PORTSSM_CPU_SCRATCH_LIMIT when it refused the allocation, else -1 */
} pssm_cpu_scratch;

/* count elements of elem_size bytes; NULL and s->failed on failure.  The environment variable
 * PORTSSM_CPU_SCRATCH_LIMIT (bytes), when set, caps what one call holds: beyond it an
 * allocation fails as if the host were out of memory (to test that path, and to bound the
 * oracle's memory). */
void *pssm_cpu_alloc(pssm_cpu_scratch *s, int64_t count, size_t elem_size);
void pssm_cpu_release(pssm_cpu_scratch *s);
/* Releases the scratch and reports PORTSSM_ERR_OUT_OF_MEMORY for `op`, with the bytes asked. */
portssm_status pssm_cpu_oom(pssm_bctx *c, pssm_cpu_scratch *s, const char *op);

int64_t pssm_cpu_numel(const portssm_tensor *t);

/* t itself as a view: its strides in the order of its dims (absent: data NULL). */
pssm_ref_in pssm_cpu_in(const portssm_tensor *t);
pssm_ref_out pssm_cpu_out(const portssm_tensor *t);
/* The same with a size-1 dim inserted before dim `axis` (the Mamba-1 forms of the decode). */
pssm_ref_in pssm_cpu_in_unsqueeze(const portssm_tensor *t, int axis);
pssm_ref_out pssm_cpu_out_unsqueeze(const portssm_tensor *t, int axis);

/* A gradient the math sums over loops: numel(t) doubles (ref.h's contiguous layout); NULL when
 * t is absent or on failure.  pssm_cpu_store writes it into t, each element rounded once. */
double *pssm_cpu_sum(pssm_cpu_scratch *s, const portssm_tensor *t);
void pssm_cpu_store(const portssm_tensor *t, const double *v);

/*
 * The rows of a decode state pool (Bp, ...) that B sequences use, as doubles: the math updates
 * them there (a row shared by two sequences is seen updated, unrounded, by the later one), then
 * they are written back.  Only distinct used rows are copied: the pool's size costs nothing.
 */
typedef struct pssm_cpu_pool {
    int64_t nslots;  /* distinct rows in use                                   */
    int64_t row_len; /* elements of one row                                    */
    int64_t *slot;   /* (B): the slot of sequence b, -1 for an index outside   */
    int64_t *row;    /* (nslots): the pool row of each slot                    */
    double *rows;    /* (nslots, row_len): the rows, in double                 */
} pssm_cpu_pool;

/* Allocates (on s) and computes the slots from indices (absent: sequence b uses row b);
 * 0 on failure.  Writes nothing. */
int pssm_cpu_pool_init(pssm_cpu_scratch *s, pssm_cpu_pool *pool, const portssm_tensor *state,
                       const portssm_tensor *indices, int64_t B);
/* Copies the used rows of state in, and back (each element rounded once). */
void pssm_cpu_pool_load(const pssm_cpu_pool *pool, const portssm_tensor *state);
void pssm_cpu_pool_store(const pssm_cpu_pool *pool, const portssm_tensor *state);
/* The slots as ref.h's state_indices: an I64 view of length B. */
pssm_ref_in pssm_cpu_pool_indices(const pssm_cpu_pool *pool);

#endif /* PSSM_CPU_IO_H */
