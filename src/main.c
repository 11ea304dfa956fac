/*
 * main.c - the one fairgpu binary: dispatches to a subcommand.
 */
#include "common/commands.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("usage: fairgpu <command> [options]\n"
          "\n"
          "platform:\n"
          "  server     run the controller (REST API, scheduler, web UI)\n"
          "  agent      run a node agent\n"
          "  sim        replay a job trace through the scheduler core\n"
          "\n"
          "client:\n"
          "  login logout whoami submit jobs show why cancel events logs nodes share\n"
          "  token node-token user account usage invoice credit whatif report\n"
          "\n"
          "Run 'fairgpu <command> --help' for a command's options.\n",
          f);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "sim"))
        return fg_cmd_sim(argc - 1, argv + 1);
    if (!strcmp(cmd, "server"))
        return fg_cmd_server(argc - 1, argv + 1);
    if (!strcmp(cmd, "agent"))
        return fg_cmd_agent(argc - 1, argv + 1);
    int rc = fg_cmd_client(argc - 1, argv + 1);
    if (rc >= 0)
        return rc;
    fprintf(stderr, "fairgpu: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
