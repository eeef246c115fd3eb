/* host_device.c - see host_device.h. */
#include "host_device.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HOST_ALIGN 256 /* the alignment portssm_malloc promises */

portssm_status pssm_host_set_stream(pssm_bctx *c, void *stream)
{
    if (stream)
        return pssm_fail(c, PORTSSM_ERR_INVALID_ARGUMENT,
                         "stream: the host backends run synchronously and accept only NULL, "
                         "got %p",
                         stream);
    return PORTSSM_OK;
}

portssm_status pssm_host_synchronize(pssm_bctx *c) { return PORTSSM_OK; }

portssm_status pssm_host_mem_alloc(pssm_bctx *c, void **ptr, size_t bytes)
{
    *ptr = NULL;
    if (bytes == 0)
        return PORTSSM_OK;
    if (bytes > SIZE_MAX - (HOST_ALIGN - 1))
        return pssm_fail(c, PORTSSM_ERR_OUT_OF_MEMORY, "portssm_malloc: %zu bytes is too many",
                         bytes);
    /* aligned_alloc wants a size that is a multiple of the alignment */
    const size_t rounded = (bytes + HOST_ALIGN - 1) / HOST_ALIGN * HOST_ALIGN;
    void *p = aligned_alloc(HOST_ALIGN, rounded);
    if (!p)
        return pssm_fail(c, PORTSSM_ERR_OUT_OF_MEMORY,
                         "portssm_malloc: the host could not give %zu bytes", bytes);
    *ptr = p;
    return PORTSSM_OK;
}

portssm_status pssm_host_mem_free(pssm_bctx *c, void *ptr)
{
    free(ptr);
    return PORTSSM_OK;
}

portssm_status pssm_host_mem_copy(pssm_bctx *c, void *dst, const void *src, size_t bytes,
                                  portssm_memcpy_kind kind)
{
    if (bytes)
        memmove(dst, src, bytes);
    return PORTSSM_OK;
}

portssm_status pssm_host_mem_set(pssm_bctx *c, void *ptr, int value, size_t bytes)
{
    if (bytes)
        memset(ptr, value, bytes);
    return PORTSSM_OK;
}

/* An event is the monotonic clock at its record (host work is synchronous). */
portssm_status pssm_host_event_create(pssm_bctx *c, void **ev)
{
    struct timespec *t = calloc(1, sizeof *t);
    if (!t)
        return pssm_fail(c, PORTSSM_ERR_OUT_OF_MEMORY, "event_create: out of host memory");
    *ev = t;
    return PORTSSM_OK;
}

void pssm_host_event_destroy(pssm_bctx *c, void *ev) { free(ev); }

portssm_status pssm_host_event_record(pssm_bctx *c, void *ev)
{
    if (clock_gettime(CLOCK_MONOTONIC, (struct timespec *)ev) != 0)
        return pssm_fail(c, PORTSSM_ERR_INTERNAL, "event_record: CLOCK_MONOTONIC unavailable");
    return PORTSSM_OK;
}

portssm_status pssm_host_event_elapsed_ms(pssm_bctx *c, void *start, void *end, float *ms)
{
    const struct timespec *a = start, *b = end;
    *ms = (float)((double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) * 1e-6);
    return PORTSSM_OK;
}

uint64_t pssm_host_total_memory(void)
{
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}
