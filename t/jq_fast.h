/* jq_fast.h — what t/jq_fast's three files share: jq_fast.c (options,
 * input, jq 1.6's printing, the hand-over to jq), jq_fast_parse.c (the
 * filter read into a tree) and jq_fast_eval.c (the tree run). */
#ifndef JQ_FAST_H
#define JQ_FAST_H

#include <jansson.h>
#include <stddef.h>

/* a growing output buffer */
typedef struct {
    char *buf;
    size_t len, cap;
} jqf_out_t;

/* a named value: --arg / --argjson, and `EXP as $name | ...` */
typedef struct jqf_env {
    const char *name;
    json_t *value;
    const struct jqf_env *next;
} jqf_env_t;

typedef struct jqf_node jqf_node_t;

/* a node of the filter's tree: what it does (op; fn for N_CALL) */
enum {
    N_DOT, N_FIELD, N_INDEX, N_EACH, N_LIT, N_VAR, N_PIPE, N_COMMA, N_ALT, N_AND, N_OR,
    N_EQ, N_NE, N_LT, N_LE, N_GT, N_GE, N_ADD, N_SUB, N_COLLECT, N_OBJECT, N_IF, N_BIND,
    N_STR, N_CALL
};

enum {
    F_LENGTH, F_NOT, F_EMPTY, F_SELECT, F_MAP, F_KEYS, F_SORT, F_UNIQUE, F_ADD, F_JOIN,
    F_ANY0, F_ALL0, F_ANY1, F_ALL1, F_ANY2, F_ALL2, F_TOJSON, F_TOSTRING, F_TYPE, F_HAS,
    F_FIRST0, F_LAST0, F_FIRST1, F_STARTSWITH, F_ENDSWITH, F_LTRIMSTR, F_RTRIMSTR, F_SPLIT,
    F_DOWNCASE, F_UPCASE, F_TO_ENTRIES, F_KEYS_UNSORTED, F_INDEX, F_TEST, F_CONTAINS
};

struct jqf_node {
    int op, fn;              /* fn: N_CALL's function; a step's `?` (1) */
    jqf_node_t *a, *b, *c;   /* operands: a OP b; if a then b else c; f(a; b) */
    json_t *lit;          /* N_LIT */
    char *name;           /* N_FIELD key, N_VAR / N_BIND name */
    int n;                /* N_OBJECT pairs, N_STR parts */
    jqf_node_t **keys, **vals;
};

/* the filter's tree; NULL where it is not in the subset jq_fast answers */
jqf_node_t *jqf_parse(const char *filter);

/* each output of the filter on IN to EMIT(value, ctx) (borrowed: keep a
 * reference to hold it); 0 when it ran to the end, -1 where jq would
 * report an error (or the subset ends): jq's to answer */
int jqf_run(const jqf_node_t *n, json_t *in, const jqf_env_t *env,
            int (*emit)(json_t *v, void *ctx), void *ctx);

/* a value as jq 1.6 prints it; pretty: jq's two-space indent */
void jqf_put_value(jqf_out_t *o, json_t *v, int pretty, int depth);
/* bytes to the buffer; exits to jq when memory runs out */
void jqf_put(jqf_out_t *o, const char *s, size_t n);

#endif
