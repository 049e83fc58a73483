/* llm_model.h — the serving simulator's service model for one replica, on
 * a clock the caller passes in: drover-demo-model's LLM emulator
 * (--prefill-tps ...) runs it on the wall clock, t/unit/test_llm_load.c on
 * a virtual one.
 *
 * The model is src/sim/serve_model.c's, exactly: the replica serves its
 * requests as processor sharing, with a virtual time V advancing at
 * 1 / (1 + batch_slowdown (n - 1)) per second while n requests are in
 * flight; a request admitted at V0 has its first token at V0 + prefill +
 * one decode step (prefill = prompt / prefill_tps, a step = 1 /
 * decode_tps), its k-th token at V0 + prefill + k steps, and is done (and
 * leaves the batch) at V0 + prefill + gen steps. At most max_concurrency
 * are in flight; the others wait in FIFO order and are admitted, with V0
 * the V of that moment, as one leaves.
 *
 * Pure and single-threaded: no clock is read, nothing blocks; the caller
 * holds its own lock. Times are seconds on the caller's clock (double). */
#ifndef DRV_DEMO_LLM_MODEL_H
#define DRV_DEMO_LLM_MODEL_H

#include <stdbool.h>
#include <stddef.h>

typedef struct drv_llm_params {
    double prefill_tps;          /* prompt tokens per second, a request alone (> 0) */
    double decode_tps;           /* generated tokens per second, one sequence alone (> 0) */
    double batch_slowdown;       /* >= 0 */
    int max_concurrency;         /* >= 1 */
} drv_llm_params_t;

/* One request, owned by the caller (it stays valid until drv_llm_remove or
 * until it is done; the model keeps pointers to it, never frees it). */
typedef struct drv_llm_req {
    double prompt;               /* prompt tokens */
    int gen;                     /* generated tokens (>= 1) */
    /* the model's (read only) */
    bool admitted, done;
    double v0, v_done;           /* virtual times: admitted, done */
    double submitted_at, admitted_at, done_at;   /* the caller's clock */
    struct drv_llm_req *next;    /* the waiting queue */
} drv_llm_req_t;

typedef struct drv_llm drv_llm_t;

/* A replica's model; NULL with a readable message in err for bad params. */
drv_llm_t *drv_llm_create(const drv_llm_params_t *p, char *err, size_t err_len);
void drv_llm_destroy(drv_llm_t *m);

/* Move the model to time now (>= every earlier now): departures on the way
 * happen at their exact times, and free slots admit the waiting. */
void drv_llm_advance(drv_llm_t *m, double now);

/* A new request at now (advances first): admitted at once when a slot is
 * free, else queued. r->prompt and r->gen must be set. */
void drv_llm_submit(drv_llm_t *m, drv_llm_req_t *r, double now);

/* Take r out (its client left): from the batch or from the queue; a done
 * one is already out. Advances to now first. */
void drv_llm_remove(drv_llm_t *m, drv_llm_req_t *r, double now);

/* Tokens r has produced at the model's time (after drv_llm_advance): 0
 * until its first token, r->gen once done. */
int drv_llm_tokens(const drv_llm_t *m, const drv_llm_req_t *r);

/* When r will have k tokens (k in 1..gen) if nothing changes, or sooner:
 * the next departure (which changes the speed, and may admit r), so a
 * caller waiting until the returned time and advancing again follows the
 * model exactly. HUGE_VAL when nothing is in flight and r waits (cannot
 * happen: a waiting request means a full batch). */
double drv_llm_wake_at(const drv_llm_t *m, const drv_llm_req_t *r, int k);

/* The batch and the queue now (/metrics). */
int drv_llm_running(const drv_llm_t *m);
int drv_llm_waiting(const drv_llm_t *m);

#endif
