/* suggest.h — "did you mean …?" for a near miss: the candidate closest to
 * a mistyped word (a field, a kind, a flag) by edit distance.
 *
 * The distance is Damerau-Levenshtein's optimal string alignment: one
 * insertion, deletion, substitution or swap of two neighbours costs 1, and
 * case is ignored ("Command" is 0 from "command"). A candidate is offered
 * when it is at most 1 edit from a word of 2 to 7 characters, 2 from a
 * longer one (a one-letter word only differs in case), and the word is not
 * the candidate itself; among equals the first added wins. Pure; no allocation.
 */
#ifndef DRV_SUGGEST_H
#define DRV_SUGGEST_H

#include <stddef.h>

/* Candidates longer than this are never offered (and never measured). */
#define DRV_SUGGEST_MAX_LEN 64

typedef struct drv_suggest {
    const char *word;
    const char *best;    /* NULL: nothing close enough yet */
    int best_dist;
} drv_suggest_t;

/* The edit distance of a and b (case-insensitive), or -1 when either is
 * longer than DRV_SUGGEST_MAX_LEN. */
int drv_edit_distance(const char *a, const char *b);

void drv_suggest_init(drv_suggest_t *s, const char *word);
/* Consider one candidate (kept by pointer: it must outlive s). */
void drv_suggest_add(drv_suggest_t *s, const char *candidate);
/* The closest candidate close enough, or NULL. */
const char *drv_suggest_best(const drv_suggest_t *s);

/* The closest of a NULL-terminated list, or NULL. */
const char *drv_suggest_from(const char *word, const char *const *candidates);

#endif
