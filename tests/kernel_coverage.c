/*
 * kernel_coverage.c - whether the suites ran every GPU kernel on the simulator, at both warp
 * widths, so that no kernel of the modules goes unchecked against the CPU oracle.
 *
 *   kernel_coverage --reset DIR   empty (or create) DIR, the launch logs' directory
 *   kernel_coverage DIR           read the files DIR/<test>.txt, lines "<kernel> sim<warp>"
 *                                 that the sim backend appends per launch under
 *                                 PORTSSM_SIM_LAUNCH_LOG, and fail naming every kernel that no
 *                                 suite launched on sim32 or sim64
 *
 * CTest runs it after the sim suites (fixtures, tests/CMakeLists.txt).  Kernels that only a
 * tuning build's knobs reach (backends/gpu/tuning.h) are listed below with the knob: a normal
 * build's planner never launches them.
 */
#include "../kernels/kernel_list.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const kernels[] = {
#define KERNEL_NAME_(name, part) #name,
    PSSM_KERNEL_LIST(KERNEL_NAME_)
#undef KERNEL_NAME_
};
enum { NKERNELS = sizeof kernels / sizeof kernels[0] };

/* Reached only through PORTSSM_TUNE_* in -DPORTSSM_TUNING=ON builds. */
static const struct {
    const char *prefix, *knob;
} tuning_only[] = {
    {"pssm_state_update_s1_", "UPDATE_SLOTS=1"},
    {"pssm_state_update_s2_", "UPDATE_SLOTS=2"},
};

static const char *tuning_knob(const char *name)
{
    for (size_t i = 0; i < sizeof tuning_only / sizeof tuning_only[0]; i++)
        if (strncmp(name, tuning_only[i].prefix, strlen(tuning_only[i].prefix)) == 0)
            return tuning_only[i].knob;
    return NULL;
}

static int ends_with(const char *s, const char *suffix)
{
    const size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int reset(const char *dir)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "kernel_coverage: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "kernel_coverage: cannot open %s: %s\n", dir, strerror(errno));
        return 1;
    }
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d)) != NULL) {
        if (!ends_with(e->d_name, ".txt"))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) != 0) {
            fprintf(stderr, "kernel_coverage: cannot remove %s: %s\n", path, strerror(errno));
            closedir(d);
            return 1;
        }
    }
    closedir(d);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--reset") == 0)
        return reset(argv[2]);
    if (argc != 2) {
        fprintf(stderr, "usage: kernel_coverage [--reset] DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "kernel_coverage: cannot open %s: %s\n", dir, strerror(errno));
        return 1;
    }
    static unsigned char seen[NKERNELS][2]; /* [kernel][sim32, sim64] */
    int logs = 0;
    long launches = 0;
    struct dirent *e;
    char path[4096], line[512], name[256], where[32];
    while ((e = readdir(d)) != NULL) {
        if (!ends_with(e->d_name, ".txt"))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) {
            fprintf(stderr, "kernel_coverage: cannot read %s: %s\n", path, strerror(errno));
            closedir(d);
            return 1;
        }
        logs++;
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "%255s %31s", name, where) != 2)
                continue;
            const int w = strcmp(where, "sim32") == 0 ? 0 : strcmp(where, "sim64") == 0 ? 1 : -1;
            if (w < 0)
                continue;
            launches++;
            for (int k = 0; k < NKERNELS; k++)
                if (strcmp(kernels[k], name) == 0) {
                    seen[k][w] = 1;
                    break;
                }
        }
        fclose(f);
    }
    closedir(d);
    if (logs == 0) {
        fprintf(stderr,
                "kernel_coverage: no launch logs in %s: the sim suites write them when CTest runs "
                "them (PORTSSM_SIM_LAUNCH_LOG)\n",
                dir);
        return 1;
    }

    int missing = 0, exempt = 0;
    for (int k = 0; k < NKERNELS; k++) {
        const char *knob = tuning_knob(kernels[k]);
        if (knob) {
            exempt++;
            continue;
        }
        if (seen[k][0] && seen[k][1])
            continue;
        printf("never launched on %s: %s\n",
               !seen[k][0] && !seen[k][1] ? "sim32 or sim64" : !seen[k][0] ? "sim32" : "sim64",
               kernels[k]);
        missing++;
    }
    printf("kernel_coverage: %d launch logs, %ld launches; %d of %d kernels (%d tuning-only "
           "ones aside) launched by the suites on both sim32 and sim64\n",
           logs, launches, NKERNELS - exempt - missing, NKERNELS - exempt, exempt);
    return missing ? 1 : 0;
}
