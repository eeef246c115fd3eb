/*
 * tset.h - the tensors of one op call, described once and instantiated on any context.
 *
 * Every tensor is a dense buffer of `span` distinct elements seen through strides: a dimension
 * order (channel-last is a permutation) and broadcast dimensions (stride 0, as Mamba-2 ties A and
 * dt).  Because two instances of a set share the layout, comparing an output of the backend under
 * test with the oracle's is a flat comparison of the two buffers.
 *
 * The set also knows the op's minimal traffic: each input read once, each output written once,
 * in/out tensors both, broadcast elements once, times the passes that touch the tensor (fwd+bwd
 * reads x in each pass).
 */
#ifndef PSSM_CLI_TSET_H
#define PSSM_CLI_TSET_H

#include <stddef.h>
#include <stdint.h>

#include "portssm.h"
#include "tool.h"

#define PSSM_TSET_MAX 32

typedef enum pssm_role { PSSM_IN = 1, PSSM_OUT = 2, PSSM_INOUT = 3 } pssm_role;

typedef struct pssm_tspec {
    const char *name;
    int slot;      /* which argument of the op (opcase.h's slot ids)              */
    pssm_role role;
    int passes;    /* passes of the op that read/write it (fwd+bwd: 2 for x)      */
    portssm_dtype dtype;
    int32_t ndim;
    int64_t shape[PORTSSM_MAX_DIMS];
    int64_t stride[PORTSSM_MAX_DIMS];
    int64_t span;  /* distinct elements = elements of the buffer                  */
    double lo, hi; /* fill range of inputs (I32: inclusive integers)              */
} pssm_tspec;

typedef struct pssm_tset {
    int n;
    pssm_tspec t[PSSM_TSET_MAX];
    void *host[PSSM_TSET_MAX]; /* contents of inputs (outputs: NULL) */
} pssm_tset;

/* Adds a row-major tensor and returns its index; -1 when the set is full. */
int pssm_tset_add(pssm_tset *s, const char *name, int slot, pssm_role role, portssm_dtype dtype,
                  int32_t ndim, const int64_t *shape, double lo, double hi);
/* Re-lays tensor i out: `order` lists the dimensions from outermost to innermost in memory;
 * dimensions set in `bcast_mask` (bit d for dim d) get stride 0. */
void pssm_tset_layout(pssm_tset *s, int i, const int *order, unsigned bcast_mask);
/* Index of the tensor in `slot`, -1 if the set has none. */
int pssm_tset_find(const pssm_tset *s, int slot);

/* Allocates and fills the host contents of every input: uniform in [lo, hi]. 0 or -1 (ENOMEM). */
int pssm_tset_fill(pssm_tset *s, pssm_rng *r);
void pssm_tset_release(pssm_tset *s); /* frees the host contents */

size_t pssm_tspec_bytes(const pssm_tspec *t); /* span * element size */
/* Minimal bytes moved by one call (see the header comment). */
double pssm_tset_min_bytes(const pssm_tset *s);
/* Bytes one device instance occupies. */
size_t pssm_tset_alloc_bytes(const pssm_tset *s);

/* One instance of a set on a context. */
typedef struct pssm_tdev {
    portssm_context *ctx;
    void *ptr[PSSM_TSET_MAX];
} pssm_tdev;

/* Allocates every tensor; on failure frees what it took and returns the status. */
portssm_status pssm_tdev_alloc(pssm_tdev *d, portssm_context *ctx, const pssm_tset *s);
/* Uploads the inputs and poisons the outputs with NaN (every float format's 0xff..ff). */
portssm_status pssm_tdev_load(pssm_tdev *d, const pssm_tset *s);
void pssm_tdev_free(pssm_tdev *d, const pssm_tset *s);
/* Downloads tensor i into host (pssm_tspec_bytes bytes); synchronizes first. */
portssm_status pssm_tdev_fetch(const pssm_tdev *d, const pssm_tset *s, int i, void *host);
/* The op's view of the tensor in `slot` (absent when the set has none). */
portssm_tensor pssm_tdev_view(const pssm_tdev *d, const pssm_tset *s, int slot);

/* ---------------------------------------------------------------- comparison */

typedef struct pssm_tol {
    double rtol, atol;
} pssm_tol;

/* The design's tolerances: f32 6e-4/2e-3, f16 3e-3/5e-3, bf16 3e-2/5e-2 (I32: exact). */
pssm_tol pssm_tol_for(portssm_dtype dtype);
/* The looser of two. */
pssm_tol pssm_tol_max(pssm_tol a, pssm_tol b);

typedef struct pssm_cmp {
    int64_t n, bad;     /* elements; elements outside atol + rtol*|ref| (NaN counts)   */
    int64_t first_bad;  /* flat index of the first bad element, -1 if none              */
    double norm_err;    /* sum((got-ref)^2) / sum(ref^2)                                */
    double max_abs;     /* max |got-ref|                                                */
    double max_rel;     /* max |got-ref| / max(|ref|, atol): relative where it means it  */
    int pass;           /* no bad element and norm_err <= rtol^2 (as the test harness)   */
} pssm_cmp;

pssm_cmp pssm_compare(portssm_dtype dtype, const void *got, const void *ref, int64_t n,
                      pssm_tol tol);

#endif /* PSSM_CLI_TSET_H */
