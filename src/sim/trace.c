/*
 * trace.c - the job-trace CSV reader (see trace.h for the format and its limits).
 *
 * The whole file is read into memory (bounded), then walked line by line. Each line is
 * split into fields in a scratch buffer (quotes removed), the header picks the column
 * indices, and each row is checked field by field: integers with fg_parse_int64 (no
 * atoi), names for length and printable bytes. Tenant names are interned in a small
 * open-addressing hash table, so a job carries a tenant index.
 */
#include "sim/trace.h"

#include "common/xalloc.h"
#include "fairgpu/core.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIELDS 256

int fg_parse_int64(const char *s, size_t n, int64_t lo, int64_t hi, int64_t *v)
{
    if (n == 0 || n > 20)
        return -1;
    char buf[24];
    memcpy(buf, s, n);
    buf[n] = '\0';
    size_t i = buf[0] == '-' ? 1 : 0;
    if (i == n)
        return -1;
    for (size_t k = i; k < n; k++)
        if (buf[k] < '0' || buf[k] > '9')
            return -1;
    errno = 0;
    char *end = NULL;
    long long x = strtoll(buf, &end, 10);
    if (errno == ERANGE || end != buf + n || x < lo || x > hi)
        return -1;
    *v = (int64_t)x;
    return 0;
}

/* ------------------------------------------------------------------ tenant table */

typedef struct tenant_tab {
    int32_t *slots;   /* tenant index + 1, 0 = empty */
    size_t cap;       /* power of two */
    size_t names_cap; /* capacity of fg_trace_t.tenants */
} tenant_tab_t;

static uint64_t hash_name(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* Returns the index of tenant name s[0..n), adding it to t if new. */
static int32_t intern(fg_trace_t *t, tenant_tab_t *tab, const char *s, size_t n)
{
    if ((t->ntenants + 1) * 2 > tab->cap) {
        size_t ncap = tab->cap ? tab->cap * 2 : 64;
        int32_t *ns = fg_xcalloc(ncap, sizeof *ns);
        for (size_t i = 0; i < t->ntenants; i++) {
            const char *nm = t->tenants[i];
            size_t j = hash_name(nm, strlen(nm)) & (ncap - 1);
            while (ns[j])
                j = (j + 1) & (ncap - 1);
            ns[j] = (int32_t)i + 1;
        }
        free(tab->slots);
        tab->slots = ns;
        tab->cap = ncap;
    }
    size_t j = hash_name(s, n) & (tab->cap - 1);
    while (tab->slots[j]) {
        const char *nm = t->tenants[tab->slots[j] - 1];
        if (strlen(nm) == n && memcmp(nm, s, n) == 0)
            return tab->slots[j] - 1;
        j = (j + 1) & (tab->cap - 1);
    }
    t->tenants = fg_xgrow(t->tenants, &tab->names_cap, t->ntenants + 1, sizeof *t->tenants);
    char *copy = fg_xmalloc(n + 1);
    memcpy(copy, s, n);
    copy[n] = '\0';
    t->tenants[t->ntenants] = copy;
    tab->slots[j] = (int32_t)t->ntenants + 1;
    return (int32_t)t->ntenants++;
}

/* ------------------------------------------------------------------ line splitting */

typedef struct fields {
    int n;
    const char *p[MAX_FIELDS];
    size_t len[MAX_FIELDS];
    char scratch[FG_TRACE_LINE_MAX + 1];
} fields_t;

/* Splits line[0..n) into fields (RFC 4180 quoting within one line). Returns NULL or a
 * static message on error. */
static const char *split(const char *line, size_t n, fields_t *f)
{
    size_t i = 0, o = 0;
    f->n = 0;
    for (;;) {
        if (f->n == MAX_FIELDS)
            return "too many fields";
        const char *start = f->scratch + o;
        size_t flen = 0;
        if (i < n && line[i] == '"') {
            i++;
            for (;;) {
                if (i >= n)
                    return "unterminated quoted field";
                if (line[i] == '"') {
                    if (i + 1 < n && line[i + 1] == '"') {
                        f->scratch[o++] = '"';
                        flen++;
                        i += 2;
                        continue;
                    }
                    i++;
                    break;
                }
                f->scratch[o++] = line[i++];
                flen++;
            }
            if (i < n && line[i] != ',')
                return "text after a closing quote";
        } else {
            while (i < n && line[i] != ',') {
                if (line[i] == '"')
                    return "quote inside an unquoted field";
                f->scratch[o++] = line[i++];
                flen++;
            }
        }
        f->p[f->n] = start;
        f->len[f->n] = flen;
        f->n++;
        if (i >= n)
            return NULL;
        i++; /* the comma */
    }
}

static const char *check_name(const char *s, size_t n)
{
    if (n == 0)
        return "is empty";
    if (n > FG_TRACE_TENANT_MAX)
        return "is longer than 63 bytes";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c == 0x7f)
            return "contains a space or control character";
    }
    return NULL;
}

static void seterr(char *err, size_t errlen, const char *name, int64_t line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void seterr(char *err, size_t errlen, const char *name, int64_t line, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(err, errlen, "%s:%lld: %s", name, (long long)line, msg);
}

static int cmp_job(const void *a, const void *b)
{
    const fg_trace_job_t *x = a, *y = b;
    if (x->submit != y->submit)
        return x->submit < y->submit ? -1 : 1;
    return (x->line > y->line) - (x->line < y->line);
}

enum { COL_ID, COL_USER, COL_SUBMIT, COL_GPUS, COL_DUR, COL_ACCOUNT, NCOLS };
static const char *const col_names[NCOLS] = {"job_id",   "user",       "submit_time_s",
                                             "num_gpus", "duration_s", "account"};

/* Parses one data row into *job. Returns NULL or a message in msg. */
static const char *parse_row(fg_trace_t *t, tenant_tab_t *tab, const fields_t *f, const int *col,
                             int ncols, fg_trace_job_t *job, int *rounded, char *msg, size_t mlen)
{
    if (f->n != ncols) {
        snprintf(msg, mlen, "expected %d fields, got %d", ncols, f->n);
        return msg;
    }
    int64_t v;
    if (fg_parse_int64(f->p[col[COL_SUBMIT]], f->len[col[COL_SUBMIT]], 0, FG_TRACE_TIME_MAX, &v)) {
        snprintf(msg, mlen, "submit_time_s is not an integer in [0, %lld]",
                 (long long)FG_TRACE_TIME_MAX);
        return msg;
    }
    job->submit = v;
    if (fg_parse_int64(f->p[col[COL_GPUS]], f->len[col[COL_GPUS]], 1, FG_MAX_JOB_GPUS, &v)) {
        snprintf(msg, mlen, "num_gpus is not an integer in [1, %d]", FG_MAX_JOB_GPUS);
        return msg;
    }
    *rounded = 0;
    if (v > FG_WHOLE_NODE_GPUS && v % FG_WHOLE_NODE_GPUS) {
        v += FG_WHOLE_NODE_GPUS - v % FG_WHOLE_NODE_GPUS;
        *rounded = 1;
    }
    job->gpus = (int32_t)v;
    if (fg_parse_int64(f->p[col[COL_DUR]], f->len[col[COL_DUR]], 1, FG_TRACE_TIME_MAX, &v)) {
        snprintf(msg, mlen, "duration_s is not an integer in [1, %lld]",
                 (long long)FG_TRACE_TIME_MAX);
        return msg;
    }
    job->duration = v;
    int c = col[COL_USER];
    const char *which = "user";
    if (col[COL_ACCOUNT] >= 0 && f->len[col[COL_ACCOUNT]] > 0) {
        c = col[COL_ACCOUNT];
        which = "account";
    }
    const char *bad = check_name(f->p[c], f->len[c]);
    if (bad) {
        snprintf(msg, mlen, "%s %s", which, bad);
        return msg;
    }
    job->tenant = intern(t, tab, f->p[c], f->len[c]);
    return NULL;
}

/* The columns of a header line into col[] (-1: absent); NULL, or what is wrong. */
static const char *header_columns(const fields_t *f, int col[NCOLS], char *msg, size_t msglen)
{
    for (int k = 0; k < NCOLS; k++)
        col[k] = -1;
    for (int i = 0; i < f->n; i++)
        for (int k = 0; k < NCOLS; k++)
            if (strlen(col_names[k]) == f->len[i] &&
                memcmp(col_names[k], f->p[i], f->len[i]) == 0) {
                if (col[k] >= 0) {
                    snprintf(msg, msglen, "column %s appears twice", col_names[k]);
                    return msg;
                }
                col[k] = i;
            }
    for (int k = 0; k < COL_ACCOUNT; k++)
        if (col[k] < 0) {
            snprintf(msg, msglen,
                     "missing column %s (need job_id,user,submit_time_s,num_gpus,duration_s)",
                     col_names[k]);
            return msg;
        }
    return NULL;
}

/* A bad row: counted and skipped (the first one kept) under skip_bad; else an error. */
static int bad_row(fg_trace_t *t, const fg_trace_opts_t *opts, const char *name, int64_t lineno,
                   const char *bad, char *err, size_t errlen)
{
    if (!opts->skip_bad) {
        seterr(err, errlen, name, lineno, "%s", bad);
        return -1;
    }
    t->skipped_bad++;
    if (!t->first_bad[0])
        seterr(t->first_bad, sizeof t->first_bad, name, lineno, "%s", bad);
    return 0;
}

int fg_trace_parse(const char *name, const char *data, size_t len, const fg_trace_opts_t *opts,
                   fg_trace_t *out, char *err, size_t errlen)
{
    static const fg_trace_opts_t defaults = {0, 0};
    if (!opts)
        opts = &defaults;
    memset(out, 0, sizeof *out);
    fg_trace_t *t = out;
    t->name = fg_xstrdup(name);
    tenant_tab_t tab = {NULL, 0, 0};
    fields_t *f = fg_xmalloc(sizeof *f);
    size_t jobs_cap = 0;
    int col[NCOLS] = {-1, -1, -1, -1, -1, -1};
    int ncols = 0;
    int have_header = 0;
    int64_t lineno = 0;
    size_t pos = 0;
    char msg[160];

    /* A UTF-8 byte-order mark before the header is allowed. */
    if (len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0)
        pos = 3;
    while (pos < len) {
        lineno++;
        const char *line = data + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - line) : len - pos;
        pos += n + (nl ? 1 : 0);
        if (n > 0 && line[n - 1] == '\r')
            n--;
        if (n > FG_TRACE_LINE_MAX) {
            seterr(err, errlen, name, lineno, "line longer than %d bytes", FG_TRACE_LINE_MAX);
            goto fail;
        }
        if (memchr(line, '\0', n)) {
            if (!have_header) {
                seterr(err, errlen, name, lineno, "NUL byte in line");
                goto fail;
            }
            if (bad_row(t, opts, name, lineno, "NUL byte in line", err, errlen) < 0)
                goto fail;
            continue;
        }
        if (n == 0)
            continue; /* blank lines are allowed */
        const char *bad = split(line, n, f);
        if (!have_header) {
            if (bad) {
                seterr(err, errlen, name, lineno, "header: %s", bad);
                goto fail;
            }
            if ((bad = header_columns(f, col, msg, sizeof msg))) {
                seterr(err, errlen, name, lineno, "header: %s", bad);
                goto fail;
            }
            ncols = f->n;
            have_header = 1;
            continue;
        }
        if (opts->max_jobs && t->njobs >= opts->max_jobs)
            break;
        fg_trace_job_t job = {0};
        int rounded = 0;
        if (!bad)
            bad = parse_row(t, &tab, f, col, ncols, &job, &rounded, msg, sizeof msg);
        if (bad) {
            if (bad_row(t, opts, name, lineno, bad, err, errlen) < 0)
                goto fail;
            continue;
        }
        job.line = lineno;
        t->rounded_up += rounded;
        t->jobs = fg_xgrow(t->jobs, &jobs_cap, t->njobs + 1, sizeof *t->jobs);
        t->jobs[t->njobs++] = job;
    }
    if (!have_header) {
        seterr(err, errlen, name, lineno ? lineno : 1, "no header line");
        goto fail;
    }
    if (t->njobs > 1)
        qsort(t->jobs, t->njobs, sizeof *t->jobs, cmp_job);
    free(tab.slots);
    free(f);
    return 0;
fail:
    free(tab.slots);
    free(f);
    fg_trace_free(t);
    return -1;
}

int fg_trace_load(const char *path, const fg_trace_opts_t *opts, fg_trace_t *out, char *err,
                  size_t errlen)
{
    memset(out, 0, sizeof *out);
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 20, len = 0;
    char *buf = fg_xmalloc(cap);
    for (;;) {
        if (len == cap) {
            if (cap >= FG_TRACE_FILE_MAX) {
                snprintf(err, errlen, "%s: larger than %zu bytes", path, FG_TRACE_FILE_MAX);
                free(buf);
                fclose(fp);
                return -1;
            }
            cap *= 2;
            buf = fg_xrealloc(buf, cap);
        }
        size_t got = fread(buf + len, 1, cap - len, fp);
        len += got;
        if (got == 0)
            break;
    }
    if (ferror(fp)) {
        snprintf(err, errlen, "%s: read error", path);
        free(buf);
        fclose(fp);
        return -1;
    }
    fclose(fp);
    int rc = fg_trace_parse(path, buf, len, opts, out, err, errlen);
    free(buf);
    return rc;
}

void fg_trace_free(fg_trace_t *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->ntenants; i++)
        free(t->tenants[i]);
    free(t->tenants);
    free(t->jobs);
    free(t->name);
    memset(t, 0, sizeof *t);
}
