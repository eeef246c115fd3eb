/* tensor.c - dtype facts and the contiguous-tensor constructor. */
#include "portssm.h"
#include "size_math.h"

#include <stdint.h>
#include <string.h>

PORTSSM_API size_t portssm_dtype_size(portssm_dtype dtype)
{
    switch (dtype) {
    case PORTSSM_F32: return 4;
    case PORTSSM_F16: return 2;
    case PORTSSM_BF16: return 2;
    case PORTSSM_I32: return 4;
    }
    return 0;
}

PORTSSM_API const char *portssm_dtype_name(portssm_dtype dtype)
{
    switch (dtype) {
    case PORTSSM_F32: return "f32";
    case PORTSSM_F16: return "f16";
    case PORTSSM_BF16: return "bf16";
    case PORTSSM_I32: return "i32";
    }
    return NULL;
}

PORTSSM_API portssm_tensor portssm_tensor_contiguous(void *data, portssm_dtype dtype, int32_t ndim,
                                                     const int64_t *shape)
{
    portssm_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dtype;
    t.ndim = ndim;
    if (ndim < 1 || ndim > PORTSSM_MAX_DIMS || !shape) {
        if (!shape)
            t.ndim = 0; /* rejected by every op: no op takes a 0-d tensor */
        return t;
    }
    /* A stride that does not fit saturates, so validation reports the overflow instead of
     * silently working with a wrapped value. */
    int64_t acc = 1;
    int overflow = 0;
    for (int i = ndim - 1; i >= 0; i--) {
        t.shape[i] = shape[i];
        t.stride[i] = overflow ? INT64_MAX : acc;
        if (!overflow && !pssm_checked_mul(acc, shape[i] > 0 ? shape[i] : 1, &acc))
            overflow = 1;
    }
    return t;
}

PORTSSM_API portssm_tensor portssm_tensor_strided(void *data, portssm_dtype dtype, int32_t ndim,
                                                  const int64_t *shape, const int64_t *stride)
{
    portssm_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dtype;
    if (ndim < 1 || ndim > PORTSSM_MAX_DIMS || !shape || !stride)
        return t; /* ndim 0: rejected by every op */
    t.ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        t.shape[i] = shape[i];
        t.stride[i] = stride[i];
    }
    return t;
}
