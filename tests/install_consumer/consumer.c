/* A program that uses an installed libportssm, found with find_package(portssm) or pkg-config. */
#include <portssm.h>

#include <stdio.h>
#include <string.h>

int main(void)
{
    if (portssm_version() != PORTSSM_VERSION ||
        strcmp(portssm_version_string(), PORTSSM_VERSION_STRING) != 0) {
        fprintf(stderr, "header %s but library %s\n", PORTSSM_VERSION_STRING,
                portssm_version_string());
        return 1;
    }
    portssm_context *ctx = NULL;
    if (portssm_create(&ctx, PORTSSM_BACKEND_CPU, 0) != PORTSSM_OK) {
        fprintf(stderr, "portssm_create: %s\n", portssm_last_error(NULL));
        return 1;
    }
    const char msg[] = "round trip through the cpu device";
    char back[sizeof msg] = {0};
    void *d = NULL;
    if (portssm_malloc(ctx, &d, sizeof msg) != PORTSSM_OK ||
        portssm_memcpy(ctx, d, msg, sizeof msg, PORTSSM_HOST_TO_DEVICE) != PORTSSM_OK ||
        portssm_memcpy(ctx, back, d, sizeof msg, PORTSSM_DEVICE_TO_HOST) != PORTSSM_OK ||
        strcmp(back, msg) != 0) {
        fprintf(stderr, "memory: %s\n", portssm_last_error(ctx));
        return 1;
    }
    /* an op with nothing in it is rejected by validation, whatever the backend implements */
    portssm_causal_conv1d_fwd_args args = {0};
    if (portssm_causal_conv1d_fwd(ctx, &args) != PORTSSM_ERR_INVALID_ARGUMENT) {
        fprintf(stderr, "an empty causal_conv1d_fwd was not rejected\n");
        return 1;
    }
    printf("portssm %s: %s\n", portssm_version_string(), portssm_selection_report(ctx));
    /* GPU modules are looked up beside the installed library: show what was found */
    for (int b = PORTSSM_BACKEND_CPU; b <= PORTSSM_BACKEND_SIM; b++) {
        const char *why = NULL;
        portssm_status s = portssm_backend_probe((portssm_backend)b, NULL, &why);
        printf("  %-4s %s: %s\n", portssm_backend_name((portssm_backend)b),
               portssm_status_name(s), why);
    }
    portssm_free(ctx, d);
    portssm_destroy(ctx);
    return 0;
}
