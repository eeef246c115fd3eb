/*
 * cpu_threads.h - how the cpu backend spreads an op over host threads, keeping its results
 * bit-identical for any thread count.
 *
 * An op is cut into units that write disjoint output elements (a (batch, head) row of the SSD,
 * a channel of the conv), each computed by one thread with the operation order of the serial
 * code.  What several units sum into one element (weight gradients, the SSD's dB over heads)
 * each unit computes as its own partial, which `commit` adds into the total in unit order
 * (0, 1, 2, ...), whatever thread finished first: the sums have the same order for 1 thread or
 * 64.  No floating-point atomics anywhere; the only atomic is the counter that hands out units.
 * A unit's partials wait for their commit in part slot u % PSSM_CPU_RING(threads), so a thread
 * that finishes early goes on with later units (up to the ring's length ahead of the oldest
 * uncommitted one) instead of waiting for a slower or descheduled thread.
 *
 * Threads: PORTSSM_NUM_THREADS (read at every call, so a process may change it between calls;
 * 1 gives the serial loop on the calling thread), else the CPUs the process may run on
 * (sched_getaffinity where there is one, else the online CPUs), at most PSSM_CPU_MAX_THREADS.
 * A call whose work is small (cost below PSSM_CPU_SPREAD_MIN) runs on the calling thread:
 * starting threads would cost more than it saves (the tests' many tiny shapes).  Threads are
 * started per call and joined before it returns (nothing outlives the call: a library unloaded
 * by dlclose leaves no thread behind); a thread that cannot start leaves its units to the
 * others, with the same results.
 */
#ifndef PSSM_CPU_THREADS_H
#define PSSM_CPU_THREADS_H

#include <stdint.h>

#define PSSM_CPU_MAX_THREADS 256
/* Below this many units of cost (about one multiply-add each) a call stays on one thread. */
#define PSSM_CPU_SPREAD_MIN 200000.0

/* Part slots of a call with commits: size the partials' scratch with it. */
#define PSSM_CPU_RING(threads) (2 * (threads))

/* Computes unit u with thread slot `slot` (0 .. threads-1: an index into per-thread scratch),
 * leaving its partials (if any) in part slot `part` (0 .. PSSM_CPU_RING(threads)-1). */
typedef void (*pssm_cpu_unit_fn)(void *arg, int64_t u, int slot, int part);
/* Adds unit u's partials (left in part slot `part`) into the totals; called in order of u, one
 * at a time. */
typedef void (*pssm_cpu_commit_fn)(void *arg, int64_t u, int part);

/* The threads a call of `cost` total would use for `units` units: 1 .. PSSM_CPU_MAX_THREADS.
 * Size per-thread scratch with it, then pass the same count to pssm_cpu_parallel. */
int pssm_cpu_threads_for(int64_t units, double cost);

/* Runs unit(arg, u, slot) for u = 0 .. units-1 over `threads` threads (the calling thread is
 * one of them), and commit (may be NULL) after each in order of u.  Returns when all are done. */
void pssm_cpu_parallel(int64_t units, int threads, pssm_cpu_unit_fn unit,
                       pssm_cpu_commit_fn commit, void *arg);

/* The thread count without the size rule: PORTSSM_NUM_THREADS or the usable CPUs. */
int pssm_cpu_num_threads(void);

#endif /* PSSM_CPU_THREADS_H */
