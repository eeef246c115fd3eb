/*
 * sim_runtime.h - what the sim target of the kernel dialect calls into.
 *
 * The simulator runs a launch block by block; inside a block every GPU thread is a fiber with its
 * own stack.  A fiber runs until it reaches a barrier or a warp shuffle, then the next fiber runs.
 * A barrier is released when every thread of the block has reached it (the same one: file/line);
 * a shuffle completes when every lane of the warp has reached it (the same one) and exchanges
 * the values.  A barrier or shuffle reached by only part of its block/warp, or by threads at
 * different places, is an error: the launch stops and reports it (status + message), never hangs.
 */
#ifndef PSSM_SIM_RUNTIME_H
#define PSSM_SIM_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pssm_sim_dim3 {
    uint32_t x, y, z;
} pssm_sim_dim3;

/* The running GPU thread: what the dialect's index macros read. */
typedef struct pssm_sim_thread {
    pssm_sim_dim3 thread, block, block_dim, grid_dim;
} pssm_sim_thread;

/* Points at the fiber that is running on this OS thread (each OS thread runs its own blocks). */
extern _Thread_local pssm_sim_thread *pssm_sim_self;

enum { PSSM_SIM_XOR = 0, PSSM_SIM_UP = 1, PSSM_SIM_DOWN = 2, PSSM_SIM_IDX = 3 };

/* Warp shuffle of a 32-bit value with CUDA's full-warp semantics (width = the warp). */
uint32_t pssm_sim_shfl(int kind, uint32_t value, int arg, const char *file, int line);
void pssm_sim_barrier(const char *file, int line);
/* Block-shared memory: the k-th call a thread makes returns the block's k-th slot. */
void *pssm_sim_shared(size_t bytes, size_t align, const char *file, int line);
/* The block's dynamic shared memory, as many bytes as the launch gave (16-byte aligned). */
void *pssm_sim_dynamic_shared(const char *file, int line);
/* Asynchronous 16-byte copies (the dialect's pssm_copy_async16): src is read now (NULL: 16
 * zero bytes); dst is written now, or, where the launch defers copies, when a wait covers the
 * copy's group: pssm_sim_copy_wait(n) lands every copy but those of the n newest groups
 * committed since (n = -1: every copy, committed or not), and the thread's end lands the rest. */
void pssm_sim_copy16(void *dst, const void *src);
void pssm_sim_copy_commit(void);
void pssm_sim_copy_wait(int n);

#ifdef __cplusplus
}
#endif

#endif /* PSSM_SIM_RUNTIME_H */
