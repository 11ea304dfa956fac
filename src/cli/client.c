/* client.c - libcurl-based HTTP for the CLI (see client.h). */
#include "cli/client.h"
#include "common/xalloc.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int fg_client_init(fg_client_t *c, const char *url, const char *token)
{
    memset(c, 0, sizeof *c);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "fairgpu: cannot initialise libcurl\n");
        return -1;
    }
    CURL *h = curl_easy_init();
    if (!h) {
        fprintf(stderr, "fairgpu: cannot initialise libcurl\n");
        return -1;
    }
    c->curl = h;
    c->url = fg_xstrdup(url);
    c->token = token ? fg_xstrdup(token) : NULL;
    return 0;
}

void fg_client_set_ca(fg_client_t *c, const char *path)
{
    free(c->ca_file);
    c->ca_file = path && *path ? fg_xstrdup(path) : NULL;
}

void fg_client_free(fg_client_t *c)
{
    if (c->curl)
        curl_easy_cleanup(c->curl);
    free(c->url);
    free(c->token);
    free(c->ca_file);
    memset(c, 0, sizeof *c);
    curl_global_cleanup();
}

void fg_resp_free(fg_resp_t *r)
{
    free(r->body);
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}

char *fg_client_escape(const char *s)
{
    char *e = curl_easy_escape(NULL, s, 0);
    if (!e)
        return fg_xstrdup("");
    char *r = fg_xstrdup(e);
    curl_free(e);
    return r;
}

typedef struct {
    char *buf;
    size_t len, cap;
    int toobig;
} sink_t;

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    sink_t *s = ud;
    size_t n = size * nmemb;
    if (s->len + n + 1 > FG_CLIENT_MAX_BODY) {
        s->toobig = 1;
        return 0;
    }
    s->buf = fg_xgrow(s->buf, &s->cap, s->len + n + 1, 1);
    memcpy(s->buf + s->len, ptr, n);
    s->len += n;
    s->buf[s->len] = '\0';
    return n;
}

/* Says on stderr why a transfer failed, with what to do when the TLS check failed. */
static void report_transport(const fg_client_t *c, CURLcode cc)
{
    fprintf(stderr, "fairgpu: cannot reach the server at %s: %s\n", c->url, curl_easy_strerror(cc));
    if (cc == CURLE_PEER_FAILED_VERIFICATION || cc == CURLE_SSL_CACERT_BADFILE ||
        cc == CURLE_SSL_CERTPROBLEM)
        fprintf(stderr,
                "fairgpu: the server's TLS certificate could not be verified%s%s; give the CA "
                "that signed it with --ca-file FILE (or FAIRGPU_CA_FILE, or \"ca_file\" in "
                "the config file)\n",
                c->ca_file ? " with " : " with the system's CA store",
                c->ca_file ? c->ca_file : "");
}

/* Sets the options common to every request; returns the header list to free. */
static struct curl_slist *prepare(fg_client_t *c, const char *method, const char *url,
                                  const char *const *headers)
{
    CURL *h = c->curl;
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "fairgpu-cli/1");
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    /* https: the peer and its host name are always verified */
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    if (c->ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
    struct curl_slist *hl = NULL;
    char auth[4200];
    if (c->token) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->token);
        hl = curl_slist_append(hl, auth);
    }
    for (size_t i = 0; headers && headers[i]; i++)
        hl = curl_slist_append(hl, headers[i]);
    return hl;
}

static void fill_ctype(CURL *h, fg_resp_t *r)
{
    char *ct = NULL;
    if (curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct)
        snprintf(r->ctype, sizeof r->ctype, "%s", ct);
}

/* The server's URL of path into url (n bytes): 0, or -1 after a message when it does
 * not fit. */
static int full_url(const fg_client_t *c, const char *path, char *url, size_t n)
{
    if ((size_t)snprintf(url, n, "%s%s", c->url, path) >= n) {
        fprintf(stderr, "fairgpu: request URL too long\n");
        return -1;
    }
    return 0;
}

int fg_client_request(fg_client_t *c, const char *method, const char *path, json_t *body,
                      const char *const *headers, fg_resp_t *r)
{
    memset(r, 0, sizeof *r);
    char url[8192];
    if (full_url(c, path, url, sizeof url) < 0)
        return -1;
    CURL *h = c->curl;
    struct curl_slist *hl = prepare(c, method, url, headers);
    char *text = NULL;
    if (body) {
        text = json_dumps(body, JSON_COMPACT);
        hl = curl_slist_append(hl, "Content-Type: application/json");
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(text));
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
    sink_t s = {0};
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
    CURLcode cc = curl_easy_perform(h);
    curl_slist_free_all(hl);
    free(text);
    if (cc != CURLE_OK) {
        if (s.toobig)
            fprintf(stderr, "fairgpu: the reply from %s is larger than %d bytes\n", c->url,
                    FG_CLIENT_MAX_BODY);
        else
            report_transport(c, cc);
        free(s.buf);
        return -1;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    fill_ctype(h, r);
    r->body = s.buf ? s.buf : fg_xstrdup("");
    r->len = s.len;
    if (r->len && (strstr(r->ctype, "json") || r->body[0] == '{' || r->body[0] == '['))
        r->json = json_loadb(r->body, r->len, 0, NULL);
    return 0;
}

typedef struct {
    fg_sse_t *p;
    sink_t err; /* body of a non-2xx reply */
    CURL *h;
    int checked, ok, stopped, bad;
} stream_t;

static size_t on_stream(char *ptr, size_t size, size_t nmemb, void *ud)
{
    stream_t *st = ud;
    size_t n = size * nmemb;
    if (!st->checked) {
        long code = 0;
        curl_easy_getinfo(st->h, CURLINFO_RESPONSE_CODE, &code);
        st->ok = code >= 200 && code < 300;
        st->checked = 1;
    }
    if (!st->ok)
        return on_body(ptr, size, nmemb, &st->err);
    int rc = fg_sse_feed(st->p, ptr, n);
    if (rc == 1) {
        st->stopped = 1;
        return 0;
    }
    if (rc < 0) {
        st->bad = 1;
        return 0;
    }
    return n;
}

int fg_client_stream(fg_client_t *c, const char *path, const char *last_event_id, fg_sse_t *p,
                     int quiet, fg_resp_t *r)
{
    memset(r, 0, sizeof *r);
    char url[8192];
    if (full_url(c, path, url, sizeof url) < 0)
        return -1;
    CURL *h = c->curl;
    const char *extra[3] = {"Accept: text/event-stream", NULL, NULL};
    char lei[400];
    if (last_event_id && *last_event_id) {
        snprintf(lei, sizeof lei, "Last-Event-ID: %s", last_event_id);
        extra[1] = lei;
    }
    struct curl_slist *hl = prepare(c, "GET", url, extra);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    /* No overall timeout: a stream may idle for long. TCP keep-alive notices dead peers. */
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    stream_t st = {.p = p, .h = h};
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_stream);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &st);
    CURLcode cc = curl_easy_perform(h);
    curl_slist_free_all(hl);
    if (st.stopped)
        return 1;
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    if (code && (code < 200 || code >= 300)) {
        r->status = code;
        fill_ctype(h, r);
        r->body = st.err.buf ? st.err.buf : fg_xstrdup("");
        r->len = st.err.len;
        r->json = json_loadb(r->body, r->len, 0, NULL);
        return -2;
    }
    free(st.err.buf);
    if (st.bad) {
        if (!quiet)
            fprintf(stderr, "fairgpu: the event stream from %s is malformed\n", c->url);
        return -1;
    }
    if (cc != CURLE_OK) {
        if (!quiet && !code)
            report_transport(c, cc);
        else if (!quiet)
            fprintf(stderr, "fairgpu: stream from %s interrupted: %s\n", c->url,
                    curl_easy_strerror(cc));
        return -1;
    }
    return 0;
}

int fg_client_report(const fg_client_t *c, const fg_resp_t *r)
{
    json_t *e = json_object_get(r->json, "error");
    const char *msg = json_string_value(json_object_get(e, "message"));
    const char *code = json_string_value(json_object_get(e, "code"));
    const char *field = json_string_value(json_object_get(e, "field"));
    if (msg) {
        fprintf(stderr, "fairgpu: %s (%s", msg, code ? code : "error");
        if (field)
            fprintf(stderr, ", field %s", field);
        fprintf(stderr, "; HTTP %ld)\n", r->status);
    } else {
        /* Not the contract's error shape: show the start of the body. */
        int n = (int)(r->len > 200 ? 200 : r->len);
        while (n > 0 && (r->body[n - 1] == '\n' || r->body[n - 1] == '\r'))
            n--;
        fprintf(stderr, "fairgpu: the server answered HTTP %ld%s%.*s\n", r->status, n ? ": " : "",
                n, r->body ? r->body : "");
    }
    if (r->status == 401)
        fprintf(stderr, "fairgpu: %s\n",
                c->token ? "the token was refused; run 'fairgpu login' again"
                         : "not logged in: run 'fairgpu login' or set FAIRGPU_TOKEN");
    return 1;
}
