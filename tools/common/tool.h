/*
 * tool.h - small helpers shared by the portssm command and the benchmark: backend labels,
 * a seeded generator, host-side element access in every dtype, a monotonic clock.
 *
 * These programs link libportssm like any user does, so they see only the public API (plus the
 * header-only kernels/pssm_float16.h for host conversions).
 */
#ifndef PSSM_CLI_TOOL_H
#define PSSM_CLI_TOOL_H

#include <stddef.h>
#include <stdint.h>

#include "portssm.h"

/* Accepted by --backend: "auto", "cpu", "sim" (= sim32), "sim32", "sim64", "cuda", "hip",
 * each but auto optionally with ":N" for the device (sim32/sim64 already name one). */
#define PSSM_TOOL_BACKEND_LABELS "auto, cpu, sim32, sim64, cuda[:N], hip[:N]"

/* 1 on success; 0 for an unknown label. */
int pssm_tool_parse_backend(const char *label, portssm_backend *backend, int32_t *device);

/* Opens a context for a label.  On failure prints why to stderr (prefixed with prog) and returns
 * NULL; a label that parses but whose backend is absent says what the probe said. */
portssm_context *pssm_tool_open(const char *prog, const char *label);

/* "cuda:0", "sim32", "cpu": the label that reopens the same backend and device. */
void pssm_tool_ctx_label(const portssm_context *ctx, char *buf, size_t n);

/* xorshift128+ seeded through splitmix64: fast enough to fill model-sized tensors. */
typedef struct pssm_rng {
    uint64_t s[2];
} pssm_rng;

pssm_rng pssm_rng_seeded(uint64_t seed);
uint64_t pssm_rng_next(pssm_rng *r);
double pssm_rng_uniform(pssm_rng *r, double lo, double hi);
/* A seed from the clock, for runs that do not ask for one. */
uint64_t pssm_tool_clock_seed(void);

/* Element i of a dense buffer of dtype dt, as double / rounded to dt once. */
double pssm_tool_get(portssm_dtype dt, const void *base, int64_t i);
void pssm_tool_set(portssm_dtype dt, void *base, int64_t i, double v);

/* Seconds from an arbitrary origin, monotonic. */
double pssm_tool_now(void);

#endif /* PSSM_CLI_TOOL_H */
