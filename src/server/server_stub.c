/* Placeholder until the server subsystem lands: says so plainly and fails. */
#include "common/commands.h"

#include <stdio.h>

int fg_cmd_server(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "fairgpu server: not implemented yet\n");
    return 2;
}
