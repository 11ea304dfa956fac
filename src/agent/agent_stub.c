/* Placeholder until the agent subsystem lands: says so plainly and fails. */
#include "common/commands.h"

#include <stdio.h>

int fg_cmd_agent(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "fairgpu agent: not implemented yet\n");
    return 2;
}
