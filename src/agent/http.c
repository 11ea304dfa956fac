/*
 * http.c - libcurl easy handle per thread, JSON in and out, bounded response size.
 */
#include "agent/http.h"
#include "common/xalloc.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RESP_MAX (4u * 1024 * 1024)

typedef struct buf {
    char *p;
    size_t n, cap;
    int toobig;
} buf_t;

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud)
{
    buf_t *b = ud;
    size_t n = size * nmemb;
    if (b->n + n > RESP_MAX) {
        b->toobig = 1;
        return 0;
    }
    b->p = fg_xgrow(b->p, &b->cap, b->n + n + 1, 1);
    memcpy(b->p + b->n, ptr, n);
    b->n += n;
    b->p[b->n] = '\0';
    return n;
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt, (void)dn, (void)ut, (void)un;
    volatile int *stop = ud;
    return stop && *stop ? 1 : 0;
}

void fg_http_init(fg_http_t *h, const char *base_url, const char *token, volatile int *stop)
{
    memset(h, 0, sizeof *h);
    h->curl = curl_easy_init();
    if (!h->curl) {
        fprintf(stderr, "fairgpu agent: curl_easy_init failed\n");
        abort();
    }
    snprintf(h->base, sizeof h->base, "%s", base_url);
    size_t n = strlen(h->base);
    while (n > 0 && h->base[n - 1] == '/')
        h->base[--n] = '\0';
    fg_http_set_token(h, token);
    h->stop = stop;
}

void fg_http_set_token(fg_http_t *h, const char *token)
{
    snprintf(h->auth, sizeof h->auth, "Authorization: Bearer %s", token);
}

void fg_http_set_ca(fg_http_t *h, const char *path)
{
    snprintf(h->ca_file, sizeof h->ca_file, "%s", path ? path : "");
}

void fg_http_cleanup(fg_http_t *h)
{
    if (h->curl)
        curl_easy_cleanup(h->curl);
    h->curl = NULL;
}

long fg_http_json(fg_http_t *h, const char *method, const char *path, json_t *body, long timeout_ms,
                  json_t **resp, char *err, size_t errlen)
{
    CURL *c = h->curl;
    char url[2048];
    snprintf(url, sizeof url, "%s%s", h->base, path);
    char *payload = body ? json_dumps(body, JSON_COMPACT) : NULL;
    buf_t b = {0};
    struct curl_slist *hdr = NULL;
    hdr = curl_slist_append(hdr, h->auth);
    hdr = curl_slist_append(hdr, "Content-Type: application/json");
    hdr = curl_slist_append(hdr, "Expect:");
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 5000 ? timeout_ms : 5000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    /* https is always verified (peer and host name); --ca-file names the bundle */
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    if (h->ca_file[0])
        curl_easy_setopt(c, CURLOPT_CAINFO, h->ca_file);
    if (h->stop) {
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, (void *)h->stop);
    }
    if (!strcmp(method, "GET")) {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    } else {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload ? payload : "");
    }
    CURLcode rc = curl_easy_perform(c);
    long status = -1;
    if (resp)
        *resp = NULL;
    if (rc != CURLE_OK) {
        snprintf(err, errlen, "%s %s: %s", method, path,
                 b.toobig ? "response too large" : curl_easy_strerror(rc));
    } else {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        if (resp && b.n > 0)
            *resp = json_loadb(b.p, b.n, JSON_REJECT_DUPLICATES, NULL);
        if (err && errlen)
            snprintf(err, errlen, "%s %s: HTTP %ld", method, path, status);
    }
    curl_slist_free_all(hdr);
    free(b.p);
    free(payload);
    return status;
}

char *fg_base64(const unsigned char *p, size_t n)
{
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t out = 4 * ((n + 2) / 3);
    char *s = fg_xmalloc(out + 1);
    size_t j = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        s[j++] = tbl[(v >> 18) & 63];
        s[j++] = tbl[(v >> 12) & 63];
        s[j++] = i + 1 < n ? tbl[(v >> 6) & 63] : '=';
        s[j++] = i + 2 < n ? tbl[v & 63] : '=';
    }
    s[j] = '\0';
    return s;
}

void fg_url_escape(const char *s, char *out, size_t outlen)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t j = 0;
    for (; *s && j + 4 < outlen; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            ch == '-' || ch == '_' || ch == '.' || ch == '~') {
            out[j++] = (char)ch;
        } else {
            out[j++] = '%';
            out[j++] = hex[ch >> 4];
            out[j++] = hex[ch & 15];
        }
    }
    out[j] = '\0';
}
