/*
 * client.h - the CLI's HTTP client: one libcurl handle (keep-alive), JSON requests,
 * the contract's error objects, and Server-Sent Event streams.
 */
#ifndef FG_CLI_CLIENT_H
#define FG_CLI_CLIENT_H

#include "cli/sse.h"

#include <jansson.h>
#include <stddef.h>

#define FG_CLIENT_MAX_BODY (64 * 1024 * 1024) /* a larger reply is refused */

typedef struct {
    char *url;     /* base, no trailing '/'; owned */
    char *token;   /* bearer token or NULL; owned */
    char *ca_file; /* CA bundle to verify https with, or NULL (the system's); owned */
    void *curl;    /* CURL * */
} fg_client_t;

typedef struct {
    long status; /* HTTP status */
    char *body;  /* NUL-terminated; owned */
    size_t len;
    json_t *json; /* parsed body when it is JSON, else NULL; owned */
    char ctype[128];
} fg_resp_t;

/* url and token are copied. Returns 0 or -1 (message on stderr). */
int fg_client_init(fg_client_t *c, const char *url, const char *token);
void fg_client_free(fg_client_t *c);
/* Verifies an https server with the CA bundle at path (copied; NULL: the system's
 * store). Certificates are always verified. */
void fg_client_set_ca(fg_client_t *c, const char *path);
void fg_resp_free(fg_resp_t *r);

/*
 * Sends METHOD base+path with an optional JSON body and optional extra header lines
 * (NULL-terminated array, e.g. "Idempotency-Key: k"). Returns 0 when a reply came
 * (whatever its status), -1 on a transport failure (message on stderr).
 */
int fg_client_request(fg_client_t *c, const char *method, const char *path, json_t *body,
                      const char *const *headers, fg_resp_t *r);

/*
 * Streams GET base+path as Server-Sent Events into parser p. last_event_id, when not
 * NULL/empty, goes out as Last-Event-ID. Returns 0 when the server ended the stream,
 * 1 when the callback stopped it, -1 on a transport failure (message on stderr unless
 * quiet), -2 on a non-2xx reply (the reply is left in *r for fg_client_report).
 */
int fg_client_stream(fg_client_t *c, const char *path, const char *last_event_id, fg_sse_t *p,
                     int quiet, fg_resp_t *r);

/*
 * Prints a failed reply on stderr as "fairgpu: <message> (<code>[, field <f>];
 * HTTP <status>)", with a hint for 401. Returns the exit status to use (1).
 */
int fg_client_report(const fg_client_t *c, const fg_resp_t *r);

/* Percent-encodes s for a path segment or query value (malloc'd). */
char *fg_client_escape(const char *s);

#endif
