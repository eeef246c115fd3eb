/*
 * workspace_plan.h - how a GPU op lays out its workspace: sub-buffers carved in order, each
 * aligned to 256 bytes.  The op's size query and the op itself run the same planning function,
 * so the bytes asked for and the offsets used can never disagree.
 */
#ifndef PSSM_GPU_WORKSPACE_PLAN_H
#define PSSM_GPU_WORKSPACE_PLAN_H

#include <stddef.h>
#include <stdint.h>

#define PSSM_WS_ALIGN ((size_t)256)

typedef struct pssm_ws_plan {
    size_t used;  /* bytes carved so far */
    int overflow; /* a size did not fit size_t */
} pssm_ws_plan;

/* Carves `count` elements of `elem` bytes; returns the sub-buffer's byte offset. */
static inline size_t pssm_ws_take(pssm_ws_plan *w, int64_t count, size_t elem)
{
    const size_t off = (w->used + PSSM_WS_ALIGN - 1) / PSSM_WS_ALIGN * PSSM_WS_ALIGN;
    if (count < 0 || (elem && (uint64_t)count > (SIZE_MAX - off) / elem)) {
        w->overflow = 1;
        return 0;
    }
    w->used = off + (size_t)count * elem;
    return off;
}

/* The sub-buffer at `off` of a workspace base (NULL while only sizing). */
static inline void *pssm_ws_at(void *base, size_t off)
{
    return base ? (char *)base + off : NULL;
}

#endif
