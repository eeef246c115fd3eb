/*
 * cli.h - the sub-commands of the `portssm` program.  Each takes the arguments after its own
 * name (argv[0] is the sub-command) and returns the process exit status: 0 success, 1 a failed
 * check or error, 2 a usage error.
 */
#ifndef PSSM_CLI_H
#define PSSM_CLI_H

#include <stdio.h>

int pssm_cli_info(const char *prog, int argc, char **argv);
int pssm_cli_doctor(const char *prog, int argc, char **argv);

/* What `portssm info` prints: version, backends and why not, devices, AUTO's choice.
 * Returns 0, or 1 when AUTO cannot create a context. */
int pssm_cli_print_info(FILE *f);

#endif /* PSSM_CLI_H */
