/* portssm_bench.c - the benchmark program; `portssm bench` runs the same code. */
#include "bench.h"

int main(int argc, char **argv) { return pssm_bench_main("portssm_bench", argc, argv); }
