/*
 * adjust_body.h - the body of POST /v1/billing/adjustments (an admin's credit or
 * correction row, docs/billing.md "Adjustments"), validated. Pure: jansson only, no
 * I/O; untrusted input covered by tests/fuzz/fuzz_adjust_body.c.
 *
 * SIGN RULES (the ledger's: what the account owes is the sum of its rows)
 *   credit:     amount_micros < 0 (money given back); refers_to optional
 *   correction: amount_micros != 0, either sign; refers_to required (a row id)
 *   |amount_micros| <= SRV_ADJUST_MAX_MICROS; note 1..127 bytes without control
 *   characters; account and user are names ([a-z0-9_.-]{1,63}).
 *
 * Example: {"kind":"credit","account":"vision","amount_micros":-5000000,
 *           "note":"outage 2026-11-03"} -> kind FG_ROW_CREDIT, amount -5000000.
 */
#ifndef FG_SERVER_ADJUST_BODY_H
#define FG_SERVER_ADJUST_BODY_H

#include "fairgpu/billing.h"

#include <jansson.h>
#include <stdint.h>

#define SRV_ADJUST_MAX_MICROS 1000000000000000LL /* 10^9 currency units */

typedef struct srv_adjust {
    fg_row_kind_t kind; /* FG_ROW_CREDIT or FG_ROW_CORRECTION */
    char account[FG_NAME_MAX];
    char user[FG_NAME_MAX]; /* "" when not given */
    int64_t amount_micros;
    uint64_t refers_to; /* 0 when not given */
    char note[FG_BILL_NOTE_MAX];
} srv_adjust_t;

/* A 400 answer: code, field (may be NULL) and message. */
typedef struct srv_adjust_err {
    const char *code;
    const char *field; /* a static name, or field_name (a copy of an unknown key) */
    char field_name[64];
    char msg[200];
} srv_adjust_err_t;

/* Validates body object o into *out: 0, or -1 with *err filled. */
int srv_adjust_parse(json_t *o, srv_adjust_t *out, srv_adjust_err_t *err);

#endif
