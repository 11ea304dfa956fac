/*
 * twin.h - for tests that drive two schedulers with the same calls (one with a shortcut,
 * one computing plainly) and compare what they decide.
 */
#ifndef FG_TEST_TWIN_H
#define FG_TEST_TWIN_H

#include <stdbool.h>
#include <string.h>

#include "fairgpu/core.h"

/* The same starts, allocations, preemptions and next wake-up (not `scanned`, which a
 * shortcut may change on purpose). */
static inline bool twin_decisions_equal(const fg_decisions_t *a, const fg_decisions_t *b)
{
    return a->nstarts == b->nstarts && a->npreempts == b->npreempts && a->nallocs == b->nallocs &&
           a->next_wake == b->next_wake &&
           (!a->nstarts || !memcmp(a->starts, b->starts, sizeof *a->starts * a->nstarts)) &&
           (!a->nallocs || !memcmp(a->allocs, b->allocs, sizeof *a->allocs * a->nallocs)) &&
           (!a->npreempts || !memcmp(a->preempts, b->preempts, sizeof *a->preempts * a->npreempts));
}

/* Ends attempt `attempt` of job id in both; true when both answered the same code and
 * the same attempt record (zeroed first: compared with memcmp, padding too). */
static inline bool twin_attempt_ended(fg_sched_t *const s[2], fg_job_id_t id, int32_t attempt,
                                      fg_end_cause_t cause, fg_time_t now, int *rc)
{
    fg_attempt_t a0, a1;
    memset(&a0, 0, sizeof a0);
    memset(&a1, 0, sizeof a1);
    *rc = fg_sched_attempt_ended(s[0], id, attempt, cause, now, &a0);
    return *rc == fg_sched_attempt_ended(s[1], id, attempt, cause, now, &a1) &&
           !memcmp(&a0, &a1, sizeof a0);
}

#endif
