/* jq_fast_eval.c — the filters t/jq_fast answers itself: a subset of jq
 * 1.6's language, parsed into a tree and run as jq runs it (each
 * expression a generator of outputs, in jq's order).
 *
 * The subset: . .name ."name" [N] [EXP] [] (postfix, with or without `?`;
 * no slices);
 * literals (numbers, strings with \" \\ \/ \b \f \n \r \t escapes and
 * \(EXP) interpolation, true false null, [...], {...}); $name; ( );
 * | , // or and == != < <= > >= + -; if-then-elif-else-end; TERM as $x |;
 * length not empty select map keys sort unique add join any all tojson
 * tostring type has first last startswith endswith ltrimstr rtrimstr split
 * ascii_downcase ascii_upcase to_entries keys_unsorted index (of an
 * array) test (plain patterns on ASCII, see regex_plain) contains (of
 * strings). Anything else
 * does not parse;
 * anything jq would stop with an error (a step on the wrong type, a
 * length of a boolean, an unknown $name) ends the run with -1. Either way
 * jq_fast hands the call to jq, which then says what jq says.
 */
#define _GNU_SOURCE
#include "jq_fast.h"

#include <math.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

/* ---- values: jq's order, truth, length, + ------------------------------------ */

static int truthy(json_t *v) { return !json_is_null(v) && !json_is_false(v); }

static int kind_rank(json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_NULL: return 1;
    case JSON_FALSE: return 2;
    case JSON_TRUE: return 3;
    case JSON_INTEGER:
    case JSON_REAL: return 4;
    case JSON_STRING: return 5;
    case JSON_ARRAY: return 6;
    default: return 7;
    }
}

static int key_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* an object's keys, as they come or sorted as jq sorts them (bytes; no
 * NUL in a key) */
static const char **object_keys(json_t *o, int sort, size_t *n)
{
    const char **k = malloc((json_object_size(o) + 1) * sizeof *k), *key;
    json_t *m;
    *n = 0;
    if (!k)
        return NULL;
    json_object_foreach(o, key, m)
        k[(*n)++] = key;
    if (sort)
        qsort(k, *n, sizeof *k, key_cmp);
    return k;
}

/* jq 1.6's jv_cmp: kinds in order null false true number string array
 * object; strings by bytes; arrays element by element; objects by their
 * sorted keys, then by the values under them */
static int cmp(json_t *a, json_t *b)
{
    int r = kind_rank(a) - kind_rank(b);
    if (r)
        return r;
    switch (kind_rank(a)) {
    case 4: {
        double x = json_number_value(a), y = json_number_value(b);
        return x < y ? -1 : x == y ? 0 : 1;
    }
    case 5: {
        size_t la = json_string_length(a), lb = json_string_length(b);
        r = memcmp(json_string_value(a), json_string_value(b), la < lb ? la : lb);
        return r ? r : la < lb ? -1 : la > lb;
    }
    case 6: {
        size_t la = json_array_size(a), lb = json_array_size(b);
        for (size_t i = 0; i < la && i < lb; i++)
            if ((r = cmp(json_array_get(a, i), json_array_get(b, i))))
                return r;
        return la < lb ? -1 : la > lb;
    }
    case 7: {
        size_t na, nb;
        const char **ka = object_keys(a, 1, &na), **kb = object_keys(b, 1, &nb);
        if (!ka || !kb)
            abort();
        for (size_t i = 0; !r && i < na && i < nb; i++)
            r = strcmp(ka[i], kb[i]);
        if (!r)
            r = na < nb ? -1 : na > nb;
        for (size_t i = 0; !r && i < na; i++)
            r = cmp(json_object_get(a, ka[i]), json_object_get(b, ka[i]));
        free(ka);
        free(kb);
        return r;
    }
    default: return 0;
    }
}

/* jq's length; NULL where jq refuses (a boolean) */
static json_t *length_of(json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_NULL: return json_integer(0);
    case JSON_ARRAY: return json_integer((json_int_t)json_array_size(v));
    case JSON_OBJECT: return json_integer((json_int_t)json_object_size(v));
    case JSON_INTEGER:
    case JSON_REAL: return json_real(fabs(json_number_value(v)));
    case JSON_STRING: {
        const unsigned char *s = (const unsigned char *)json_string_value(v);
        size_t n = json_string_length(v), cps = 0;
        for (size_t i = 0; i < n; i++)
            if ((s[i] & 0xc0) != 0x80)
                cps++;
        return json_integer((json_int_t)cps);
    }
    default: return NULL;
    }
}

/* jq's a + b and a - b (numbers only for -); NULL: jq's error */
static json_t *arith(int op, json_t *a, json_t *b)
{
    if (op == N_ADD && json_is_null(a))
        return b;
    if (op == N_ADD && json_is_null(b))
        return a;
    if (json_is_number(a) && json_is_number(b)) {
        double x = json_number_value(a), y = json_number_value(b);
        return json_real(op == N_ADD ? x + y : x - y);   /* NULL if not finite */
    }
    if (op != N_ADD || json_typeof(a) != json_typeof(b))
        return NULL;
    if (json_is_string(a)) {
        size_t la = json_string_length(a), lb = json_string_length(b);
        char *s = malloc(la + lb + 1);
        if (!s)
            return NULL;
        memcpy(s, json_string_value(a), la);
        memcpy(s + la, json_string_value(b), lb);
        return json_stringn_nocheck(s, la + lb);
    }
    if (json_is_array(a)) {
        json_t *r = json_array();
        if (!r || json_array_extend(r, a) || json_array_extend(r, b))
            return NULL;
        return r;
    }
    if (json_is_object(a)) {
        json_t *r = json_copy(a);
        if (!r || json_object_update(r, b))
            return NULL;
        return r;
    }
    return NULL;
}

/* tojson: compact, as jq 1.6 dumps */
static json_t *to_json_string(json_t *v)
{
    jqf_out_t o = {0};
    jqf_put_value(&o, v, 0, 0);
    return json_stringn_nocheck(o.buf ? o.buf : "", o.len);
}

static json_t *to_string(json_t *v) { return json_is_string(v) ? v : to_json_string(v); }

/* ---- running --------------------------------------------------------------- */

typedef int (*emit_fn)(json_t *v, void *ctx);

static int eval(const jqf_node_t *n, json_t *in, const jqf_env_t *env, emit_fn k, void *kc);

/* a generator's outputs gathered into an array */
static int collect_cb(json_t *v, void *ctx) { return json_array_append((json_t *)ctx, v); }

/* the one output of N on IN (NULL: none, several, or an error) */
static json_t *one(const jqf_node_t *n, json_t *in, const jqf_env_t *env)
{
    json_t *all = json_array();
    if (!all || eval(n, in, env, collect_cb, all) || json_array_size(all) != 1)
        return NULL;
    return json_array_get(all, 0);
}

typedef struct {
    const jqf_node_t *n;
    json_t *in, *v;
    const jqf_env_t *env;
    emit_fn k;
    void *kc;
    int stopped, any;
} step_t;

/* .name, [i], [] of one value of the term. jq's errors (a step on the
 * wrong kind) are no output after `?`; what jq answers otherwise than
 * here (a fractional index, an index by an array...) is -1 */
static int step_cb(json_t *t, void *ctx)
{
    step_t *c = ctx;
    const jqf_node_t *n = c->n;
    int jq_error = n->fn ? 0 : -1;
    if (n->op == N_EACH) {
        json_t *m;
        const char *key;
        size_t i;
        int r;
        if (json_is_array(t)) {
            json_array_foreach(t, i, m)
                if ((r = c->k(m, c->kc)))
                    return r;
            return 0;
        }
        if (json_is_object(t)) {
            json_object_foreach(t, key, m)
                if ((r = c->k(m, c->kc)))
                    return r;
            return 0;
        }
        return jq_error;
    }
    json_t *idx = n->op == N_FIELD ? NULL : one(n->b, c->in, c->env);
    if (n->op == N_INDEX && !idx)
        return -1;
    int by_key = !idx || json_is_string(idx), by_number = idx && json_is_number(idx);
    if (!by_key && !by_number)
        return -1;
    if (json_is_null(t))
        return c->k(json_null(), c->kc);
    if (json_is_object(t) && by_key) {
        json_t *v = json_object_get(t, idx ? json_string_value(idx) : n->name);
        return c->k(v ? v : json_null(), c->kc);
    }
    if (json_is_array(t) && by_number) {
        double d = json_number_value(idx);
        if (d != floor(d) || fabs(d) > 1e9)
            return -1;
        long len = (long)json_array_size(t), i = (long)d < 0 ? len + (long)d : (long)d;
        json_t *v = i >= 0 && i < len ? json_array_get(t, (size_t)i) : NULL;
        return c->k(v ? v : json_null(), c->kc);
    }
    return jq_error;
}

static int pipe_cb(json_t *v, void *ctx)
{
    step_t *c = ctx;
    return eval(c->n->b, v, c->env, c->k, c->kc);
}

static int alt_cb(json_t *v, void *ctx)
{
    step_t *c = ctx;
    if (!truthy(v))
        return 0;
    c->any = 1;
    return c->k(v, c->kc);
}

static int bool_cb(json_t *v, void *ctx)
{
    step_t *c = ctx;
    return c->k(truthy(v) ? json_true() : json_false(), c->kc);
}

/* and / or: for each value of the left side, the right side's if needed */
static int andor_cb(json_t *v, void *ctx)
{
    step_t *c = ctx;
    if (c->n->op == N_AND && !truthy(v))
        return c->k(json_false(), c->kc);
    if (c->n->op == N_OR && truthy(v))
        return c->k(json_true(), c->kc);
    return eval(c->n->b, c->in, c->env, bool_cb, c);
}

/* a binary operator: the right side's values outside, the left's inside */
static int binop_left_cb(json_t *l, void *ctx)
{
    step_t *c = ctx;
    json_t *r = c->v, *res;
    int op = c->n->op, d;
    if (op == N_ADD || op == N_SUB) {
        if (!(res = arith(op, l, r)))
            return -1;
        return c->k(res, c->kc);
    }
    d = cmp(l, r);
    int t = op == N_EQ ? d == 0 : op == N_NE ? d != 0 : op == N_LT ? d < 0 : op == N_LE ? d <= 0
          : op == N_GT ? d > 0 : d >= 0;
    return c->k(t ? json_true() : json_false(), c->kc);
}

static int binop_right_cb(json_t *r, void *ctx)
{
    step_t *c = ctx;
    c->v = r;
    return eval(c->n->a, c->in, c->env, binop_left_cb, c);
}

static int if_cb(json_t *v, void *ctx)
{
    step_t *c = ctx;
    return eval(truthy(v) ? c->n->b : c->n->c, c->in, c->env, c->k, c->kc);
}

static int bind_cb(json_t *v, void *ctx)
{
    step_t *c = ctx;
    jqf_env_t e = {c->n->name, v, c->env};
    return eval(c->n->b, c->in, &e, c->k, c->kc);
}

static int select_cb(json_t *v, void *ctx)
{
    step_t *c = ctx;
    return truthy(v) ? c->k(c->in, c->kc) : 0;
}

/* any(g; c) and all(g; c) as jq 1.6 runs them (any(f) is any(.[]; f), any
 * is any(.[]; .)): a foreach over g whose state is the last condition's
 * truth; once a condition decides (true for any, false for all) the next
 * value of g breaks the loop before its condition is asked; the answer is
 * whether exactly one (any) or no (all) condition decided. So the
 * condition's further values for the same element are still asked (jq's
 * error there is jq's; two deciding ones make any false), as is the next
 * value of g. */
typedef struct {
    const jqf_node_t *cond;
    const jqf_env_t *env;
    int any, state, decided, stopped;
} anyall_t;

static int anyall_cond_cb(json_t *v, void *ctx)
{
    anyall_t *a = ctx;
    a->state = truthy(v);
    if (a->state == a->any)
        a->decided++;
    return 0;
}

static int anyall_gen_cb(json_t *x, void *ctx)
{
    anyall_t *a = ctx;
    if (a->state == a->any) {
        a->stopped = 1;
        return 1;
    }
    return eval(a->cond, x, a->env, anyall_cond_cb, a);
}

static int first_cb(json_t *v, void *ctx)
{
    step_t *c = ctx;
    int r = c->k(v, c->kc);
    if (r)
        return r;
    c->stopped = 1;
    return 1;
}

/* the values .[] gives of an array or an object, into an array; NULL: jq's error */
static json_t *elements(json_t *v)
{
    if (json_is_array(v))
        return v;
    if (!json_is_object(v))
        return NULL;
    json_t *a = json_array(), *m;
    const char *key;
    if (!a)
        return NULL;
    json_object_foreach(v, key, m)
        if (json_array_append(a, m))
            return NULL;
    return a;
}

typedef struct {
    json_t *v;
    size_t i;
} sort_item_t;

static int sort_item_cmp(const void *a, const void *b)
{
    const sort_item_t *x = a, *y = b;
    int r = cmp(x->v, y->v);
    return r ? r : x->i < y->i ? -1 : 1;
}

/* sort (stable, as jq's) and unique (the first of each equal run) */
static json_t *sorted(json_t *a, int uniq)
{
    size_t n = json_array_size(a);
    sort_item_t *it = malloc((n + 1) * sizeof *it);
    json_t *r = json_array();
    if (!it || !r)
        return NULL;
    for (size_t i = 0; i < n; i++)
        it[i] = (sort_item_t){json_array_get(a, i), i};
    qsort(it, n, sizeof *it, sort_item_cmp);
    for (size_t i = 0; i < n; i++)
        if (!(uniq && i > 0 && cmp(it[i - 1].v, it[i].v) == 0) && json_array_append(r, it[i].v))
            return NULL;
    free(it);
    return r;
}

/* a string argument's one value (jq's $x) */
static const char *str_arg(const jqf_node_t *n, json_t *in, const jqf_env_t *env, json_t **v)
{
    *v = one(n, in, env);
    return *v && json_is_string(*v) ? json_string_value(*v) : NULL;
}

/* a pattern whose meaning is the same in POSIX's extended syntax and
 * jq's (Oniguruma, Perl syntax) as far as "is there a match" goes, on a
 * subject of ASCII without newlines: literals, escaped punctuation, . ^ $
 * * + ? {N} {N,M} | ( ) and plain [classes]; no \w-like escapes, no (?,
 * no lazy or possessive quantifiers, nothing empty */
static int regex_plain(const char *re)
{
    char prev = '|';   /* what came before: start of the pattern or of a branch */
    for (const char *c = re; *c; prev = *c++) {
        unsigned char u = (unsigned char)*c;
        if (u >= 0x80 || u < 0x20 || *c == '}')
            return 0;
        if (*c == '{') {   /* {N} or {N,M} after something to repeat */
            char *end;
            long lo = strtol(c + 1, &end, 10), hi = lo;
            if (strchr("*+?|(^${}", prev) || !(c[1] >= '0' && c[1] <= '9'))
                return 0;
            if (*end == ',') {
                if (!(end[1] >= '0' && end[1] <= '9'))
                    return 0;
                hi = strtol(end + 1, &end, 10);
            }
            if (*end != '}' || hi < lo || hi > 255 || end[1] == '?' || end[1] == '+')
                return 0;
            c = end;   /* prev becomes '}' */
            continue;
        }
        if (strchr("*+?", *c) && strchr("*+?|(^$}", prev))
            return 0;   /* a quantifier with nothing to repeat, or after another */
        if ((*c == '|' || *c == ')') && (prev == '|' || prev == '('))
            return 0;   /* an empty branch or group */
        if (*c == '(' && c[1] == '?')
            return 0;
        if (*c == '\\') {
            c++;
            if (!*c || !strchr(".[]()*+?|^$\\", *c))
                return 0;
            continue;
        }
        if (*c == '[') {
            c++;
            if (*c == '^')
                c++;
            if (*c == ']' || *c == '-')
                return 0;
            for (; *c != ']'; c++)
                if (!*c || *c == '[' || *c == '\\' || (unsigned char)*c >= 0x80 || (*c == '-' && c[1] == ']'))
                    return 0;
        }
    }
    return prev != '|' && prev != '(';
}

/* test(re) on S: 1 or 0; -1 where the answer is jq's (a pattern or a
 * subject outside the common ground above) */
static int test_regex(const char *re, const char *s, size_t n)
{
    regex_t rx;
    if (!regex_plain(re) || memchr(s, '\n', n) || memchr(s, 0, n))
        return -1;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80)
            return -1;
    if (regcomp(&rx, re, REG_EXTENDED | REG_NOSUB))
        return -1;
    int rc = regexec(&rx, s, 0, NULL, 0);
    regfree(&rx);
    return rc == 0 ? 1 : rc == REG_NOMATCH ? 0 : -1;
}

static int call(const jqf_node_t *n, json_t *in, const jqf_env_t *env, emit_fn k, void *kc)
{
    step_t c = {.n = n, .in = in, .env = env, .k = k, .kc = kc};
    json_t *r = NULL, *a, *m, *arg;
    const char *s, *key;
    size_t i;
    int rc;
    switch (n->fn) {
    case F_LENGTH: r = length_of(in); break;
    case F_NOT: r = truthy(in) ? json_false() : json_true(); break;
    case F_EMPTY: return 0;
    case F_SELECT: return eval(n->a, in, env, select_cb, &c);
    case F_MAP:
        if (!(a = elements(in)) || !(r = json_array()))
            return -1;
        json_array_foreach(a, i, m)
            if (eval(n->a, m, env, collect_cb, r))
                return -1;
        break;
    case F_KEYS:
    case F_KEYS_UNSORTED: {
        /* an object's keys (keys: in jq's order), an array's indices */
        const char **ks = NULL;
        if (json_is_object(in) && !(ks = object_keys(in, n->fn == F_KEYS, &i)))
            return -1;
        if (!ks && !json_is_array(in))
            return -1;
        if (!ks)
            i = json_array_size(in);
        if (!(r = json_array()))
            return -1;
        for (size_t j = 0; j < i; j++)
            if (json_array_append_new(r, ks ? json_string_nocheck(ks[j]) : json_integer((json_int_t)j)))
                return -1;
        free(ks);
        break;
    }
    case F_SORT:
    case F_UNIQUE:
        if (json_is_array(in))
            r = sorted(in, n->fn == F_UNIQUE);
        break;
    case F_ADD:
        if (!(a = elements(in)))
            return -1;
        r = json_null();
        json_array_foreach(a, i, m)
            if (!(r = arith(N_ADD, r, m)))
                return -1;
        break;
    case F_JOIN: {
        /* 1.6: reduce .[] as $i (null; (if .==null then "" else .+$x end)
         * + ($i | if .==null then "" elif type=="string" then . else tojson end)) // "" */
        jqf_out_t o = {0};
        if (!(s = str_arg(n->a, in, env, &arg)) || !(a = elements(in)))
            return -1;
        json_array_foreach(a, i, m) {
            if (i)
                jqf_put(&o, s, json_string_length(arg));
            if (json_is_string(m))
                jqf_put(&o, json_string_value(m), json_string_length(m));
            else if (json_is_number(m) || json_is_boolean(m))
                jqf_put_value(&o, m, 0, 0);
            else if (!json_is_null(m))
                return -1;
        }
        r = json_stringn_nocheck(o.buf ? o.buf : "", o.len);
        break;
    }
    case F_ANY0:
    case F_ALL0:
    case F_ANY1:
    case F_ALL1:
    case F_ANY2:
    case F_ALL2: {
        static const jqf_node_t dot = {.op = N_DOT}, each = {.op = N_EACH, .a = (jqf_node_t *)&dot};
        int any = n->fn == F_ANY0 || n->fn == F_ANY1 || n->fn == F_ANY2;
        int two = n->fn == F_ANY2 || n->fn == F_ALL2;
        anyall_t g = {.cond = two ? n->b : n->a ? n->a : &dot, .env = env, .any = any, .state = !any};
        rc = eval(two ? n->a : &each, in, env, anyall_gen_cb, &g);
        if (rc && !(rc == 1 && g.stopped))
            return -1;
        r = (any ? g.decided == 1 : g.decided == 0) ? json_true() : json_false();
        break;
    }
    case F_TOJSON: r = to_json_string(in); break;
    case F_TOSTRING: r = to_string(in); break;
    case F_TYPE: {
        static const char *const names[] = {"", "null", "boolean", "boolean", "number", "string",
                                            "array", "object"};
        r = json_string(names[kind_rank(in)]);
        break;
    }
    case F_HAS:
        if (!(arg = one(n->a, in, env)))
            return -1;
        if (json_is_object(in) && json_is_string(arg))
            r = json_object_get(in, json_string_value(arg)) ? json_true() : json_false();
        else if (json_is_array(in) && json_is_number(arg) &&
                 json_number_value(arg) == floor(json_number_value(arg)))
            r = json_number_value(arg) >= 0 && json_number_value(arg) < (double)json_array_size(in)
                ? json_true() : json_false();
        break;
    case F_FIRST0:
    case F_LAST0:
        if (json_is_null(in)) {
            r = json_null();
        } else if (json_is_array(in)) {
            i = json_array_size(in);
            r = i == 0 ? json_null() : json_array_get(in, n->fn == F_FIRST0 ? 0 : i - 1);
        }
        break;
    case F_FIRST1:
        rc = eval(n->a, in, env, first_cb, &c);
        return rc == 1 && c.stopped ? 0 : rc;
    case F_STARTSWITH:
    case F_ENDSWITH:
    case F_LTRIMSTR:
    case F_RTRIMSTR: {
        int start = n->fn == F_STARTSWITH || n->fn == F_LTRIMSTR;
        int trim = n->fn == F_LTRIMSTR || n->fn == F_RTRIMSTR;
        s = str_arg(n->a, in, env, &arg);
        if (!s || !json_is_string(in)) {
            if (trim && arg) {   /* ltrimstr of a non-string: the input as it is */
                r = in;
                break;
            }
            return -1;
        }
        size_t ls = json_string_length(arg), li = json_string_length(in);
        const char *v = json_string_value(in);
        int match = ls <= li && !memcmp(start ? v : v + li - ls, s, ls);
        if (!trim)
            r = match ? json_true() : json_false();
        else
            r = !match ? in : json_stringn_nocheck(start ? v + ls : v, li - ls);
        break;
    }
    case F_SPLIT: {
        s = str_arg(n->a, in, env, &arg);
        size_t ls = s ? json_string_length(arg) : 0, li;
        if (!s || !ls || !json_is_string(in) || !(r = json_array()))
            return -1;
        const char *v = json_string_value(in), *p;
        li = json_string_length(in);
        if (li == 0)
            break;
        while ((p = memmem(v, li, s, ls))) {
            if (json_array_append_new(r, json_stringn_nocheck(v, (size_t)(p - v))))
                return -1;
            li -= (size_t)(p - v) + ls;
            v = p + ls;
        }
        if (json_array_append_new(r, json_stringn_nocheck(v, li)))
            return -1;
        break;
    }
    case F_DOWNCASE:
    case F_UPCASE: {
        if (!json_is_string(in))
            return -1;
        char *t = strndup(json_string_value(in), json_string_length(in));
        if (!t)
            return -1;
        for (char *q = t; *q; q++)
            if (n->fn == F_DOWNCASE ? (*q >= 'A' && *q <= 'Z') : (*q >= 'a' && *q <= 'z'))
                *q ^= 0x20;
        r = json_stringn_nocheck(t, json_string_length(in));
        break;
    }
    case F_INDEX:
        /* 1.6: indices($i) | .[0]; of an array, by a value not an array:
         * where an element equals it */
        if (!json_is_array(in) || !(arg = one(n->a, in, env)) || json_is_array(arg))
            return -1;
        r = json_null();
        json_array_foreach(in, i, m) {
            if (cmp(m, arg) == 0) {
                r = json_integer((json_int_t)i);
                break;
            }
        }
        break;
    case F_TEST:
        if (!(s = str_arg(n->a, in, env, &arg)) || !json_is_string(in))
            return -1;
        if ((rc = test_regex(s, json_string_value(in), json_string_length(in))) < 0)
            return -1;
        r = rc ? json_true() : json_false();
        break;
    case F_CONTAINS:
        /* of strings: a substring (1.6: strstr); of other kinds: jq's */
        if (!json_is_string(in) || !(s = str_arg(n->a, in, env, &arg)))
            return -1;
        r = memmem(json_string_value(in), json_string_length(in), s, json_string_length(arg))
            ? json_true() : json_false();
        break;
    case F_TO_ENTRIES:
        if (!json_is_object(in) || !(r = json_array()))
            return -1;
        json_object_foreach(in, key, m)
            if (json_array_append_new(r, json_pack("{s:s,s:O}", "key", key, "value", m)))
                return -1;
        break;
    }
    return r ? k(r, kc) : -1;
}

static int eval(const jqf_node_t *n, json_t *in, const jqf_env_t *env, emit_fn k, void *kc)
{
    step_t c = {.n = n, .in = in, .env = env, .k = k, .kc = kc};
    json_t *r;
    int rc;
    switch (n->op) {
    case N_DOT: return k(in, kc);
    case N_LIT: return k(n->lit, kc);
    case N_VAR:
        for (; env; env = env->next)
            if (!strcmp(env->name, n->name))
                return k(env->value, kc);
        return -1;
    case N_FIELD:
    case N_INDEX:
    case N_EACH: return eval(n->a, in, env, step_cb, &c);
    case N_PIPE: return eval(n->a, in, env, pipe_cb, &c);
    case N_COMMA: return (rc = eval(n->a, in, env, k, kc)) ? rc : eval(n->b, in, env, k, kc);
    case N_ALT:
        if ((rc = eval(n->a, in, env, alt_cb, &c)))
            return rc;
        return c.any ? 0 : eval(n->b, in, env, k, kc);
    case N_AND:
    case N_OR: return eval(n->a, in, env, andor_cb, &c);
    case N_EQ: case N_NE: case N_LT: case N_LE: case N_GT: case N_GE: case N_ADD: case N_SUB:
        return eval(n->b, in, env, binop_right_cb, &c);
    case N_COLLECT:
        if (!(r = json_array()) || eval(n->a, in, env, collect_cb, r))
            return -1;
        return k(r, kc);
    case N_OBJECT:
        if (!(r = json_object()))
            return -1;
        for (int i = 0; i < n->n; i++) {
            json_t *v = one(n->vals[i], in, env);
            if (!v || json_object_set(r, json_string_value(n->keys[i]->lit), v))
                return -1;
        }
        return k(r, kc);
    case N_IF: return eval(n->a, in, env, if_cb, &c);
    case N_BIND: return eval(n->a, in, env, bind_cb, &c);
    case N_STR: {
        jqf_out_t o = {0};
        for (int i = 0; i < n->n; i++) {
            json_t *v = one(n->vals[i], in, env);
            if (!v || !(v = to_string(v)))
                return -1;
            jqf_put(&o, json_string_value(v), json_string_length(v));
        }
        return k(json_stringn_nocheck(o.buf ? o.buf : "", o.len), kc);
    }
    case N_CALL: return call(n, in, env, k, kc);
    }
    return -1;
}

int jqf_run(const jqf_node_t *n, json_t *in, const jqf_env_t *env,
            int (*emit)(json_t *v, void *ctx), void *ctx)
{
    return eval(n, in, env, emit, ctx) ? -1 : 0;
}
