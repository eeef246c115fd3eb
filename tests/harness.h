/*
 * harness.h - what every portssm test suite shares.
 *
 *  - The backend under test comes from the command line (`--backend cpu|sim32|sim64|cuda|hip`);
 *    th_main() probes it and, when it is absent, prints why and exits with TH_SKIP (77), which
 *    CTest reports as skipped, never as passed.
 *  - th_tensor is a strided tensor living twice: a host mirror and device storage on one context,
 *    each with guard bands around the span the strides reach.  Inputs are filled from a seeded
 *    generator (never zeros); outputs are poisoned with NaN before each run, and after it the
 *    guard bands and the gaps between strided elements must be byte-identical.
 *  - Values are compared with the cpu oracle per element (|a-b| <= atol + rtol*|b|, NaN fails)
 *    and by normalised error sum((a-b)^2)/sum(b^2).
 */
#ifndef PSSM_TEST_HARNESS_H
#define PSSM_TEST_HARNESS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs these first */
#include <cmocka.h>

#include "portssm.h"

#define TH_SKIP 77

/* ---------------------------------------------------------------- run setup */

/* The context of the backend under test, and a cpu context for the oracle. */
extern portssm_context *th_ctx;
extern portssm_context *th_oracle;
/* "cpu", "sim32", "sim64", "cuda", "hip" */
extern const char *th_backend_label;

/* Parses --backend, creates the contexts, runs the group, returns cmocka's result or TH_SKIP.
 * PORTSSM_TEST_FILTER (a cmocka pattern with '*' and '?') runs only the tests whose names match;
 * PORTSSM_TEST_SKIP skips those whose names match. */
/* PORTSSM_TEST_BACKTRACE=1: a crash in the calling test prints a backtrace and the mappings
 * (call it first in a test; cmocka's own handlers are installed before each test). */
void th_crash_reports(void);
int th_main(int argc, char **argv, const char *suite, const struct CMUnitTest *tests, size_t n);
/* Registration of a suite's cases (before th_main, outside any test, where cmocka's asserts
 * cannot report): a suite about to register case `n` of at most `max` prints what to raise and
 * exits 1 when it has no room. */
void th_case_room(const char *suite, size_t n, size_t max);

/* True when the backend under test is the oracle itself (comparisons would be vacuous there). */
int th_is_oracle(void);

/* Tests skipped through TH_CHECK_OP / th_skip_test; th_main reports a suite whose every test
 * skipped as skipped (TH_SKIP), and prints how many skipped in any case. */
extern int th_skipped_tests;

/* Inside a test: status PORTSSM_ERR_UNSUPPORTED from the backend under test skips the test
 * (with the backend's message), any other non-OK status fails it. */
#define TH_CHECK_OP(ctx, call)                                                                  \
    do {                                                                                        \
        portssm_status th_s_ = (call);                                                          \
        if (th_s_ == PORTSSM_ERR_UNSUPPORTED) {                                                 \
            print_message("skipped: %s\n", portssm_last_error(ctx));                            \
            th_skipped_tests++;                                                                 \
            skip();                                                                             \
        }                                                                                       \
        if (th_s_ != PORTSSM_OK)                                                                \
            fail_msg("%s -> %s: %s", #call, portssm_status_name(th_s_), portssm_last_error(ctx)); \
    } while (0)

/* ---------------------------------------------------------------- random numbers */

typedef struct th_rng {
    uint64_t s[2];
} th_rng;

/* The suite seed: PORTSSM_TEST_SEED if set, else from the clock; printed once by th_main. */
uint64_t th_seed(void);
/* A generator for one test, derived from the suite seed and a per-test salt. */
th_rng th_rng_for(uint64_t salt);
uint64_t th_next(th_rng *r);
double th_uniform(th_rng *r, double lo, double hi);
int64_t th_randint(th_rng *r, int64_t lo, int64_t hi_inclusive);

/* ---------------------------------------------------------------- tensors */

typedef struct th_tensor {
    portssm_context *ctx; /* where the device storage lives           */
    portssm_dtype dtype;
    int32_t ndim;
    int64_t shape[PORTSSM_MAX_DIMS];
    int64_t stride[PORTSSM_MAX_DIMS];
    int64_t base;       /* element offset of index (0,..,0) inside the span */
    int64_t span;       /* elements the strides reach (>= 1)                */
    size_t guard;       /* guard bytes before and after the span            */
    unsigned char *host; /* host mirror: guard + span + guard               */
    unsigned char *dev;  /* device allocation of the same layout           */
} th_tensor;

/* A tensor with the given strides (NULL: contiguous row-major).  Aborts the test on failure. */
th_tensor *th_new(portssm_context *ctx, portssm_dtype dtype, int32_t ndim, const int64_t *shape,
                  const int64_t *stride);
/* The same dtype, shape, strides and host contents on another context (uploaded). */
th_tensor *th_twin(portssm_context *ctx, const th_tensor *src);
void th_free(th_tensor *t);
void th_free_all(void); /* every tensor made since the last call (tests call it at the end) */

/* The view an op takes (device pointer); th_absent() is an absent optional tensor. */
portssm_tensor th_view(const th_tensor *t);
portssm_tensor th_absent(void);

/* Host mirror <-> device. */
void th_upload(th_tensor *t);
void th_download(th_tensor *t);

/* Element access on the host mirror (converted to/from double; rounding to the dtype on set). */
double th_get(const th_tensor *t, const int64_t *idx);
void th_set(th_tensor *t, const int64_t *idx, double v);
/* Flat iteration: idx from a linear index over the shape (row-major). */
void th_unravel(const th_tensor *t, int64_t linear, int64_t *idx);
int64_t th_numel(const th_tensor *t);

/* Every byte of the span and guards random; then elements uniform in [lo, hi]; uploaded. */
void th_fill_uniform(th_tensor *t, th_rng *r, double lo, double hi);
/* I32 elements uniform in [lo, hi]. */
void th_fill_int(th_tensor *t, th_rng *r, int64_t lo, int64_t hi);
/* Elements NaN (I32: INT32_MIN), gaps and guards a fixed pattern; uploaded.  For outputs. */
void th_poison(th_tensor *t);
/* Snapshot of every byte (guards, gaps, elements) on the device, for "nothing was written". */
typedef struct th_snapshot {
    size_t bytes;
    unsigned char *data;
} th_snapshot;
th_snapshot th_snap(th_tensor *t);
int th_unchanged(th_tensor *t, const th_snapshot *s); /* downloads, compares, frees the snapshot */
/* After a run: downloads and asserts the guards and the gaps kept their poison pattern. */
void th_assert_guards(th_tensor *t, const char *name);

/* ---------------------------------------------------------------- comparison */

typedef struct th_tol {
    double rtol, atol;
} th_tol;
/* Tolerances of the design doc per dtype (f32 6e-4/2e-3, f16 3e-3/5e-3, bf16 3e-2/5e-2). */
th_tol th_tol_for(portssm_dtype dtype);
/* Asserts got ~ ref element-wise (both downloaded first) and prints the normalised error. */
void th_assert_close(th_tensor *got, th_tensor *ref, th_tol tol, const char *name);
/* Normalised error sum((a-b)^2)/sum(b^2) over the elements (host mirrors as they are). */
double th_norm_error(const th_tensor *got, const th_tensor *ref);

/* ================================================================ additions for the op suites
 * (cross-backend comparison: test_conv1d, test_scan, test_decode) */

/* Skips the running test with a message (counted like TH_CHECK_OP's skips). */
#define th_skip_test(...)                                                                       \
    do {                                                                                        \
        print_message(__VA_ARGS__);                                                             \
        print_message("\n");                                                                    \
        th_skipped_tests++;                                                                     \
        skip();                                                                                 \
    } while (0)

/* The view of t, or an absent tensor when t is NULL. */
portssm_tensor th_view_opt(const th_tensor *t);

/* ---------------------------------------------------------------- layouts
 * Layout flags describe how a tensor's dims are placed in memory; they apply uniformly to every
 * tensor of a call, which is how the suites run one op on the same data in several layouts. */
enum {
    TH_L_CONTIG = 0,      /* row-major                                                       */
    TH_L_CL = 1u << 0,    /* the two innermost dims swapped: channel-last for (B,D,L)          */
    TH_L_PAD = 1u << 1,   /* every outer stride padded to an odd number, past the dims inside   */
    TH_L_GAP = 1u << 2,   /* innermost stride 2: a gap after every element                     */
    TH_L_NEGL = 1u << 3,  /* the last dim (L of an activation) runs backwards                   */
    TH_L_NEGB = 1u << 4,  /* the first dim of a tensor with ndim >= 2 runs backwards            */
    TH_L_PADB = 1u << 5,  /* only the first dim's stride padded to an odd number (misaligned
                             batches of aligned rows)                                           */
    TH_L_SHIFT = 1u << 6, /* data one element past a 16-byte boundary                           */
    /* for th_cross_check's bundles only: */
    TH_L_SHIFTO = 1u << 7, /* outputs one element further than the inputs (not congruent)      */
    TH_L_XOUT = 1u << 8    /* outputs in the other orientation (TH_L_CL toggled)                */
};
/* Strides for `shape` in `layout`.  keep (optional) holds strides to respect: a dim where
 * keep[i] == 0 stays a broadcast (stride 0), as Mamba-2's tied A/dt are. */
void th_layout_strides(int32_t ndim, const int64_t *shape, unsigned layout, const int64_t *keep,
                       int64_t *stride);
/* "cf", "cl+pad+negL", ... into buf (>= 64 bytes); returns buf. */
const char *th_layout_name(unsigned layout, char *buf, size_t n);

/* A new tensor on ctx with src's dtype, shape and broadcast dims, laid out by `layout`
 * (TH_L_SHIFT and TH_L_SHIFTO each move the data one element).
 * copy != 0: src's element values, bit for bit (gaps: noise from r when r != NULL, else the gap
 * pattern that th_assert_guards expects); copy == 0: poisoned.  Uploaded. */
th_tensor *th_relayout(portssm_context *ctx, const th_tensor *src, unsigned layout, int copy,
                       th_rng *r);

/* Elements as doubles, row-major over the shape (free() it). */
double *th_values(const th_tensor *t);

/* Asserts got equals ref bit for bit element-wise (any layouts; both downloaded first); a NaN
 * fails even where both agree. */
void th_assert_same(th_tensor *got, th_tensor *ref, const char *name);
/* Like th_assert_close, against row-major reference values in double (got downloaded first). */
void th_assert_close_values(th_tensor *got, const double *ref, th_tol tol, const char *name);

/* ---------------------------------------------------------------- one op call, several runs */

typedef enum th_role { TH_IN = 0, TH_OUT = 1, TH_INOUT = 2 } th_role;

typedef struct th_slot {
    const char *name; /* the argument's name, for messages                             */
    th_role role;
    th_tensor *t;     /* NULL: the optional argument is absent                         */
    th_tol tol;       /* outputs: against the oracle                                   */
    int exact;        /* outputs: bit-exact against the oracle everywhere (data moves)   */
    /* outputs: each element within tol, without the norm check (a handful of sums whose terms
     * cancel, whose norm is the relative error of the one value that lies nearest zero) */
    int per_element;
    /* outputs that are sums of another output's elements (ddt_bias of ddt): terms_of names
     * that slot; the check's atol becomes at least terms_k times the root of the sum of the
     * squared reference terms per element of this one (the rounding noise of a sum of n terms
     * grows with sqrt(n) times their size, however much the terms cancel).  Stored as the
     * slot's index + 1: 0 (a zeroed slot) is none. */
    int terms_of;
    double terms_k;
    /* row-major and 256-byte aligned in every layout of th_cross_check (an argument the op
     * requires dense: the SSD's checkpoints) */
    int dense;
} th_slot;

#define TH_MAX_SLOTS 32
/* Every tensor of one op call, indexed by the suite's own slot enum. */
typedef struct th_bundle {
    int n;
    th_slot s[TH_MAX_SLOTS];
} th_bundle;

/* Sets slot i (growing n); returns t. */
th_tensor *th_slot_set(th_bundle *b, int i, const char *name, th_role role, th_tensor *t,
                       th_tol tol);
/* Slot i sums the elements of slot `terms` (th_slot.terms_of): its atol scales with theirs. */
void th_slot_terms(th_bundle *b, int i, int terms, double k);
/* The view of slot i (absent when its tensor is NULL). */
portssm_tensor th_slot_view(const th_bundle *b, int i);

typedef struct th_op {
    const char *name;
    /* The canonical call on th_oracle: contiguous, inputs random, outputs poisoned. */
    void (*build)(th_bundle *b, const void *cas, th_rng *r);
    portssm_status (*run)(portssm_context *ctx, const th_bundle *b, const void *cas);
    /* Optional: after the backend's first run, checks that need no oracle.  `init` holds every
     * tensor as it was before the run (outputs poisoned).  On the cpu backend this is where an
     * independent reference belongs. */
    void (*verify)(th_bundle *got, const th_bundle *init, const void *cas);
    /* A plain case that every backend implementing the op must accept. */
    const void *probe;
} th_op;

/*
 * The cross-backend check of one case:
 *  - the backend under test runs the case in `layout`; UNSUPPORTED skips when the backend
 *    rejects the op's plain probe case too (the op is not implemented there); otherwise it
 *    fails: the backend has the op but refuses one of the suites' cases, every one of which the
 *    project's backends take;
 *  - the oracle runs it contiguous; every output must match (bit-exact on cpu, where the
 *    difference is the layout alone; within each slot's tolerance elsewhere), every guard band
 *    and gap must be intact, and no input may change;
 *  - op->verify runs;
 *  - the backend runs it again (bitwise equal: determinism), and in layout `alt` (compared with
 *    the oracle like the first run).
 */
void th_cross_check(const th_op *op, const void *cas, unsigned layout, unsigned alt, uint64_t salt);

/* The canonical tensors the suites' build() callbacks make on th_oracle: inputs uniform in
 * [lo, hi] (stride NULL: contiguous), outputs poisoned. */
th_tensor *th_oracle_in(portssm_dtype dt, int ndim, const int64_t *shape, const int64_t *stride,
                        th_rng *r, double lo, double hi);
th_tensor *th_oracle_out(portssm_dtype dt, int ndim, const int64_t *shape);
/* The second layout th_cross_check runs a case in: the other of channel-first/-last, time
 * reversed or not, padded. */
unsigned th_alt_layout(unsigned layout);

/* ---------------------------------------------------------------- independent references
 * On the cpu backend the comparison with the oracle is vacuous, so the suites also compute each
 * forward op from its definition in double, and check gradients by finite differences of that. */

/* Relative spacing of the dtype's numbers: 2^-23, 2^-10, 2^-7. */
double th_ulp(portssm_dtype dtype);
/* Oracle against a double reference: the oracle rounds once, at the store (about one ulp). */
th_tol th_tol_ref(portssm_dtype dtype);
/* n values uniform in [-1, 1] (free() it). */
double *th_random_dir(th_rng *r, int64_t n);
/* Central difference of loss(ctx) along v at the n values p (restored after). */
double th_fd_dir(double (*loss)(void *), void *ctx, double *p, const double *v, int64_t n,
                 double h);
/* Asserts sum(grad * v) equals the directional derivative fd within the rounding of grad to its
 * dtype (8 ulp times the root sum of squares of the terms) plus 1e-6 of the terms' magnitude. */
void th_assert_grad_dir(th_tensor *grad, const double *v, double fd, const char *name);

/* One gradient output of a bundle and the reference parameter (n doubles) it differentiates. */
typedef struct th_grad_param {
    int slot;
    double *param;
    int64_t n;
} th_grad_param;
/* For each gradient present in `got`: a random direction v, the finite difference of loss(ctx)
 * along v at the parameter, and th_assert_grad_dir against the backend's gradient. */
void th_check_grads_fd(th_bundle *got, const th_grad_param *g, size_t n,
                       double (*loss)(void *), void *ctx, th_rng *r);

/* cmocka teardown that frees every tensor of the test (even after a failure or a skip). */
int th_teardown(void **state);

#endif /* PSSM_TEST_HARNESS_H */
