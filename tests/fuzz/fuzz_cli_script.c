/*
 * fuzz_cli_script.c - libFuzzer target for the CLI's parsers of untrusted text: job
 * scripts (#FAIRGPU / #SBATCH), time limits, directive word splitting, submit options in
 * every dialect, and the Server-Sent Events parser. Checks invariants, not just crashes:
 * a parsed time is in (0, FG_TIME_MAX_S]; a finalized spec has a valid GPU count and a
 * command; the SSE parser gives the same events whether fed whole or byte by byte.
 */
#include "cli/script.h"
#include "cli/sse.h"
#include "cli/timespec.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok)
{
    if (!ok)
        abort();
}

typedef struct {
    unsigned long hash;
    size_t events;
} sse_sum_t;

static int on_event(void *ud, const char *type, const char *data, size_t len, const char *id)
{
    sse_sum_t *s = ud;
    check(strlen(data) <= len && data[len] == '\0');
    for (const char *p = type; *p; p++)
        s->hash = s->hash * 31 + (unsigned char)*p;
    for (size_t k = 0; k < len; k++)
        s->hash = s->hash * 31 + (unsigned char)data[k];
    for (const char *p = id; *p; p++)
        s->hash = s->hash * 31 + (unsigned char)*p;
    s->events++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;

    /* scripts */
    fg_jobspec_t js;
    fg_jobspec_init(&js);
    char err[512];
    if (fg_script_parse(text, size, &js, err, sizeof err) == 0) {
        check(js.ncommand >= 3);
        if (fg_jobspec_finalize(&js, err, sizeof err) == 0) {
            check(js.gpus >= 1 && (js.gpus <= 8 || js.gpus % 8 == 0));
            json_t *o = fg_jobspec_to_json(&js);
            check(o != NULL);
            json_decref(o);
        }
    } else {
        check(err[0] != '\0');
    }
    fg_jobspec_free(&js);

    /* a NUL-terminated copy for the string parsers */
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    long long t = 0;
    if (fg_parse_time(s, &t, err, sizeof err) == 0)
        check(t > 0 && t <= FG_TIME_MAX_S);
    else
        check(err[0] != '\0');

    /* words, then options in each dialect */
    char *words[FG_SCRIPT_MAX_TOKENS];
    int n = fg_split_words(s, strlen(s), words, FG_SCRIPT_MAX_TOKENS, err, sizeof err);
    if (n >= 0) {
        for (int d = 0; d < 3; d++) {
            fg_jobspec_t o;
            fg_jobspec_init(&o);
            int i = 0;
            while (i < n) {
                int before = i;
                int r = fg_jobspec_option(&o, (fg_dialect_t)d, n, words, &i, err, sizeof err);
                if (r <= 0)
                    break;
                check(i > before && i <= n);
            }
            fg_jobspec_free(&o);
        }
        for (int k = 0; k < n; k++)
            free(words[k]);
    }
    free(s);

    /* SSE: whole vs byte by byte */
    sse_sum_t a = {0}, b = {0};
    fg_sse_t p;
    fg_sse_init(&p, on_event, &a);
    int ra = fg_sse_feed(&p, text, size);
    fg_sse_free(&p);
    fg_sse_init(&p, on_event, &b);
    int rb = 0;
    for (size_t k = 0; k < size && rb == 0; k++)
        rb = fg_sse_feed(&p, text + k, 1);
    fg_sse_free(&p);
    check(ra == rb && a.events == b.events && a.hash == b.hash);
    return 0;
}
