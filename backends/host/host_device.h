/*
 * host_device.h - the "device" half shared by the backends that run on the host (cpu, sim):
 * memory from the C heap (256-byte aligned), a synchronous stream that only takes NULL, and
 * events that read the monotonic clock.  Both backend tables point their slots here.
 */
#ifndef PSSM_HOST_DEVICE_H
#define PSSM_HOST_DEVICE_H

#include "../../src/backend.h"

portssm_status pssm_host_set_stream(pssm_bctx *c, void *stream);
portssm_status pssm_host_synchronize(pssm_bctx *c);
portssm_status pssm_host_mem_alloc(pssm_bctx *c, void **ptr, size_t bytes);
portssm_status pssm_host_mem_free(pssm_bctx *c, void *ptr);
portssm_status pssm_host_mem_copy(pssm_bctx *c, void *dst, const void *src, size_t bytes,
                                  portssm_memcpy_kind kind);
portssm_status pssm_host_mem_set(pssm_bctx *c, void *ptr, int value, size_t bytes);
portssm_status pssm_host_event_create(pssm_bctx *c, void **ev);
void pssm_host_event_destroy(pssm_bctx *c, void *ev);
portssm_status pssm_host_event_record(pssm_bctx *c, void *ev);
portssm_status pssm_host_event_elapsed_ms(pssm_bctx *c, void *start, void *end, float *ms);
/* Bytes of host RAM, 0 if unknown (device_info.total_memory of cpu and sim). */
uint64_t pssm_host_total_memory(void);

/* Designated initialisers for the slots above. */
#define PSSM_HOST_DEVICE_SLOTS                                                                  \
    .set_stream = pssm_host_set_stream, .synchronize = pssm_host_synchronize,                   \
    .mem_alloc = pssm_host_mem_alloc, .mem_free = pssm_host_mem_free,                           \
    .mem_copy = pssm_host_mem_copy, .mem_set = pssm_host_mem_set,                               \
    .event_create = pssm_host_event_create, .event_destroy = pssm_host_event_destroy,           \
    .event_record = pssm_host_event_record, .event_elapsed_ms = pssm_host_event_elapsed_ms

#endif /* PSSM_HOST_DEVICE_H */
