/* error.c - where messages are kept: per thread without a context, else in the context. */
#include "core.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char thread_error[PSSM_ERROR_CAPACITY];

const char *pssm_thread_error(void) { return thread_error; }

const void *pssm_thread_token(void) { return thread_error; }

void pssm_thread_clear(void) { thread_error[0] = '\0'; }

portssm_status pssm_thread_fail(portssm_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(thread_error, sizeof thread_error, fmt, ap);
    va_end(ap);
    return status;
}

portssm_status pssm_backend_result(portssm_context *ctx, const char *fn, portssm_status status)
{
    if (status == PORTSSM_OK)
        ctx->b.error[0] = '\0';
    else if (!ctx->b.error[0])
        pssm_fail(&ctx->b, status, "%s: the %s backend failed: %s", fn, ctx->be->name,
                  portssm_status_string(status));
    return status;
}
