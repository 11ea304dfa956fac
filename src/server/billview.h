/*
 * billview.h - what the billing report routes share (h_usage.c, h_invoice.c,
 * h_adjust.c): who may see which ledger rows, the price book's currency, a row's part
 * in a time range, and CSV output into a srv_buf_t.
 *
 * WHO SEES WHAT (docs/billing.md, "Reports"): an admin every row; an account manager
 * (a membership with manager: true) every row of the accounts they manage; anyone
 * their own rows. Example: bob manages "vision": he sees all of vision's rows and, in
 * other accounts, only his own.
 */
#ifndef FG_SERVER_BILLVIEW_H
#define FG_SERVER_BILLVIEW_H

#include "fairgpu/billing.h"
#include "server/server.h"

#include <stdbool.h>
#include <stdint.h>

#define SRV_VIEW_ACCOUNTS 256 /* memberships of one viewer considered */

/* The caller of a report and the accounts they belong to and manage. */
typedef struct srv_viewer {
    bool admin;
    char user[FG_NAME_MAX];
    size_t nmember;
    char member[SRV_VIEW_ACCOUNTS][FG_NAME_MAX];
    bool manager[SRV_VIEW_ACCOUNTS]; /* of member[i] */
} srv_viewer_t;

/* Fills *v for request r (takes mu). */
void srv_viewer_init(srv_req_t *r, srv_viewer_t *v);
/* Whether v manages account a (an admin manages every account). */
bool srv_viewer_manages(const srv_viewer_t *v, const char *a);
/* Whether v is a member of a. */
bool srv_viewer_member(const srv_viewer_t *v, const char *a);
/* Whether v may see row r. */
bool srv_viewer_sees(const srv_viewer_t *v, const fg_ledger_row_t *r);

/* The price book's currency into out ("" while the book is empty); 0 or a store error. */
int srv_bill_currency(fg_store_tx_t *tx, char out[4]);

/* fg_bill_part_in with 0 for an unbounded end: row r's part in [t0, t1) on its curve
 * (charges and refunds C(min(end, t1)) - C(max(start, t0)) with the row's sign and the
 * GPU-ms there; credits and corrections whole when their start is in the range). FG_OK,
 * or FG_EINVAL for a row the charging rules did not make. */
int srv_bill_part_in(const fg_ledger_row_t *r, int64_t t0, int64_t t1, int64_t *gpu_ms,
                     int64_t *amount);

/* CSV: a text cell (quoted, formula-guarded), an integer cell, and the line end
 * (CRLF, RFC 4180). Cells after the first of a line get their comma. */
void srv_csv_text(srv_buf_t *b, bool first, const char *s);
void srv_csv_int(srv_buf_t *b, bool first, int64_t v);
void srv_csv_end(srv_buf_t *b);
/* GPU-ms as seconds with 3 decimals ("12.345"), as text. */
void srv_bill_fmt_seconds(int64_t gpu_ms, char out[32]);
/* Answers r with the CSV in b (Content-Type: text/csv; b is taken). */
int srv_reply_csv(srv_req_t *r, srv_buf_t *b);
/* ?format= (json, the default, or csv) into *csv: true, or false after a 400 answer. */
bool srv_bill_format(srv_req_t *r, bool *csv);

#endif
