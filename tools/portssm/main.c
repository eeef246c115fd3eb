/* main.c - the `portssm` command: dispatch to info, doctor, bench. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "portssm.h"

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s <command> [options]\n"
            "\n"
            "commands:\n"
            "  info      library version, every backend (available or why not), the devices,\n"
            "            and which backend AUTO picks and why\n"
            "  doctor    info, then the device self-test, then every op at a small random shape\n"
            "            on the chosen backend against the cpu oracle (%s doctor --help)\n"
            "  bench     time the ops at model-sized shapes (%s bench --help)\n"
            "  help      this text\n"
            "\n"
            "options:\n"
            "  -h, --help     this text\n"
            "  -V, --version  the version of the command and of the library it loaded\n"
            "\n"
            "The environment variable PORTSSM_BACKEND (cpu, cuda, hip, sim, sim32, sim64, with\n"
            "an optional :N) decides what AUTO picks.\n",
            prog, prog, prog);
}

int main(int argc, char **argv)
{
    const char *prog = "portssm";
    if (argc < 2) {
        usage(stderr, prog);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout, prog);
        return 0;
    }
    if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0) {
        printf("portssm %s (library %s)\n", PORTSSM_VERSION_STRING, portssm_version_string());
        return 0;
    }
    if (strcmp(cmd, "info") == 0)
        return pssm_cli_info(prog, argc - 1, argv + 1);
    if (strcmp(cmd, "doctor") == 0)
        return pssm_cli_doctor(prog, argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0)
        return pssm_bench_main("portssm bench", argc - 1, argv + 1);
    if (cmd[0] == '-')
        fprintf(stderr, "%s: unknown option '%s'\n", prog, cmd);
    else
        fprintf(stderr, "%s: unknown command '%s'\n", prog, cmd);
    fprintf(stderr, "Try '%s --help'.\n", prog);
    return 2;
}
