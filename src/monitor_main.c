/*
 * monitor_main.c - the `fairgpu-monitor` helper: the agent's zygote as a small static
 * program (see src/agent/monitor.h). The agent starts it as `fairgpu-monitor zygote`
 * with its end of a Unix socket on descriptor 3; it is not meant to be run by hand.
 */
#include "agent/monitor.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

/* Runs the zygote loop on descriptor 3 (a socket); exit status 2 on wrong use. */
int main(int argc, char **argv)
{
    struct stat st;
    if (argc != 2 || strcmp(argv[1], "zygote") != 0 || fstat(3, &st) != 0 ||
        !S_ISSOCK(st.st_mode)) {
        fprintf(stderr, "fairgpu-monitor: started by `fairgpu agent` only (zygote of job "
                        "monitors, socket on descriptor 3)\n");
        return 2;
    }
    fg_mon_zygote_main(3);
    return 0;
}
