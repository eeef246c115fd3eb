/*
 * kernel_coverage.c - whether the suites ran every GPU kernel on the simulator, at one warp
 * width, so that no kernel of the modules goes without a suite that runs it there (where the
 * kernel suites compare each result with the CPU oracle).
 *
 *   kernel_coverage --reset DIR      empty (or create) DIR, the launch logs' directory
 *   kernel_coverage DIR sim32|sim64  read the files DIR/<test>.txt, lines "<kernel> sim<warp>"
 *                                    that the sim backend appends for each launch that ran to
 *                                    its end (PORTSSM_SIM_LAUNCH_LOG), and fail naming every
 *                                    kernel that no suite launched on that sim
 *
 * CTest runs it after the sim suites (fixtures, tests/CMakeLists.txt), once per warp width.
 * Two kinds of kernel are named below and left out: those only a tuning build's knobs reach
 * (backends/gpu/tuning.h), and the self-test's misuse kernel, whose launches fail on purpose.
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

/* Left out of the check, with the reason. */
static const struct {
    const char *prefix, *why;
} left_out[] = {
    {"pssm_state_update_s1_", "tuning builds only: PORTSSM_TUNE_UPDATE_SLOTS=1"},
    {"pssm_state_update_s2_", "tuning builds only: PORTSSM_TUNE_UPDATE_SLOTS=2"},
    {"pssm_selftest_misuse", "test_dialect launches it to fail"},
};

static const char *left_out_why(const char *name)
{
    for (size_t i = 0; i < sizeof left_out / sizeof left_out[0]; i++)
        if (strncmp(name, left_out[i].prefix, strlen(left_out[i].prefix)) == 0)
            return left_out[i].why;
    return NULL;
}

/* A regular file named *.txt in dir (path written to path). */
static int is_log(const char *dir, const char *name, char *path, size_t cap)
{
    const size_t n = strlen(name);
    if (n < 4 || strcmp(name + n - 4, ".txt") != 0)
        return 0;
    snprintf(path, cap, "%s/%s", dir, name);
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
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
    int status = 0;
    while ((e = readdir(d)) != NULL) {
        if (is_log(dir, e->d_name, path, sizeof path) && unlink(path) != 0) {
            fprintf(stderr, "kernel_coverage: cannot remove %s: %s\n", path, strerror(errno));
            status = 1;
        }
    }
    closedir(d);
    return status;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--reset") == 0)
        return reset(argv[2]);
    if (argc != 3 || argv[1][0] == '-' ||
        (strcmp(argv[2], "sim32") != 0 && strcmp(argv[2], "sim64") != 0)) {
        fprintf(stderr, "usage: kernel_coverage --reset DIR\n"
                        "       kernel_coverage DIR sim32|sim64\n");
        return 2;
    }
    const char *dir = argv[1], *sim = argv[2];
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "kernel_coverage: cannot open %s: %s\n", dir, strerror(errno));
        return 1;
    }
    static unsigned char seen[NKERNELS];
    int logs = 0, unknown = 0;
    long launches = 0;
    struct dirent *e;
    char path[4096], line[512], name[256], where[32];
    while ((e = readdir(d)) != NULL) {
        if (!is_log(dir, e->d_name, path, sizeof path))
            continue;
        FILE *f = fopen(path, "r");
        if (!f) {
            fprintf(stderr, "kernel_coverage: cannot read %s: %s\n", path, strerror(errno));
            closedir(d);
            return 1;
        }
        logs++;
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "%255s %31s", name, where) != 2 || strcmp(where, sim) != 0)
                continue;
            launches++;
            int k = 0;
            while (k < NKERNELS && strcmp(kernels[k], name) != 0)
                k++;
            if (k < NKERNELS)
                seen[k] = 1;
            else if (unknown++ < 5) /* a log of another build's kernels */
                fprintf(stderr, "kernel_coverage: %s names an unknown kernel %s\n", path, name);
        }
        fclose(f);
    }
    closedir(d);
    if (launches == 0) {
        fprintf(stderr,
                "kernel_coverage: no %s launches logged in %s (%d logs): the sim suites write "
                "them when CTest runs them (PORTSSM_SIM_LAUNCH_LOG)\n",
                sim, dir, logs);
        return 1;
    }

    int missing = 0, out = 0;
    for (int k = 0; k < NKERNELS; k++) {
        if (left_out_why(kernels[k])) {
            out++;
            continue;
        }
        if (!seen[k]) {
            printf("never launched on %s: %s\n", sim, kernels[k]);
            missing++;
        }
    }
    printf("kernel_coverage: %s: %d launch logs, %ld launches; %d of %d kernels launched by the "
           "suites (%d left out:",
           sim, logs, launches, NKERNELS - out - missing, NKERNELS - out, out);
    for (size_t i = 0; i < sizeof left_out / sizeof left_out[0]; i++)
        printf("%s %s* (%s)", i ? ";" : "", left_out[i].prefix, left_out[i].why);
    printf(")\n");
    return missing ? 1 : 0;
}
