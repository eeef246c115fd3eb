/* tuning.c - see tuning.h (only in -DPORTSSM_TUNING=ON builds). */
#include "tuning.h"

#ifdef PSSM_TUNING
#include <stdio.h>
#include <stdlib.h>

int64_t pssm_tune(const char *name, int64_t fallback)
{
    char key[96];
    snprintf(key, sizeof key, "PORTSSM_TUNE_%s", name);
    const char *v = getenv(key);
    if (!v || !*v)
        return fallback;
    char *end = NULL;
    const long long r = strtoll(v, &end, 10);
    return end && *end == '\0' ? (int64_t)r : fallback;
}
#endif
