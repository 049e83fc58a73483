/* sim_main.c — drover-sim: runs drover's real scheduling code on traces
 * (design §2). Subcommands are a table; each parses its own options.
 * Exit codes (design §8): 0 done, 1 failed (a message on stderr), 2 usage.
 */
#include <stdio.h>
#include <string.h>

#include "sched/place.h"
#include "sim/sim.h"

static int policies_main(int argc, char **argv)
{
    size_t n;
    const drv_place_policy_t *p = drv_place_policies(&n);
    for (size_t i = 0; i < n; i++)
        printf("%-14s %s%s\n", p[i].name, p[i].summary, i == 0 ? " (default)" : "");
    return 0;
}

static const struct command {
    const char *name;
    int (*main)(int argc, char **argv);
    const char *help;
} commands[] = {
    {"placement", sim_placement_main,
     "the FGD paper's GPU-sharing placement benchmark on the Alibaba trace"},
    {"speed", sim_speed_main, "decisions/s and decision latency, on the trace or scaled up"},
    {"serve", sim_serve_main,
     "replay an inference trace through the replica and node autoscalers"},
    {"jobs", sim_jobs_main,
     "replay a training-job trace through admission, gang placement and preemption"},
    {"policies", policies_main, "list the placement policies"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: drover-sim COMMAND [OPTIONS]   (COMMAND --help for its options)\n\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].main(argc - 1, argv + 1);
    fprintf(stderr, "drover-sim: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
