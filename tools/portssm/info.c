/* info.c - `portssm info`: what is here and what AUTO would pick. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "portssm.h"
#include "tool.h"

/* Which libportssm was loaded: the first thing to know when two are installed. */
static const char *library_path(void)
{
    Dl_info dli;
    if (dladdr((void *)&portssm_version_string, &dli) && dli.dli_fname)
        return dli.dli_fname;
    return "(unknown)";
}

static void print_device(FILE *f, portssm_backend b, int32_t dev)
{
    portssm_device_info di;
    memset(&di, 0, sizeof di);
    char label[32];
    if (b == PORTSSM_BACKEND_SIM && dev < 2)
        snprintf(label, sizeof label, "sim%d", dev == 0 ? 32 : 64);
    else
        snprintf(label, sizeof label, "%s:%d", portssm_backend_name(b), (int)dev);
    portssm_status s = portssm_device_get_info(b, dev, &di);
    if (s != PORTSSM_OK) {
        fprintf(f, "  %-8s %s\n", label, portssm_status_name(s));
        return;
    }
    fprintf(f, "  %-8s %s\n", label, di.name);
    fprintf(f, "           arch %s, warp %d, %d %s, %.1f GiB\n", di.arch, (int)di.warp_size,
            (int)di.multiprocessors,
            b == PORTSSM_BACKEND_CPU   ? "cores"
            : b == PORTSSM_BACKEND_SIM ? "host threads"
            : b == PORTSSM_BACKEND_HIP ? "CUs"
                                       : "SMs",
            (double)di.total_memory / (1024.0 * 1024.0 * 1024.0));
}

/* The report indented, one clause ("; "-separated) or line per output line. */
static void print_report(FILE *f, const char *r)
{
    while (r && *r) {
        size_t len = strcspn(r, ";\n");
        fprintf(f, "  %.*s%s\n", (int)len, r, r[len] == ';' ? ";" : "");
        r += len;
        while (*r == ';' || *r == '\n' || *r == ' ')
            r++;
    }
}

int pssm_cli_print_info(FILE *f)
{
    static const portssm_backend all[] = {PORTSSM_BACKEND_CPU, PORTSSM_BACKEND_SIM,
                                          PORTSSM_BACKEND_CUDA, PORTSSM_BACKEND_HIP};
    const size_t nall = sizeof all / sizeof all[0];
    int32_t ndev[4] = {0, 0, 0, 0};

    fprintf(f, "portssm %s\n", PORTSSM_VERSION_STRING);
    fprintf(f, "library   %s (version %s)\n", library_path(), portssm_version_string());
    if (strcmp(PORTSSM_VERSION_STRING, portssm_version_string()) != 0)
        fprintf(f, "warning   this command was built against %s but loaded library %s\n",
                PORTSSM_VERSION_STRING, portssm_version_string());
    const char *env = getenv("PORTSSM_BACKEND");
    fprintf(f, "PORTSSM_BACKEND=%s\n", env ? env : "(not set)");

    fprintf(f, "\nbackends:\n");
    for (size_t i = 0; i < nall; i++) {
        const char *why = NULL;
        portssm_status s = portssm_backend_probe(all[i], &ndev[i], &why);
        if (s == PORTSSM_OK)
            fprintf(f, "  %-5s available, %d device%s%s%s\n", portssm_backend_name(all[i]),
                    (int)ndev[i], ndev[i] == 1 ? "" : "s", why && *why ? ": " : "",
                    why ? why : "");
        else {
            ndev[i] = 0;
            fprintf(f, "  %-5s not available: %s: %s\n", portssm_backend_name(all[i]),
                    portssm_status_name(s), why ? why : "(no reason given)");
        }
    }

    fprintf(f, "\ndevices:\n");
    for (size_t i = 0; i < nall; i++)
        for (int32_t d = 0; d < ndev[i]; d++)
            print_device(f, all[i], d);

    portssm_context *ctx = NULL;
    portssm_status s = portssm_create(&ctx, PORTSSM_BACKEND_AUTO, 0);
    if (s != PORTSSM_OK) {
        fprintf(f, "\nauto: cannot create a context: %s: %s\n", portssm_status_name(s),
                portssm_last_error(NULL));
        return 1;
    }
    char label[32];
    pssm_tool_ctx_label(ctx, label, sizeof label);
    fprintf(f, "\nauto picks %s\n", label);
    fprintf(f, "selection report:\n");
    print_report(f, portssm_selection_report(ctx));
    portssm_destroy(ctx);
    return 0;
}

int pssm_cli_info(const char *prog, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: %s info\n\nPrints the library version, every backend (available or "
                   "why not), every device, and\nwhich backend AUTO picks with its selection "
                   "report.\n", prog);
            return 0;
        }
        fprintf(stderr, "%s info: unknown argument '%s'\n", prog, argv[i]);
        return 2;
    }
    int rc = pssm_cli_print_info(stdout);
    fflush(stdout);
    return rc;
}
