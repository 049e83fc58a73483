/* audit.c — see audit.h: a ring of fixed-size entries. */
#include "api/audit.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

typedef struct entry {
    int64_t at_ms;
    char user[64], token[64], method[8], path[256], remote[64];
    int status;
} entry_t;

struct drv_audit {
    pthread_mutex_t mu;
    entry_t *e;          /* DRV_AUDIT_CAP slots */
    size_t next, n;      /* the next slot to write; how many are filled */
};

drv_audit_t *drv_audit_create(void)
{
    drv_audit_t *a = calloc(1, sizeof *a);
    if (!a || !(a->e = calloc(DRV_AUDIT_CAP, sizeof *a->e))) {
        free(a);
        return NULL;
    }
    pthread_mutex_init(&a->mu, NULL);
    return a;
}

void drv_audit_destroy(drv_audit_t *a)
{
    if (!a)
        return;
    pthread_mutex_destroy(&a->mu);
    free(a->e);
    free(a);
}

void drv_audit_add(drv_audit_t *a, const char *user, const char *token_id, const char *method,
                   const char *path, int status, const char *remote)
{
    if (!a)
        return;
    entry_t x = {.at_ms = drv_now_ms(), .status = status};
    snprintf(x.user, sizeof x.user, "%s", user ? user : "");
    snprintf(x.token, sizeof x.token, "%s", token_id ? token_id : "");
    snprintf(x.method, sizeof x.method, "%s", method);
    snprintf(x.path, sizeof x.path, "%s", path);
    snprintf(x.remote, sizeof x.remote, "%s", remote && *remote ? remote : "");
    pthread_mutex_lock(&a->mu);
    a->e[a->next] = x;
    a->next = (a->next + 1) % DRV_AUDIT_CAP;
    if (a->n < DRV_AUDIT_CAP)
        a->n++;
    pthread_mutex_unlock(&a->mu);
}

json_t *drv_audit_list(drv_audit_t *a, const char *user, size_t limit)
{
    json_t *items = json_array();
    if (!a)
        return items;
    entry_t *copy = malloc(sizeof *copy * (limit < DRV_AUDIT_CAP ? limit : DRV_AUDIT_CAP));
    size_t k = 0;
    pthread_mutex_lock(&a->mu);   /* copied out: JSON is built after */
    for (size_t i = 0; copy && i < a->n && k < limit; i++) {
        const entry_t *x = &a->e[(a->next + DRV_AUDIT_CAP - 1 - i) % DRV_AUDIT_CAP];
        if (!user || strcmp(x->user, user) == 0)
            copy[k++] = *x;
    }
    pthread_mutex_unlock(&a->mu);
    for (size_t i = 0; i < k; i++) {
        char at[40];
        drv_rfc3339(copy[i].at_ms / 1000, at, sizeof at);
        json_array_append_new(items, json_pack("{s:s, s:I, s:s, s:s, s:s, s:s, s:i, s:s}", "at", at,
                                               "at_ms", (json_int_t)copy[i].at_ms,
                                               "user", copy[i].user, "token", copy[i].token,
                                               "method", copy[i].method, "path", copy[i].path,
                                               "status", copy[i].status, "remote",
                                               copy[i].remote));
    }
    free(copy);
    return items;
}
