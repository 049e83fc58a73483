/* llm_model.c — one replica's processor-sharing service model (see
 * llm_model.h): the batch is an array of at most max_concurrency request
 * pointers, the waiting queue a FIFO list through drv_llm_req_t.next.
 * Each advance walks the departures on its way in time order, so the
 * speed of every segment is that of the batch during it. */
#include "demo/llm_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define EPS 1e-9   /* virtual seconds: a token or departure this close is reached */

struct drv_llm {
    drv_llm_params_t p;
    drv_llm_req_t **batch;       /* p.max_concurrency slots, n used */
    int n;
    drv_llm_req_t *head, *tail;  /* waiting */
    int n_wait;
    double v, last;              /* virtual time, and the clock it was advanced to */
};

drv_llm_t *drv_llm_create(const drv_llm_params_t *p, char *err, size_t err_len)
{
    const char *bad = NULL;
    if (!(p->prefill_tps > 0) || !isfinite(p->prefill_tps))
        bad = "prefill tokens per second must be a positive number";
    else if (!(p->decode_tps > 0) || !isfinite(p->decode_tps))
        bad = "decode tokens per second must be a positive number";
    else if (!(p->batch_slowdown >= 0) || !isfinite(p->batch_slowdown))
        bad = "the batch slowdown must be a number >= 0";
    else if (p->max_concurrency < 1 || p->max_concurrency > 100000)
        bad = "max concurrency must be an integer from 1 to 100000";
    if (bad) {
        snprintf(err, err_len, "%s", bad);
        return NULL;
    }
    drv_llm_t *m = calloc(1, sizeof *m);
    if (m)
        m->batch = calloc((size_t)p->max_concurrency, sizeof *m->batch);
    if (!m || !m->batch) {
        free(m);
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    m->p = *p;
    m->last = -HUGE_VAL;
    return m;
}

void drv_llm_destroy(drv_llm_t *m)
{
    if (!m)
        return;
    free(m->batch);
    free(m);
}

static double speed_factor(const drv_llm_t *m)
{
    return 1 + m->p.batch_slowdown * (m->n > 0 ? m->n - 1 : 0);
}

static void admit(drv_llm_t *m, drv_llm_req_t *r, double at)
{
    r->admitted = true;
    r->admitted_at = at;
    r->v0 = m->v;
    r->v_done = m->v + r->prompt / m->p.prefill_tps + r->gen / m->p.decode_tps;
    m->batch[m->n++] = r;
}

/* Fill free slots from the queue, at clock `at`. */
static void admit_waiting(drv_llm_t *m, double at)
{
    while (m->n < m->p.max_concurrency && m->head) {
        drv_llm_req_t *r = m->head;
        m->head = r->next;
        if (!m->head)
            m->tail = NULL;
        r->next = NULL;
        m->n_wait--;
        admit(m, r, at);
    }
}

static void drop_from_batch(drv_llm_t *m, int i)
{
    m->batch[i] = m->batch[--m->n];
}

void drv_llm_advance(drv_llm_t *m, double now)
{
    if (m->last == -HUGE_VAL)
        m->last = now;
    while (m->n > 0) {
        double vmin = HUGE_VAL;
        for (int i = 0; i < m->n; i++)
            if (m->batch[i]->v_done < vmin)
                vmin = m->batch[i]->v_done;
        double f = speed_factor(m);
        double at = m->last + (vmin - m->v) * f;
        if (at > now + EPS) {
            m->v += (now - m->last) / f;
            m->last = now;
            return;
        }
        if (at < m->last)
            at = m->last;
        m->v = vmin > m->v ? vmin : m->v;
        m->last = at;
        for (int i = m->n; i-- > 0;) {
            drv_llm_req_t *r = m->batch[i];
            if (r->v_done <= m->v + EPS) {
                r->done = true;
                r->done_at = at;
                drop_from_batch(m, i);
            }
        }
        admit_waiting(m, at);
    }
    if (now > m->last)
        m->last = now;
}

void drv_llm_submit(drv_llm_t *m, drv_llm_req_t *r, double now)
{
    drv_llm_advance(m, now);
    r->admitted = r->done = false;
    r->submitted_at = now;
    r->next = NULL;
    if (r->gen < 1)
        r->gen = 1;
    if (r->prompt < 0)
        r->prompt = 0;
    if (m->n < m->p.max_concurrency && !m->head) {
        admit(m, r, now);
        return;
    }
    if (m->tail)
        m->tail->next = r;
    else
        m->head = r;
    m->tail = r;
    m->n_wait++;
}

void drv_llm_remove(drv_llm_t *m, drv_llm_req_t *r, double now)
{
    drv_llm_advance(m, now);
    if (r->done)
        return;
    for (int i = 0; i < m->n; i++)
        if (m->batch[i] == r) {
            drop_from_batch(m, i);
            r->done = true;
            r->done_at = now;
            admit_waiting(m, now);
            return;
        }
    drv_llm_req_t **pp = &m->head, *prev = NULL;
    for (; *pp; prev = *pp, pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            if (m->tail == r)
                m->tail = prev;
            m->n_wait--;
            r->next = NULL;
            r->done = true;
            r->done_at = now;
            return;
        }
}

int drv_llm_tokens(const drv_llm_t *m, const drv_llm_req_t *r)
{
    if (r->done)
        return r->gen;
    if (!r->admitted)
        return 0;
    double into = (m->v - r->v0 - r->prompt / m->p.prefill_tps) * m->p.decode_tps;
    if (into < 1 - EPS * m->p.decode_tps)
        return 0;
    int k = (int)floor(into + EPS * m->p.decode_tps);
    return k >= r->gen ? r->gen - 1 : k;   /* the last one comes with done */
}

double drv_llm_wake_at(const drv_llm_t *m, const drv_llm_req_t *r, int k)
{
    if (r->done)
        return m->last;
    double f = speed_factor(m), at = HUGE_VAL;
    for (int i = 0; i < m->n; i++) {   /* the next departure */
        double t = m->last + (m->batch[i]->v_done - m->v) * f;
        if (t < at)
            at = t;
    }
    if (r->admitted) {
        if (k > r->gen)
            k = r->gen;
        double vt = r->v0 + r->prompt / m->p.prefill_tps + k / m->p.decode_tps;
        double t = m->last + (vt - m->v) * f;
        if (t < at)
            at = t;
    }
    return at < m->last ? m->last : at;
}

int drv_llm_running(const drv_llm_t *m)
{
    return m->n;
}

int drv_llm_waiting(const drv_llm_t *m)
{
    return m->n_wait;
}
