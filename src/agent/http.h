/*
 * http.h - the agent's small JSON-over-HTTP client (libcurl easy handle, keep-alive).
 * One fg_http_t per thread; never shared.
 */
#ifndef FG_AGENT_HTTP_H
#define FG_AGENT_HTTP_H

#include <jansson.h>
#include <stddef.h>

typedef struct fg_http {
    void *curl;         /* CURL * */
    char base[512];     /* "http://127.0.0.1:8080", no trailing slash */
    char auth[600];     /* "Authorization: Bearer ..." */
    char ca_file[512];  /* CURLOPT_CAINFO for https ("": the system store); never unverified */
    volatile int *stop; /* when *stop becomes non-zero, transfers are aborted */
} fg_http_t;

/* Prepares h for base_url with the agent token. stop may be NULL. */
void fg_http_init(fg_http_t *h, const char *base_url, const char *token, volatile int *stop);
void fg_http_set_token(fg_http_t *h, const char *token);
/* Verifies an https server against the CA bundle at path (NULL or "": the system's). */
void fg_http_set_ca(fg_http_t *h, const char *path);
void fg_http_cleanup(fg_http_t *h);

/*
 * Sends METHOD base+path with `body` (NULL: none; not stolen) and waits at most
 * timeout_ms. Returns the HTTP status, or -1 on a transport error (err says which). On a
 * response, *resp (if resp) gets its JSON body or NULL (caller owns it: json_decref).
 * Response bodies over 4 MiB are a transport error.
 */
long fg_http_json(fg_http_t *h, const char *method, const char *path, json_t *body, long timeout_ms,
                  json_t **resp, char *err, size_t errlen);

/* Standard base64 with padding of n bytes; returns a malloc'd NUL-terminated string. */
char *fg_base64(const unsigned char *p, size_t n);

/* URL-escapes s into out (at most outlen bytes, NUL-terminated). */
void fg_url_escape(const char *s, char *out, size_t outlen);

#endif
