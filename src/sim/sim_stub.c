/* Placeholder until the sim subsystem lands: says so plainly and fails. */
#include "common/commands.h"

#include <stdio.h>

int fg_cmd_sim(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "fairgpu sim: not implemented yet\n");
    return 2;
}
