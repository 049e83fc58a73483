/* suggest.c — see suggest.h. */
#include "common/suggest.h"

#include <ctype.h>
#include <string.h>

int drv_edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > DRV_SUGGEST_MAX_LEN || m > DRV_SUGGEST_MAX_LEN)
        return -1;
    /* d[i][j]: distance of a's first i characters and b's first j */
    int d[DRV_SUGGEST_MAX_LEN + 1][DRV_SUGGEST_MAX_LEN + 1];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        int ca = tolower((unsigned char)a[i - 1]);
        for (size_t j = 1; j <= m; j++) {
            int cb = tolower((unsigned char)b[j - 1]);
            int best = d[i - 1][j - 1] + (ca != cb);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == cb && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[n][m];
}

void drv_suggest_init(drv_suggest_t *s, const char *word)
{
    s->word = word;
    s->best = NULL;
    s->best_dist = 0;
}

void drv_suggest_add(drv_suggest_t *s, const char *candidate)
{
    if (!s->word || !candidate || strcmp(s->word, candidate) == 0)
        return;
    size_t len = strlen(s->word);
    int limit = len > 7 ? 2 : len > 1 ? 1 : 0;
    int dist = drv_edit_distance(s->word, candidate);
    if (dist < 0 || dist > limit)
        return;
    if (!s->best || dist < s->best_dist) {
        s->best = candidate;
        s->best_dist = dist;
    }
}

const char *drv_suggest_best(const drv_suggest_t *s)
{
    return s->best;
}

const char *drv_suggest_from(const char *word, const char *const *candidates)
{
    drv_suggest_t s;
    drv_suggest_init(&s, word);
    for (size_t i = 0; candidates && candidates[i]; i++)
        drv_suggest_add(&s, candidates[i]);
    return drv_suggest_best(&s);
}
