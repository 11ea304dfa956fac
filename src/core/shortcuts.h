/*
 * shortcuts.h - the core's speed shortcuts, each by name.
 *
 * A shortcut leaves out work that no decision, reason or estimate depends on: the
 * decisions with it are the same as without it. Each one is a named flag, on by
 * default, that tests turn off one at a time (fg__shortcut_set, like SQLite's
 * optimisation flags); tests/unit/test_core_shortcuts.c drives twin schedulers through
 * random sequences, one with a shortcut off, and compares every decision, reason and
 * estimate. Code reads a flag with fg__sc(s, FG__SC_NAME) beside the work it skips.
 *
 * Example: with "walk-cut" off, a walk that another walk follows goes on after a start
 * left no GPU free (it finds nothing more to start, only the same moot reasons).
 */
#ifndef FG_CORE_SHORTCUTS_H
#define FG_CORE_SHORTCUTS_H

#include <stdbool.h>
#include <stdint.h>

/* X(ENUM, "name", "what it leaves out"), grouped by the file that reads it */
#define FG__SHORTCUTS(X)                                                                           \
    /* order.c */                                                                                  \
    X(ACTIVE_SETS, "active-sets",                                                                  \
      "the wfq order sets up only the accounts and members with pending jobs")                     \
    X(ONE_MEMBER, "one-member",                                                                    \
      "an account's only member keeps no counts or heap of its own in the wfq order")              \
    X(SORTED_ACCOUNTS, "sorted-accounts",                                                          \
      "a band of at most 32 accounts keeps them sorted by key instead of in a heap")               \
    /* lookahead.c */                                                                              \
    X(QUEUE_RUNS, "queue-runs",                                                                    \
      "the look ahead passes a run of queue entries at once when its summary refuses all")         \
    /* place.c */                                                                                  \
    X(FEASIBLE_MASK, "feasible-mask",                                                              \
      "a size of one node, any type, found feasible is a bit read before the memo")                \
    X(WHOLE_LEAVES, "whole-leaves",                                                                \
      "whole nodes of a type with few nodes are picked by one read of the tree's leaves")          \
    /* preempt.c */                                                                                \
    X(WATERFILL_KEPT, "waterfill-kept",                                                            \
      "the accounts' water fill stays sorted from one preemption search to the next")              \
    X(VICTIM_SKIP, "victim-skip",                                                                  \
      "the victim scan skips the running lists of accounts within their entitlement")              \
    X(CANDIDATE_BOUND, "candidate-bound",                                                          \
      "a preemption search drops candidate nodes that a bound shows have no room")                 \
    /* walk.c */                                                                                   \
    X(TAIL_STOP, "tail-stop",                                                                      \
      "a walk whose rest only gets reasons and queued estimates leaves it to walk_tail")           \
    X(LOOK_AHEAD, "look-ahead",                                                                    \
      "the walk moves past the backfill window's jobs that cannot start (fg__order_peek)")         \
    X(WALK_CUT, "walk-cut", "a walk that another follows ends when a start leaves no GPU free")

typedef enum fg__shortcut {
#define FG__SC_ENUM(e, name, what) FG__SC_##e,
    FG__SHORTCUTS(FG__SC_ENUM)
#undef FG__SC_ENUM
        FG__SC_COUNT
} fg__shortcut_t;

/* The shortcut's name ("walk-cut"), NULL past the last. */
const char *fg__shortcut_name(int k);

#endif
