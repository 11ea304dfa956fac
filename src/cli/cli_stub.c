/* Placeholder until the client commands land: knows none of them. */
#include "common/commands.h"

int fg_cmd_client(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return -1;
}
