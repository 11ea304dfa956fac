/*
 * commands.h - entry points of the fairgpu subcommands, dispatched by src/main.c.
 * Each returns the process exit status. argv[0] is the subcommand name.
 */
#ifndef FG_COMMANDS_H
#define FG_COMMANDS_H

int fg_cmd_sim(int argc, char **argv);    /* src/sim */
int fg_cmd_server(int argc, char **argv); /* src/server */
int fg_cmd_agent(int argc, char **argv);  /* src/agent */
/* Client commands (login, logout, whoami, submit, jobs, show, cancel, events, nodes,
 * share, token, node-token, user, account, logs,
 * usage, invoice, credit, report): src/cli. Returns -1 if argv[0] is not one. */
int fg_cmd_client(int argc, char **argv);

#endif
