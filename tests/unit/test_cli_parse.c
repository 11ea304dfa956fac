/*
 * test_cli_parse.c - the CLI's pure parsers: time limits, submit flags, #FAIRGPU and
 * #SBATCH scripts, layered overrides, the SSE parser, tables, the config file, and
 * `fairgpu submit --dry-run` end to end (no server needed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cli/config.h"
#include "cli/script.h"
#include "cli/sse.h"
#include "cli/table.h"
#include "cli/timespec.h"
#include "common/commands.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ time limits -- */

static long long t_ok(const char *s)
{
    long long v = -1;
    char err[256];
    int rc = fg_parse_time(s, &v, err, sizeof err);
    if (rc != 0)
        fail_msg("'%s' rejected: %s", s, err);
    return v;
}

static void t_bad(const char *s, const char *want)
{
    long long v = 12345;
    char err[256] = "";
    int rc = fg_parse_time(s, &v, err, sizeof err);
    if (rc != -1)
        fail_msg("'%s' accepted as %lld", s, v);
    assert_int_equal(v, 12345); /* untouched on error */
    if (!strstr(err, want))
        fail_msg("'%s': error '%s' lacks '%s'", s, err, want);
}

static void test_time_slurm_forms(void **state)
{
    (void)state;
    assert_int_equal(t_ok("90"), 5400); /* minutes */
    assert_int_equal(t_ok("1"), 60);
    assert_int_equal(t_ok("5:30"), 330);   /* MM:SS */
    assert_int_equal(t_ok("90:00"), 5400); /* leading field unbounded */
    assert_int_equal(t_ok("0:30"), 30);
    assert_int_equal(t_ok("1:00:00"), 3600); /* HH:MM:SS */
    assert_int_equal(t_ok("48:00:00"), 172800);
    assert_int_equal(t_ok("01:02:03"), 3723);
    assert_int_equal(t_ok("2-0"), 172800); /* D-HH */
    assert_int_equal(t_ok("1-12"), 129600);
    assert_int_equal(t_ok("1-12:30"), 131400); /* D-HH:MM */
    assert_int_equal(t_ok("1-0:0:1"), 86401);  /* D-HH:MM:SS */
    assert_int_equal(t_ok("2-00:00:00"), 172800);
    assert_int_equal(t_ok("0-0:0:5"), 5);
}

static void test_time_unit_forms(void **state)
{
    (void)state;
    assert_int_equal(t_ok("90s"), 90);
    assert_int_equal(t_ok("30m"), 1800);
    assert_int_equal(t_ok("2h"), 7200);
    assert_int_equal(t_ok("1d"), 86400);
    assert_int_equal(t_ok("2H"), 7200);
    assert_int_equal(t_ok("1h30m"), 5400);
    assert_int_equal(t_ok("1d12h"), 129600);
    assert_int_equal(t_ok("1d1h1m1s"), 90061);
    assert_int_equal(t_ok("0h5m"), 300);
}

static void test_time_limits(void **state)
{
    (void)state;
    assert_int_equal(t_ok("2147483647s"), 2147483647LL);
    assert_int_equal(t_ok("24855d"), 24855LL * 86400);
    t_bad("2147483648s", "too long");
    t_bad("24856d", "too long");
    t_bad("99999999999999999999", "too long");
    t_bad("35791395", "too long"); /* minutes: 2147483700 s */
    t_bad("24856-0", "too long");
    assert_int_equal(t_ok("24855-0"), 24855LL * 86400);
}

static void test_time_rejects(void **state)
{
    (void)state;
    t_bad("", "empty");
    t_bad("abc", "expected a number before 'a'");
    t_bad("1.5h", "invalid time");
    t_bad("1:2:3:4", "too many");
    t_bad("-5", "invalid time");
    t_bad("1-", "invalid time");
    t_bad("1-24", "below 24");
    t_bad("1-1:60", "below 60");
    t_bad("1:60:00", "below 60");
    t_bad("1:00:60", "below 60");
    t_bad("5:60", "below 60");
    t_bad("0", "more than zero");
    t_bad("0:0:0", "more than zero");
    t_bad("0s", "more than zero");
    t_bad("1h2h", "days to seconds");
    t_bad("30m1h", "days to seconds");
    t_bad("1x", "unknown unit");
    t_bad("h", "expected a number");
    t_bad(" 5", "invalid time");
    t_bad("5 ", "invalid time");
    t_bad("1-2-3", "invalid time");
    t_bad("+5", "invalid time");
    t_bad(":", "invalid time");
    t_bad("1::2", "invalid time");
    t_bad("10:", "invalid time");
    t_bad("2h ", "invalid time");
    /* every error explains the accepted forms */
    t_bad("nope", "HH:MM:SS");
    /* a NULL error buffer is allowed */
    long long v;
    assert_int_equal(fg_parse_time("x", &v, NULL, 0), -1);
    assert_int_equal(fg_parse_time(NULL, &v, NULL, 0), -1);
}

static void test_format_duration(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(fg_format_duration(45, b, sizeof b), "45s");
    assert_string_equal(fg_format_duration(725, b, sizeof b), "12m05s");
    assert_string_equal(fg_format_duration(7500, b, sizeof b), "2h05m");
    assert_string_equal(fg_format_duration(3 * 86400 + 4 * 3600 + 5, b, sizeof b), "3d04h");
    assert_string_equal(fg_format_duration(-1, b, sizeof b), "-");
    char small[4];
    assert_string_equal(fg_format_duration(7500, small, sizeof small), "2h0");
}

/* ------------------------------------------------------------ job options -- */

/* Applies argv (NULL-terminated) in dialect d; returns the last rc. */
static int opts(fg_jobspec_t *js, fg_dialect_t d, char *err, size_t errlen, ...)
{
    char *argv[32];
    int argc = 0;
    va_list ap;
    va_start(ap, errlen);
    for (char *a; (a = va_arg(ap, char *));)
        argv[argc++] = a;
    va_end(ap);
    int i = 0, rc = 0;
    while (i < argc) {
        rc = fg_jobspec_option(js, d, argc, argv, &i, err, errlen);
        if (rc <= 0)
            return rc;
    }
    return rc;
}

static void test_options_cli(void **state)
{
    (void)state;
    fg_jobspec_t js;
    char err[256];
    fg_jobspec_init(&js);
    assert_int_equal(opts(&js, FG_DIALECT_CLI, err, sizeof err, "--gpus", "4", "--time=2h",
                          "--model", "llama", "--dataset=c4", "--priority", "LOW", "--name", "ft",
                          "--account", "vision", "--max-retries", "3", "--env", "A=1", "--env",
                          "B=x=y", "--env", "A=2", "--gpu-type", "h100", NULL),
                     1);
    assert_int_equal(js.gpus, 4);
    assert_int_equal(js.time_limit_s, 7200);
    assert_string_equal(js.model, "llama");
    assert_string_equal(js.dataset, "c4");
    assert_string_equal(js.priority, "low");
    assert_string_equal(js.name, "ft");
    assert_string_equal(js.account, "vision");
    assert_int_equal(js.max_retries, 3);
    assert_string_equal(js.gpu_type, "h100");
    assert_int_equal(js.nenv, 2);
    assert_string_equal(js.env[0].key, "A");
    assert_string_equal(js.env[0].val, "2"); /* a later KEY replaces */
    assert_string_equal(js.env[1].val, "x=y");
    assert_true((js.set & (FG_JS_GPUS | FG_JS_TIME | FG_JS_PRIORITY)) ==
                (FG_JS_GPUS | FG_JS_TIME | FG_JS_PRIORITY));
    fg_jobspec_free(&js);

    /* Slurm spellings work on the command line too; short forms glued or apart */
    fg_jobspec_init(&js);
    assert_int_equal(opts(&js, FG_DIALECT_CLI, err, sizeof err, "-G8", "-J", "x", "-t", "90",
                          "--qos=high", "--gpus=a100:2", NULL),
                     1);
    assert_int_equal(js.gpus, 2);
    assert_string_equal(js.gpu_type, "a100");
    assert_string_equal(js.name, "x");
    assert_int_equal(js.time_limit_s, 5400);
    assert_string_equal(js.priority, "high");
    fg_jobspec_free(&js);

    /* not a job option: 0, nothing consumed */
    fg_jobspec_init(&js);
    char *argv[] = {"--json", "python"};
    int i = 0;
    assert_int_equal(fg_jobspec_option(&js, FG_DIALECT_CLI, 2, argv, &i, err, sizeof err), 0);
    assert_int_equal(i, 0);
    i = 1;
    assert_int_equal(fg_jobspec_option(&js, FG_DIALECT_CLI, 2, argv, &i, err, sizeof err), 0);
    assert_int_equal(i, 1);
    /* --gres/--nodes are also Slurm-only spellings accepted everywhere; --partition is not */
    char *argv2[] = {"--partition", "x"};
    i = 0;
    assert_int_equal(fg_jobspec_option(&js, FG_DIALECT_CLI, 2, argv2, &i, err, sizeof err), 0);
    fg_jobspec_free(&js);
}

static void opt_bad(fg_dialect_t d, const char *a, const char *b, const char *want)
{
    fg_jobspec_t js;
    fg_jobspec_init(&js);
    char err[256] = "";
    char *argv[2] = {(char *)a, (char *)b};
    int argc = b ? 2 : 1, i = 0;
    int rc = fg_jobspec_option(&js, d, argc, argv, &i, err, sizeof err);
    if (rc != -1)
        fail_msg("%s %s: rc %d", a, b ? b : "", rc);
    if (!strstr(err, want))
        fail_msg("%s %s: error '%s' lacks '%s'", a, b ? b : "", err, want);
    assert_int_equal(i, 0);
    fg_jobspec_free(&js);
}

static void test_options_rejected(void **state)
{
    (void)state;
    opt_bad(FG_DIALECT_CLI, "--gpus", NULL, "needs a value");
    opt_bad(FG_DIALECT_CLI, "--gpus", "four", "invalid GPU count");
    opt_bad(FG_DIALECT_CLI, "--gpus", "0", "invalid GPU count");
    opt_bad(FG_DIALECT_CLI, "--gpus", "-1", "invalid GPU count");
    opt_bad(FG_DIALECT_CLI, "--gpus", "4x", "invalid GPU count");
    opt_bad(FG_DIALECT_CLI, "--gpus", "", "invalid GPU count");
    opt_bad(FG_DIALECT_CLI, "--gpus", "a:b:2", "invalid GPU type");
    opt_bad(FG_DIALECT_CLI, "--time", "soon", "--time: invalid time 'soon'");
    opt_bad(FG_DIALECT_CLI, "--priority", "urgent", "expected high, normal or low");
    opt_bad(FG_DIALECT_SBATCH, "--qos=debug", NULL, "unknown priority class 'debug'");
    opt_bad(FG_DIALECT_CLI, "--max-retries", "-1", "expected 0 to 1000");
    opt_bad(FG_DIALECT_CLI, "--max-retries", "1e3", "expected 0 to 1000");
    opt_bad(FG_DIALECT_CLI, "--env", "NOEQUALS", "KEY=VALUE");
    opt_bad(FG_DIALECT_CLI, "--env", "1A=x", "KEY=VALUE");
    opt_bad(FG_DIALECT_CLI, "--env", "A-B=x", "KEY=VALUE");
    opt_bad(FG_DIALECT_CLI, "--env", "=x", "KEY=VALUE");
    opt_bad(FG_DIALECT_CLI, "--name", "", "empty");
    opt_bad(FG_DIALECT_CLI, "--name", "a\tb", "control character");
    opt_bad(FG_DIALECT_SBATCH, "--nodes=2-4", NULL, "ranges");
    opt_bad(FG_DIALECT_SBATCH, "--gres=gpu:0", NULL, "invalid GPU count");
    opt_bad(FG_DIALECT_SBATCH, "--gres=mps:100", NULL, "no 'gpu' entry");
    opt_bad(FG_DIALECT_SBATCH, "--gres=gpu:2,gpu:3", NULL, "twice");
    opt_bad(FG_DIALECT_CLI, "--gpus-per-node", "9", "1 to 8");
    /* ignoring these would change what a Slurm script means */
    opt_bad(FG_DIALECT_SBATCH, "--array=1-10", NULL, "arrays and dependencies");
    opt_bad(FG_DIALECT_SBATCH, "-a", "1-10", "arrays and dependencies");
    opt_bad(FG_DIALECT_SBATCH, "-a1-10", NULL, "arrays and dependencies");
    opt_bad(FG_DIALECT_SBATCH, "--dependency", "afterok:12", "arrays and dependencies");
    opt_bad(FG_DIALECT_SBATCH, "-d", "afterok:12", "arrays and dependencies");
    char longname[200];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    opt_bad(FG_DIALECT_CLI, "--name", longname, "too long");
}

static void test_split_words(void **state)
{
    (void)state;
    char *w[8];
    char err[128];
    const char *l = "  --job-name=\"my job\" -t '1:00' --x=\"a\\\"b\" # trailing comment";
    int n = fg_split_words(l, strlen(l), w, 8, err, sizeof err);
    assert_int_equal(n, 4);
    assert_string_equal(w[0], "--job-name=my job");
    assert_string_equal(w[1], "-t");
    assert_string_equal(w[2], "1:00");
    assert_string_equal(w[3], "--x=a\"b");
    for (int k = 0; k < n; k++)
        free(w[k]);
    l = "--name 'unterminated";
    assert_int_equal(fg_split_words(l, strlen(l), w, 8, err, sizeof err), -1);
    assert_non_null(strstr(err, "unterminated"));
    l = "a b c d e f g h i";
    assert_int_equal(fg_split_words(l, strlen(l), w, 8, err, sizeof err), -1);
    assert_non_null(strstr(err, "too many"));
    assert_int_equal(fg_split_words("", 0, w, 8, err, sizeof err), 0);
}

/* ---------------------------------------------------------------- scripts -- */

/* Parses text into js (initialised here); returns rc. */
static int script(fg_jobspec_t *js, const char *text, char *err, size_t errlen)
{
    fg_jobspec_init(js);
    return fg_script_parse(text, strlen(text), js, err, errlen);
}

static long script_gpus(const char *text)
{
    fg_jobspec_t js;
    char err[256];
    if (script(&js, text, err, sizeof err) != 0)
        fail_msg("script rejected: %s", err);
    if (fg_jobspec_finalize(&js, err, sizeof err) != 0)
        fail_msg("script not finalized: %s", err);
    long g = js.gpus;
    fg_jobspec_free(&js);
    return g;
}

static void test_sbatch_gpu_variants(void **state)
{
    (void)state;
    assert_int_equal(script_gpus("#SBATCH --gres=gpu:4\necho\n"), 4);
    assert_int_equal(script_gpus("#SBATCH --gres=gpu\necho\n"), 1);
    assert_int_equal(script_gpus("#SBATCH --gres gpu:2\necho\n"), 2);
    assert_int_equal(script_gpus("#SBATCH --gpus=8\necho\n"), 8);
    assert_int_equal(script_gpus("#SBATCH --gpus 3\necho\n"), 3);
    assert_int_equal(script_gpus("#SBATCH -G 2\necho\n"), 2);
    assert_int_equal(script_gpus("#SBATCH -G2\necho\n"), 2);
    assert_int_equal(script_gpus("#SBATCH --nodes=2 --gres=gpu:8\necho\n"), 16);
    assert_int_equal(script_gpus("#SBATCH -N 3\n#SBATCH --gpus-per-node=8\necho\n"), 24);
    assert_int_equal(script_gpus("#SBATCH --nodes=1\necho\n"), 1);
    assert_int_equal(script_gpus("#SBATCH --nodes=2 --gpus=16\necho\n"), 16);
    assert_int_equal(script_gpus("echo no directives\n"), 1);

    fg_jobspec_t js;
    char err[256];
    assert_int_equal(script(&js, "#SBATCH --gres=gpu:a100:2,mps:50\necho\n", err, sizeof err), 0);
    assert_string_equal(js.gpu_type, "a100");
    assert_int_equal(js.gpus_per_node, 2);
    assert_int_equal(js.nnotes, 1); /* the mps entry is noted */
    fg_jobspec_free(&js);
    assert_int_equal(script(&js, "#SBATCH --gres=gpu:h100\necho\n", err, sizeof err), 0);
    assert_string_equal(js.gpu_type, "h100");
    assert_int_equal(js.gpus_per_node, 1);
    fg_jobspec_free(&js);
    assert_int_equal(script(&js, "#SBATCH --gpus=h100:4\necho\n", err, sizeof err), 0);
    assert_string_equal(js.gpu_type, "h100");
    assert_int_equal(js.gpus, 4);
    fg_jobspec_free(&js);

    /* more nodes than one, no GPU count: a clear error, not a guess */
    assert_int_equal(script(&js, "#SBATCH --nodes=2\necho\n", err, sizeof err), 0);
    assert_int_equal(fg_jobspec_finalize(&js, err, sizeof err), -1);
    assert_non_null(strstr(err, "no GPU count"));
    fg_jobspec_free(&js);
    /* 3 nodes x 4 GPUs = 12: not whole nodes */
    assert_int_equal(script(&js, "#SBATCH -N 3 --gres=gpu:4\necho\n", err, sizeof err), 0);
    assert_int_equal(fg_jobspec_finalize(&js, err, sizeof err), -1);
    assert_non_null(strstr(err, "multiple of 8"));
    fg_jobspec_free(&js);
}

static void test_sbatch_other_options(void **state)
{
    (void)state;
    fg_jobspec_t js;
    char err[256];
    const char *text = "#!/bin/bash\n"
                       "#SBATCH --job-name=\"my run\"\n"
                       "#SBATCH --time=2-00:00:00   # two days\n"
                       "#SBATCH --qos=high\n"
                       "#SBATCH -A vision\n"
                       "#SBATCH --partition=gpu --exclusive\n"
                       "#SBATCH -o out.%j\n"
                       "#SBATCH --mem 64G\n"
                       "python train.py\n";
    assert_int_equal(script(&js, text, err, sizeof err), 0);
    assert_string_equal(js.name, "my run");
    assert_int_equal(js.time_limit_s, 172800);
    assert_string_equal(js.priority, "high");
    assert_string_equal(js.account, "vision");
    assert_int_equal(js.nnotes, 4); /* --partition, --exclusive, -o, --mem 64G */
    assert_non_null(strstr(js.notes[0], "--partition=gpu"));
    assert_non_null(strstr(js.notes[3], "--mem 64G"));
    /* the command is the whole script, run by the #! interpreter */
    assert_int_equal(js.ncommand, 3);
    assert_string_equal(js.command[0], "/bin/bash");
    assert_string_equal(js.command[1], "-c");
    assert_string_equal(js.command[2], text);
    fg_jobspec_free(&js);

    assert_int_equal(script(&js, "#SBATCH -J short -t 45\necho\n", err, sizeof err), 0);
    assert_string_equal(js.name, "short");
    assert_int_equal(js.time_limit_s, 2700);
    fg_jobspec_free(&js);
    assert_int_equal(
        script(&js, "#SBATCH -Jglued\n#SBATCH --job-name other\necho\n", err, sizeof err), 0);
    assert_string_equal(js.name, "other"); /* later line wins within a layer */
    fg_jobspec_free(&js);
}

static void test_script_directive_rules(void **state)
{
    (void)state;
    fg_jobspec_t js;
    char err[256];
    /* directives stop at the first command (Slurm's rule); comments and blanks do not */
    assert_int_equal(script(&js,
                            "#!/bin/sh\n\n# comment\n   \n#SBATCH --gpus=2\necho hi\n"
                            "#SBATCH --gpus=4\n#FAIRGPU --gpus 8\n",
                            err, sizeof err),
                     0);
    assert_int_equal(js.gpus, 2);
    fg_jobspec_free(&js);
    /* not directives: no blank after the tag, indented tag, lower case */
    assert_int_equal(script(&js,
                            "#SBATCHX --gpus=2\n  #SBATCH --gpus=3\n#sbatch --gpus=4\n"
                            "#FAIRGPU\n#FAIRGPU-x\ntrue\n",
                            err, sizeof err),
                     0);
    assert_false(js.set & FG_JS_GPUS);
    fg_jobspec_free(&js);
    /* CRLF line ends */
    assert_int_equal(
        script(&js, "#SBATCH --time=30\r\n#FAIRGPU --model m\r\necho\r\n", err, sizeof err), 0);
    assert_int_equal(js.time_limit_s, 1800);
    assert_string_equal(js.model, "m");
    fg_jobspec_free(&js);
    /* #FAIRGPU overrides #SBATCH whatever the order */
    assert_int_equal(script(&js,
                            "#FAIRGPU --time 2h --priority low\n#SBATCH --time=10 --qos=high\n"
                            "#SBATCH --gres=gpu:8\necho\n",
                            err, sizeof err),
                     0);
    assert_int_equal(js.time_limit_s, 7200);
    assert_string_equal(js.priority, "low");
    assert_int_equal(js.gpus_per_node, 8);
    fg_jobspec_free(&js);
    /* no #! line: /bin/sh; a #! with one argument keeps it as one word */
    assert_int_equal(script(&js, "echo hi\n", err, sizeof err), 0);
    assert_string_equal(js.command[0], "/bin/sh");
    assert_string_equal(js.command[1], "-c");
    fg_jobspec_free(&js);
    assert_int_equal(script(&js, "#!/usr/bin/env python3 -u \r\nprint(1)\n", err, sizeof err), 0);
    assert_int_equal(js.ncommand, 4);
    assert_string_equal(js.command[0], "/usr/bin/env");
    assert_string_equal(js.command[1], "python3 -u");
    assert_string_equal(js.command[2], "-c");
    fg_jobspec_free(&js);
}

static void script_bad(const char *text, size_t len, const char *want)
{
    fg_jobspec_t js;
    fg_jobspec_init(&js);
    char err[256] = "";
    int rc = fg_script_parse(text, len, &js, err, sizeof err);
    if (rc != -1)
        fail_msg("script accepted; wanted '%s'", want);
    if (!strstr(err, want))
        fail_msg("error '%s' lacks '%s'", err, want);
    fg_jobspec_free(&js);
}

static void test_script_rejects(void **state)
{
    (void)state;
#define BAD(t, w) script_bad(t, strlen(t), w)
    BAD("#!/bin/sh\n#FAIRGPU --gpus 2 --bogus\n", "line 2: unknown option '--bogus'");
    BAD("#FAIRGPU --gpus\n", "line 1: --gpus needs a value");
    BAD("#FAIRGPU gpus=2\n", "unexpected word 'gpus=2'");
    BAD("\n\n#SBATCH --time=1:2:3:4\n", "line 3: --time: invalid time");
    BAD("#SBATCH --qos=premium\n", "line 1: --qos: unknown priority class 'premium'");
    BAD("#SBATCH --job-name='open\n", "line 1: unterminated ' quote");
    BAD("#FAIRGPU --model ''\n", "empty");
#undef BAD
    script_bad("#!/bin/sh\n\0\x01", 12, "NUL");
    size_t big = FG_SCRIPT_MAX_BYTES + 1;
    char *text = malloc(big);
    memset(text, 'a', big);
    script_bad(text, big, "too large");
    free(text);
    char line[FG_SCRIPT_MAX_LINE + 100];
    memset(line, 'x', sizeof line);
    memcpy(line, "#SBATCH ", 8);
    script_bad(line, sizeof line, "too long");
}

static void test_looks_like_script(void **state)
{
    (void)state;
    assert_true(fg_script_looks_like("#!/bin/sh\n", 10));
    assert_true(fg_script_looks_like("echo\n#SBATCH --gpus=1\n", 22));
    assert_true(fg_script_looks_like("#FAIRGPU --gpus 1", 17));
    assert_false(fg_script_looks_like("echo hi\n", 8));
    assert_false(fg_script_looks_like("\x7f"
                                      "ELF",
                                      4));
    assert_false(fg_script_looks_like("", 0));
}

/* ---------------------------------------------------------- layered specs -- */

static void test_flags_override_script(void **state)
{
    (void)state;
    fg_jobspec_t job, cli;
    char err[256];
    assert_int_equal(script(&job,
                            "#SBATCH --gres=gpu:4 --time=1:00:00 -J from-script\n"
                            "#FAIRGPU --model m1 --env A=script --env B=script\n"
                            "run\n",
                            err, sizeof err),
                     0);
    fg_jobspec_init(&cli);
    assert_int_equal(opts(&cli, FG_DIALECT_CLI, err, sizeof err, "--time", "2h", "--env", "A=cli",
                          "--name", "from-cli", NULL),
                     1);
    fg_jobspec_overlay(&job, &cli);
    assert_int_equal(fg_jobspec_finalize(&job, err, sizeof err), 0);
    assert_int_equal(job.gpus, 4);            /* from the script */
    assert_int_equal(job.time_limit_s, 7200); /* the flag wins */
    assert_string_equal(job.name, "from-cli");
    assert_string_equal(job.model, "m1");
    assert_int_equal(job.nenv, 2);
    assert_string_equal(job.env[0].val, "cli");
    assert_string_equal(job.env[1].val, "script");
    assert_string_equal(job.command[0], "/bin/sh"); /* the flags gave no command */
    fg_jobspec_free(&cli);

    /* a total GPU count on the command line replaces the script's per-node counts... */
    fg_jobspec_init(&cli);
    assert_int_equal(opts(&cli, FG_DIALECT_CLI, err, sizeof err, "--gpus", "2", NULL), 1);
    fg_jobspec_t copy;
    fg_jobspec_init(&copy);
    fg_jobspec_overlay(&copy, &job);
    fg_jobspec_overlay(&copy, &cli);
    assert_int_equal(fg_jobspec_finalize(&copy, err, sizeof err), 0);
    assert_int_equal(copy.gpus, 2);
    fg_jobspec_free(&copy);
    fg_jobspec_free(&cli);
    fg_jobspec_free(&job);

    /* ...and per-node counts on the command line replace a script's total */
    assert_int_equal(script(&job, "#FAIRGPU --gpus 4\nrun\n", err, sizeof err), 0);
    fg_jobspec_init(&cli);
    assert_int_equal(
        opts(&cli, FG_DIALECT_CLI, err, sizeof err, "--nodes", "2", "--gres", "gpu:8", NULL), 1);
    fg_jobspec_overlay(&job, &cli);
    assert_int_equal(fg_jobspec_finalize(&job, err, sizeof err), 0);
    assert_int_equal(job.gpus, 16);
    fg_jobspec_free(&cli);
    fg_jobspec_free(&job);
}

static void test_finalize_and_json(void **state)
{
    (void)state;
    fg_jobspec_t js;
    char err[256];
    fg_jobspec_init(&js);
    assert_int_equal(fg_jobspec_finalize(&js, err, sizeof err), -1);
    assert_non_null(strstr(err, "nothing to run"));
    char *cmd[] = {"python", "train.py"};
    fg_jobspec_set_command(&js, 2, cmd);
    assert_int_equal(fg_jobspec_finalize(&js, err, sizeof err), 0);
    assert_int_equal(js.gpus, 1); /* default */
    json_t *o = fg_jobspec_to_json(&js);
    assert_int_equal(json_object_size(o), 2); /* only command and gpus */
    assert_string_equal(json_string_value(json_array_get(json_object_get(o, "command"), 1)),
                        "train.py");
    json_decref(o);
    fg_jobspec_free(&js);

    static const long bad[] = {9, 12, 15, 17};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        fg_jobspec_init(&js);
        fg_jobspec_set_command(&js, 1, cmd);
        js.gpus = bad[k];
        js.set |= FG_JS_GPUS;
        assert_int_equal(fg_jobspec_finalize(&js, err, sizeof err), -1);
        assert_non_null(strstr(err, "multiple of 8"));
        fg_jobspec_free(&js);
    }

    fg_jobspec_init(&js);
    assert_int_equal(opts(&js, FG_DIALECT_CLI, err, sizeof err, "--gpus", "16", "--time", "1d",
                          "--priority", "normal", "--max-retries", "0", "--env", "K=V", "--model",
                          "m", "--dataset", "d", "--account", "a", "--gpu-type", "h100", "--name",
                          "n", NULL),
                     1);
    fg_jobspec_set_command(&js, 1, cmd);
    assert_int_equal(fg_jobspec_finalize(&js, err, sizeof err), 0);
    o = fg_jobspec_to_json(&js);
    char *s = json_dumps(o, JSON_SORT_KEYS | JSON_COMPACT);
    assert_string_equal(s, "{\"account\":\"a\",\"command\":[\"python\"],\"dataset\":\"d\","
                           "\"env\":{\"K\":\"V\"},\"gpu_type\":\"h100\",\"gpus\":16,"
                           "\"max_retries\":0,\"model\":\"m\",\"name\":\"n\","
                           "\"priority\":\"normal\",\"time_limit_s\":86400}");
    free(s);
    json_decref(o);
    fg_jobspec_free(&js);
}

/* -------------------------------------------------------------------- SSE -- */

typedef struct {
    char types[8][32];
    char data[8][128];
    char ids[8][32];
    int n;
    int stop_after;
} sse_log_t;

static int on_sse(void *ud, const char *type, const char *data, size_t len, const char *id)
{
    sse_log_t *l = ud;
    assert_int_equal(strlen(data), len);
    if (l->n < 8) {
        snprintf(l->types[l->n], 32, "%s", type);
        snprintf(l->data[l->n], 128, "%s", data);
        snprintf(l->ids[l->n], 32, "%s", id);
    }
    l->n++;
    return l->stop_after && l->n >= l->stop_after;
}

static void test_sse(void **state)
{
    (void)state;
    const char *stream = ": keep-alive\n\n"
                         "id: 10\ndata: hello\ndata:  world\n\n"
                         "event: end\r\ndata\r\n\r\n"
                         "data: no id line\r\rretry: 5\nfoo: bar\ndata: {\"a\":1}\n\n"
                         "data: pending";
    /* fed whole, and byte by byte: the same events */
    for (int mode = 0; mode < 2; mode++) {
        sse_log_t l = {0};
        fg_sse_t p;
        fg_sse_init(&p, on_sse, &l);
        if (mode == 0)
            assert_int_equal(fg_sse_feed(&p, stream, strlen(stream)), 0);
        else
            for (size_t k = 0; stream[k]; k++)
                assert_int_equal(fg_sse_feed(&p, stream + k, 1), 0);
        assert_int_equal(l.n, 4);
        assert_string_equal(l.types[0], "message");
        assert_string_equal(l.data[0], "hello\n world"); /* one space dropped, not two */
        assert_string_equal(l.ids[0], "10");
        assert_string_equal(l.types[1], "end");
        assert_string_equal(l.data[1], "");
        assert_string_equal(l.ids[1], "10"); /* the last id persists */
        assert_string_equal(l.data[2], "no id line");
        assert_string_equal(l.types[2], "message");
        assert_string_equal(l.data[3], "{\"a\":1}");
        fg_sse_free(&p);
    }
    /* a callback can stop the stream */
    sse_log_t l = {.stop_after = 1};
    fg_sse_t p;
    fg_sse_init(&p, on_sse, &l);
    assert_int_equal(fg_sse_feed(&p, "data: a\n\ndata: b\n\n", 18), 1);
    assert_int_equal(l.n, 1);
    fg_sse_free(&p);
    /* a line over the limit fails instead of growing without bound */
    memset(&l, 0, sizeof l);
    fg_sse_init(&p, on_sse, &l);
    char *big = malloc(FG_SSE_MAX_LINE + 2);
    memset(big, 'x', FG_SSE_MAX_LINE + 2);
    assert_int_equal(fg_sse_feed(&p, big, FG_SSE_MAX_LINE + 2), -1);
    free(big);
    fg_sse_free(&p);
    /* trailing empty data line keeps a final newline (exact log bytes) */
    memset(&l, 0, sizeof l);
    fg_sse_init(&p, on_sse, &l);
    assert_int_equal(fg_sse_feed(&p, "data: a\ndata: \n\n", 16), 0);
    assert_string_equal(l.data[0], "a\n");
    fg_sse_free(&p);
}

static void test_sse_log_newline(void **state)
{
    (void)state;
    long long next;
    /* "a\nb\n" sent as data "a\nb" with id 4: the final newline comes back */
    assert_int_equal(fg_sse_log_newline(0, "4", "a\nb", 3, &next), 1);
    assert_int_equal(next, 4);
    /* "partial" (no newline) with id 11: none added */
    assert_int_equal(fg_sse_log_newline(4, "11", "partial", 7, &next), 0);
    assert_int_equal(next, 11);
    /* an empty line: "\n" is data "" and one byte */
    assert_int_equal(fg_sse_log_newline(11, "12", "", 0, &next), 1);
    /* offsets that do not fit (rank prefixes, a server without ids): by the data */
    assert_int_equal(fg_sse_log_newline(0, "100", "x", 1, &next), 1);
    assert_int_equal(fg_sse_log_newline(-1, "5", "x\n", 2, &next), 0);
    assert_int_equal(fg_sse_log_newline(3, "", "x", 1, &next), 1);
    assert_int_equal(next, -1);
    assert_int_equal(fg_sse_log_newline(3, "abc", "x", 1, &next), 1);
    assert_int_equal(next, -1);
    assert_int_equal(fg_sse_log_newline(3, "-4", "x", 1, &next), 1);
    assert_int_equal(next, -1);
    assert_int_equal(fg_sse_log_newline(3, "99999999999999999999999", "x", 1, &next), 1);
    assert_int_equal(next, -1);
}

/* ------------------------------------------------------------------ table -- */

__attribute__((noinline)) static char *render(fg_table_t *t)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fg_table_print(t, f);
    fclose(f);
    return buf;
}

static void test_table(void **state)
{
    (void)state;
    fg_table_t t;
    fg_table_init(&t, 3, "ID", "STATE", "REASON");
    fg_table_row(&t, "j1", "PENDING", "waiting for 8 GPUs");
    fg_table_row(&t, "j10", NULL, "bad\x1b[2Jname");
    char *s = render(&t);
    assert_string_equal(s, "ID   STATE    REASON\n"
                           "j1   PENDING  waiting for 8 GPUs\n"
                           "j10  -        bad?[2Jname\n");
    free(s);
    fg_table_free(&t);

    char longv[200];
    memset(longv, 'v', sizeof longv - 1);
    longv[sizeof longv - 1] = '\0';
    const char *heads[] = {"A", "B"};
    fg_table_initv(&t, 2, heads);
    const char *row[] = {longv, "é"};
    fg_table_rowv(&t, row);
    s = render(&t);
    char *nl = strchr(s, '\n');
    assert_non_null(nl);
    /* the cut cell is FG_TABLE_MAX_CELL wide, ending in "..." */
    const char *r = nl + 1;
    assert_memory_equal(r + FG_TABLE_MAX_CELL - 3, "...", 3);
    assert_string_equal(r + FG_TABLE_MAX_CELL, "  é\n");
    free(s);
    fg_table_free(&t);
}

/* ----------------------------------------------------------------- config -- */

static char tmpdir[256];

static void rm_rf(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_config(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/fg_cli_test.XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    char xdg[400], path[500];
    snprintf(xdg, sizeof xdg, "%s/xdg", tmpdir);
    setenv("HOME", tmpdir, 1);
    unsetenv("XDG_CONFIG_HOME");
    unsetenv("FAIRGPU_URL");
    unsetenv("FAIRGPU_TOKEN");
    char *p = fg_cli_config_path();
    snprintf(path, sizeof path, "%s/.config/fairgpu/config.json", tmpdir);
    assert_string_equal(p, path);
    free(p);
    setenv("XDG_CONFIG_HOME", "relative/ignored", 1);
    p = fg_cli_config_path();
    assert_string_equal(p, path);
    free(p);
    setenv("XDG_CONFIG_HOME", xdg, 1);
    p = fg_cli_config_path();
    snprintf(path, sizeof path, "%s/fairgpu/config.json", xdg);
    assert_string_equal(p, path);
    free(p);

    /* nothing saved: defaults */
    fg_cli_config_t cfg;
    assert_int_equal(fg_cli_config_load(&cfg), 0);
    assert_string_equal(cfg.url, FG_DEFAULT_URL);
    assert_null(cfg.token);
    fg_cli_config_free(&cfg);

    /* saved: mode 0600 in a 0700 directory, read back */
    assert_int_equal(fg_cli_config_save("http://h:1", "tok123", "ann"), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    char dir[500];
    snprintf(dir, sizeof dir, "%s/fairgpu", xdg);
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(fg_cli_config_load(&cfg), 0);
    assert_string_equal(cfg.url, "http://h:1");
    assert_string_equal(cfg.token, "tok123");
    assert_string_equal(cfg.username, "ann");
    assert_false(cfg.token_from_env);
    fg_cli_config_free(&cfg);

    /* the environment wins; trailing slashes go */
    setenv("FAIRGPU_URL", "http://other:2///", 1);
    setenv("FAIRGPU_TOKEN", "envtok", 1);
    assert_int_equal(fg_cli_config_load(&cfg), 0);
    assert_string_equal(cfg.url, "http://other:2");
    assert_string_equal(cfg.token, "envtok");
    assert_true(cfg.token_from_env && cfg.url_from_env);
    fg_cli_config_free(&cfg);
    unsetenv("FAIRGPU_URL");
    unsetenv("FAIRGPU_TOKEN");

    /* a corrupt file is an error, not silently ignored */
    FILE *f = fopen(path, "w");
    fputs("{not json", f);
    fclose(f);
    assert_int_equal(fg_cli_config_load(&cfg), -1);
    fg_cli_config_free(&cfg);
    rm_rf(tmpdir);
}

/* ------------------------------------------------- the command end to end -- */

/* Runs fg_cmd_client with argv, capturing stdout into out (malloc'd). */
static int run_cli(char **out, int argc, char **argv)
{
    fflush(stdout);
    char tmpl[] = "/tmp/fg_cli_out.XXXXXX";
    int fd = mkstemp(tmpl);
    assert_true(fd >= 0);
    int saved = dup(STDOUT_FILENO);
    dup2(fd, STDOUT_FILENO);
    int rc = fg_cmd_client(argc, argv);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    off_t len = lseek(fd, 0, SEEK_END);
    *out = calloc(1, (size_t)len + 1);
    assert_int_equal(pread(fd, *out, (size_t)len, 0), len);
    close(fd);
    unlink(tmpl);
    return rc;
}

static void test_submit_dry_run(void **state)
{
    (void)state;
    char dir[] = "/tmp/fg_cli_sub.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[200];
    snprintf(path, sizeof path, "%s/train.sbatch", dir);
    FILE *f = fopen(path, "w");
    fputs("#!/bin/bash\n#SBATCH --gres=gpu:8\n#SBATCH -N 2\n#SBATCH --time=1-00:00:00\n"
          "#SBATCH --qos=low\n#FAIRGPU --model llama\ntorchrun train.py\n",
          f);
    fclose(f);

    char *out;
    char *a1[] = {"submit", "--dry-run", "--time", "30m", "--priority", "high", path, "x", NULL};
    assert_int_equal(run_cli(&out, 8, a1), 0);
    json_t *o = json_loads(out, 0, NULL);
    assert_non_null(o);
    assert_int_equal(json_integer_value(json_object_get(o, "gpus")), 16);
    assert_int_equal(json_integer_value(json_object_get(o, "time_limit_s")), 1800);
    assert_string_equal(json_string_value(json_object_get(o, "priority")), "high");
    assert_string_equal(json_string_value(json_object_get(o, "model")), "llama");
    assert_string_equal(json_string_value(json_object_get(o, "name")), "train.sbatch");
    json_t *cmd = json_object_get(o, "command");
    assert_int_equal(json_array_size(cmd), 5); /* bash -c TEXT $0 $1 */
    assert_string_equal(json_string_value(json_array_get(cmd, 0)), "/bin/bash");
    assert_non_null(strstr(json_string_value(json_array_get(cmd, 2)), "torchrun train.py"));
    assert_string_equal(json_string_value(json_array_get(cmd, 4)), "x");
    json_decref(o);
    free(out);

    /* after "--" even an existing script path is just a command */
    char *a2[] = {"submit", "--dry-run", "--", path, NULL};
    assert_int_equal(run_cli(&out, 4, a2), 0);
    o = json_loads(out, 0, NULL);
    assert_int_equal(json_integer_value(json_object_get(o, "gpus")), 1);
    assert_string_equal(json_string_value(json_array_get(json_object_get(o, "command"), 0)), path);
    json_decref(o);
    free(out);

    /* usage errors exit 2 and print nothing on stdout */
    char *bad1[] = {"submit", "--dry-run", "--gpus", "9", "true", NULL};
    assert_int_equal(run_cli(&out, 5, bad1), 2);
    assert_string_equal(out, "");
    free(out);
    char *bad2[] = {"submit", "--dry-run", NULL};
    assert_int_equal(run_cli(&out, 2, bad2), 2);
    free(out);
    char *bad3[] = {"submit", "--frobnicate", "true", NULL};
    assert_int_equal(run_cli(&out, 3, bad3), 2);
    free(out);
    f = fopen(path, "w");
    fputs("#!/bin/sh\n#SBATCH --time=forever\ntrue\n", f);
    fclose(f);
    char *bad4[] = {"submit", "--dry-run", path, NULL};
    assert_int_equal(run_cli(&out, 3, bad4), 2);
    free(out);
    char *bad5[] = {"jobs", "--limit", "0", NULL};
    assert_int_equal(run_cli(&out, 3, bad5), 2);
    free(out);
    char *bad6[] = {"account", "frob", NULL};
    assert_int_equal(run_cli(&out, 2, bad6), 2);
    free(out);
    /* not a client command */
    char *other[] = {"server", NULL};
    assert_int_equal(fg_cmd_client(1, other), -1);
    rm_rf(dir);
}

/* Subcommands: help and usage errors come before any request, in the order each
 * command reads them (token, node-token and account read their options first). */
static void test_subcommand_usage(void **state)
{
    (void)state;
    static const struct {
        const char *argv[5];
        int rc;
        const char *out; /* what stdout starts with */
    } cases[] = {
        {{"token", "--help"}, 0, "usage: fairgpu token create"},
        {{"token"}, 2, ""},
        {{"token", "frob", "--help"}, 0, "usage: fairgpu token create"},
        {{"token", "frob"}, 2, ""},
        {{"token", "create"}, 2, ""},
        {{"node-token", "frob"}, 2, ""},
        {{"node-token", "revoke", "--help"}, 0, "usage: fairgpu node-token"},
        {{"user", "frob", "--help"}, 2, ""},
        {{"user", "list", "--help"}, 0, "usage: fairgpu user list"},
        {{"user", "set", "7"}, 2, ""},
        {{"account", "frob", "--help"}, 0, "usage: fairgpu account list"},
        {{"account", "list", "extra"}, 2, ""},
        {{"account", "set", "a"}, 2, ""},
        {{"account", "remove-member", "a", "u", "--weight=2"}, 2, ""},
        {{"account", "create", "a", "--priorities=high,bogus"}, 2, ""},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char *argv[6] = {0};
        int argc = 0;
        char buf[5][64];
        for (; argc < 5 && cases[k].argv[argc]; argc++) {
            snprintf(buf[argc], sizeof buf[argc], "%s", cases[k].argv[argc]);
            argv[argc] = buf[argc];
        }
        char *out;
        int rc = run_cli(&out, argc, argv);
        if (rc != cases[k].rc || strncmp(out, cases[k].out, strlen(cases[k].out)))
            fail_msg("case %zu (%s %s): rc %d, stdout '%.60s'", k, argv[0], argv[1] ? argv[1] : "",
                     rc, out);
        free(out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_time_slurm_forms),
        cmocka_unit_test(test_time_unit_forms),
        cmocka_unit_test(test_time_limits),
        cmocka_unit_test(test_time_rejects),
        cmocka_unit_test(test_format_duration),
        cmocka_unit_test(test_options_cli),
        cmocka_unit_test(test_options_rejected),
        cmocka_unit_test(test_split_words),
        cmocka_unit_test(test_sbatch_gpu_variants),
        cmocka_unit_test(test_sbatch_other_options),
        cmocka_unit_test(test_script_directive_rules),
        cmocka_unit_test(test_script_rejects),
        cmocka_unit_test(test_looks_like_script),
        cmocka_unit_test(test_flags_override_script),
        cmocka_unit_test(test_finalize_and_json),
        cmocka_unit_test(test_sse),
        cmocka_unit_test(test_sse_log_newline),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_submit_dry_run),
        cmocka_unit_test(test_subcommand_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
