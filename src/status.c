/* status.c - names and descriptions of status codes; the version of the loaded library. */
#include "portssm.h"

#include <stddef.h>

static const struct {
    const char *name;
    const char *text;
} statuses[] = {
    [PORTSSM_OK] = {"PORTSSM_OK", "success"},
    [PORTSSM_ERR_INVALID_ARGUMENT] = {"PORTSSM_ERR_INVALID_ARGUMENT", "invalid argument"},
    [PORTSSM_ERR_UNSUPPORTED] = {"PORTSSM_ERR_UNSUPPORTED", "not supported by this backend"},
    [PORTSSM_ERR_NO_BACKEND] = {"PORTSSM_ERR_NO_BACKEND", "backend not built or not loadable"},
    [PORTSSM_ERR_NO_DEVICE] = {"PORTSSM_ERR_NO_DEVICE", "no such device"},
    [PORTSSM_ERR_NO_KERNEL_IMAGE] = {"PORTSSM_ERR_NO_KERNEL_IMAGE",
                                     "no kernel image for this device"},
    [PORTSSM_ERR_OUT_OF_MEMORY] = {"PORTSSM_ERR_OUT_OF_MEMORY", "out of memory"},
    [PORTSSM_ERR_DEVICE] = {"PORTSSM_ERR_DEVICE", "device or driver error"},
    [PORTSSM_ERR_INTERNAL] = {"PORTSSM_ERR_INTERNAL", "internal error in portssm (please report)"},
};

/* The enum's values are pinned; anything else (a cast integer) is unknown. */
static int known(portssm_status s)
{
    return (int)s >= 0 && (size_t)s < sizeof statuses / sizeof statuses[0] && statuses[s].name;
}

PORTSSM_API const char *portssm_status_name(portssm_status s)
{
    return known(s) ? statuses[s].name : "PORTSSM_UNKNOWN_STATUS";
}

PORTSSM_API const char *portssm_status_string(portssm_status s)
{
    return known(s) ? statuses[s].text : "unknown status code";
}

PORTSSM_API const char *portssm_version_string(void) { return PORTSSM_VERSION_STRING; }

PORTSSM_API int32_t portssm_version(void) { return PORTSSM_VERSION; }
