/*
 * script.h - job specifications from submit flags, #FAIRGPU lines and #SBATCH lines.
 *
 * A job spec is built in layers: #SBATCH lines of a script, then its #FAIRGPU lines,
 * then the command line; each later layer overrides the fields it sets. The same option
 * table reads all three, so `#FAIRGPU --gpus 8` and `fairgpu submit --gpus 8` mean the
 * same. Pure: no I/O, no globals; every input is bounded (see the FG_SCRIPT_* limits).
 */
#ifndef FG_CLI_SCRIPT_H
#define FG_CLI_SCRIPT_H

#include <jansson.h>
#include <stddef.h>

#define FG_SCRIPT_MAX_BYTES  (512 * 1024) /* a script larger than this is refused */
#define FG_SCRIPT_MAX_LINE   4096         /* a directive line longer than this is refused */
#define FG_SCRIPT_MAX_TOKENS 64           /* words on one directive line */
#define FG_JOB_MAX_ENV       256          /* --env entries */
#define FG_JOB_MAX_NAME      128          /* bytes of --name (the contract's limit) */
#define FG_JOB_MAX_STR       256          /* bytes of model, dataset, account, gpu type */

/* Which fields a layer sets (fg_jobspec_t.set). */
enum {
    FG_JS_NAME = 1u << 0,
    FG_JS_GPUS = 1u << 1, /* total GPUs, from --gpus N */
    FG_JS_GPU_TYPE = 1u << 2,
    FG_JS_MODEL = 1u << 3,
    FG_JS_DATASET = 1u << 4,
    FG_JS_TIME = 1u << 5,
    FG_JS_PRIORITY = 1u << 6,
    FG_JS_MAX_RETRIES = 1u << 7,
    FG_JS_ACCOUNT = 1u << 8,
    FG_JS_NODES = 1u << 9,         /* Slurm --nodes / -N */
    FG_JS_GPUS_PER_NODE = 1u << 10 /* Slurm --gres=gpu:N / --gpus-per-node */
};

/* Where options come from: decides which options exist and what unknown ones do. */
typedef enum {
    FG_DIALECT_CLI,     /* submit's command line: unknown options are the caller's */
    FG_DIALECT_FAIRGPU, /* #FAIRGPU lines: unknown options are errors */
    FG_DIALECT_SBATCH   /* #SBATCH lines: Slurm's names; unknown ones are ignored (noted) */
} fg_dialect_t;

typedef struct {
    char *key;
    char *val;
} fg_env_kv_t;

/* One layer of a job specification. Strings are owned (fg_jobspec_free frees them). */
typedef struct {
    unsigned set; /* FG_JS_* bits of the scalar fields given */
    char *name;
    long gpus;
    char *gpu_type;
    char *model;
    char *dataset;
    long long time_limit_s;
    const char *priority; /* "high", "normal" or "low" (static strings) */
    long max_retries;
    char *account;
    long nodes;
    long gpus_per_node;
    fg_env_kv_t *env; /* --env K=V; a later K replaces an earlier one */
    size_t nenv, env_cap;
    char **command; /* argv of what runs; NULL when not given */
    size_t ncommand;
    char **notes; /* human notes, e.g. ignored #SBATCH options */
    size_t nnotes, notes_cap;
} fg_jobspec_t;

void fg_jobspec_init(fg_jobspec_t *js);
void fg_jobspec_free(fg_jobspec_t *js);

/*
 * Tries to read one job option at argv[*i] (in "--opt VALUE", "--opt=VALUE", "-X VALUE"
 * or "-XVALUE" form). Returns 1 when it was one (and advances *i past it and its value),
 * 0 when argv[*i] is not a job option of this dialect (nothing changes; in the SBATCH
 * dialect unknown options are instead skipped with a note and 1 is returned), or -1
 * with a sentence in err when the option is known but its value is bad or missing.
 */
int fg_jobspec_option(fg_jobspec_t *js, fg_dialect_t dialect, int argc, char *const *argv, int *i,
                      char *err, size_t errlen);

/*
 * Splits one directive line (the text after "#FAIRGPU" or "#SBATCH") into words the
 * way a shell would for simple cases: blanks separate, '...' and "..." quote (with \"
 * and \\ inside double quotes), an unquoted word starting with '#' ends the line.
 * Returns the word count (words are malloc'd into words[], caller frees each), or -1
 * with err on an unterminated quote, too many words or too long a line.
 */
int fg_split_words(const char *line, size_t len, char **words, int max_words, char *err,
                   size_t errlen);

/*
 * Reads a job script of len bytes (need not be NUL-terminated). Directives are the
 * lines starting with "#FAIRGPU" or "#SBATCH" followed by a blank, before the first
 * line that is neither blank nor a comment (Slurm's rule). #FAIRGPU lines override
 * #SBATCH lines whatever their order. The command becomes [interpreter..., "-c",
 * script text] where the interpreter is the "#!" line's (program and at most one
 * argument, as the kernel reads it) or /bin/sh. Fills js (initialised by the caller)
 * and returns 0, or -1 with err naming the line ("line 3: ...").
 */
int fg_script_parse(const char *text, size_t len, fg_jobspec_t *js, char *err, size_t errlen);

/* Says whether text looks like a job script (starts with "#!" or has a directive). */
int fg_script_looks_like(const char *text, size_t len);

/* Copies every field src sets onto dst (env entries are merged by key; a command and
 * notes are appended/replaced). */
void fg_jobspec_overlay(fg_jobspec_t *dst, const fg_jobspec_t *src);

/* Sets the command to a copy of argv[0..argc-1] (replacing any). */
void fg_jobspec_set_command(fg_jobspec_t *js, int argc, char *const *argv);
/* Appends copies of argv[0..argc-1] to the command. */
void fg_jobspec_append_command(fg_jobspec_t *js, int argc, char *const *argv);

/*
 * Resolves Slurm's per-node GPU counts (gpus = nodes x gpus per node when --gpus is not
 * given), defaults gpus to 1, and checks the whole spec: a command, 1-8 GPUs or a
 * multiple of 8. Returns 0, or -1 with err.
 */
int fg_jobspec_finalize(fg_jobspec_t *js, char *err, size_t errlen);

/* The POST /v1/jobs body for a finalized spec (new reference). */
json_t *fg_jobspec_to_json(const fg_jobspec_t *js);

#endif
