/*
 * cli_prompt.c - terminal prompts: a password without echo, a user name, and wiping a
 * secret before it is freed.
 *
 * A password prompt turns the terminal's echo off; if the user interrupts it (Ctrl-C,
 * SIGTERM, SIGHUP), the signal handler restores the terminal before the process dies,
 * so the shell is not left without echo. Example: `fairgpu login alice` prints
 * "Password: " on stderr, reads the line unseen, and returns it without its "\n".
 */
#include "cli/cli.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

/* The terminal settings to restore if the user interrupts a password prompt. */
static struct termios saved_tty;
static volatile sig_atomic_t tty_saved;

static void restore_tty_and_die(int sig)
{
    if (tty_saved)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tty);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Strips the line end of a line of n bytes read by getline. */
static void chomp(char *line, ssize_t n)
{
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
}

/* Prompts and reads a line from the terminal with its echo off (what is typed is not
 * shown; the newline is). Returns getline's count, or -2 when the terminal cannot be
 * read. */
static ssize_t getline_quiet(const char *prompt, char **line, size_t *cap)
{
    struct termios old, quiet;
    if (tcgetattr(STDIN_FILENO, &old) < 0) {
        fprintf(stderr, "fairgpu: cannot read the terminal: %s\n", strerror(errno));
        return -2;
    }
    quiet = old;
    quiet.c_lflag &= ~(tcflag_t)ECHO;
    quiet.c_lflag |= ECHONL;
    fputs(prompt, stderr);
    fflush(stderr);
    saved_tty = old;
    tty_saved = 1;
    void (*oint)(int) = signal(SIGINT, restore_tty_and_die);
    void (*oterm)(int) = signal(SIGTERM, restore_tty_and_die);
    void (*ohup)(int) = signal(SIGHUP, restore_tty_and_die);
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
    ssize_t n = getline(line, cap, stdin);
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
    tty_saved = 0;
    signal(SIGINT, oint);
    signal(SIGTERM, oterm);
    signal(SIGHUP, ohup);
    return n;
}

char *cli_read_secret(const char *prompt, int force_stdin)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int tty = !force_stdin && isatty(STDIN_FILENO);
    if (tty) {
        n = getline_quiet(prompt, &line, &cap);
        if (n == -2)
            return NULL;
    } else {
        n = getline(&line, &cap, stdin);
    }
    if (n < 0) {
        free(line);
        fprintf(stderr, "fairgpu: no password given%s\n",
                tty ? "" : " on standard input (give it on one line)");
        return NULL;
    }
    chomp(line, n);
    return line;
}

char *cli_read_line(const char *prompt)
{
    char *line = NULL;
    size_t cap = 0;
    fputs(prompt, stderr);
    fflush(stderr);
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) {
        free(line);
        return NULL;
    }
    chomp(line, n);
    return line;
}

void cli_wipe_free(char *s)
{
    if (!s)
        return;
    volatile char *p = s;
    while (*p)
        *p++ = '\0';
    free(s);
}
