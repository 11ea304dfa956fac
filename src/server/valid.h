/*
 * valid.h - request field validation helpers shared by the handlers. Each returns
 * true when the field is acceptable; otherwise it has already replied 400
 * invalid_argument naming the field and returns false.
 */
#ifndef FG_SERVER_VALID_H
#define FG_SERVER_VALID_H

#include "server/server.h"

/* A string field: required or optional (*out NULL when absent), 1..maxlen bytes. */
bool v_string(srv_req_t *r, json_t *o, const char *key, bool required, size_t maxlen,
              const char **out);
/* An integer field within [lo, hi]; *present says whether it was given. */
bool v_int(srv_req_t *r, json_t *o, const char *key, bool required, long long lo, long long hi,
           long long *out, bool *present);
/* A positive number field (weight). */
bool v_number(srv_req_t *r, json_t *o, const char *key, double lo, double hi, double *out,
              bool *present);
bool v_bool(srv_req_t *r, json_t *o, const char *key, bool *out, bool *present);
/* Only the keys listed (NULL-terminated) may appear. */
bool v_known(srv_req_t *r, json_t *o, const char *const *keys);
/* [a-z0-9_.-]{1,63} */
bool v_name_ok(const char *s);
/* A username: v_name_ok and not all digits (a user id reads as digits). */
bool v_username_ok(const char *s);
/* Text shown to others (display names, emails, token and job names): no control
 * character (C0, DEL, C1: no CR/LF) and no bidirectional mark, embedding, override or
 * isolate (U+061C, U+200E-F, U+202A-E, U+2066-9). s is valid UTF-8. */
bool v_text_ok(const char *s);

#endif
