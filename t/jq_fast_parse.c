/* jq_fast_parse.c — t/jq_fast's filter read into a tree (jq_fast.h's
 * jqf_node_t) for t/jq_fast_eval.c to run: the subset of jq 1.6's grammar
 * listed there, with jq's precedence (| lowest, then ",", "//", or, and,
 * the comparisons, + -, postfix steps). Anything else, or any text left
 * over, is no tree (NULL): jq_fast hands the call to jq.
 */
#define _GNU_SOURCE
#include "jq_fast.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    int nargs, fn;
} g_fns[] = {
    {"length", 0, F_LENGTH}, {"not", 0, F_NOT}, {"empty", 0, F_EMPTY},
    {"select", 1, F_SELECT}, {"map", 1, F_MAP}, {"keys", 0, F_KEYS}, {"sort", 0, F_SORT},
    {"unique", 0, F_UNIQUE}, {"add", 0, F_ADD}, {"join", 1, F_JOIN}, {"any", 0, F_ANY0},
    {"all", 0, F_ALL0}, {"any", 1, F_ANY1}, {"all", 1, F_ALL1}, {"any", 2, F_ANY2},
    {"all", 2, F_ALL2}, {"tojson", 0, F_TOJSON}, {"tostring", 0, F_TOSTRING},
    {"type", 0, F_TYPE}, {"has", 1, F_HAS}, {"first", 0, F_FIRST0}, {"last", 0, F_LAST0},
    {"first", 1, F_FIRST1}, {"startswith", 1, F_STARTSWITH}, {"endswith", 1, F_ENDSWITH},
    {"ltrimstr", 1, F_LTRIMSTR}, {"rtrimstr", 1, F_RTRIMSTR}, {"split", 1, F_SPLIT},
    {"ascii_downcase", 0, F_DOWNCASE}, {"ascii_upcase", 0, F_UPCASE},
    {"to_entries", 0, F_TO_ENTRIES}, {"keys_unsorted", 0, F_KEYS_UNSORTED},
    {"index", 1, F_INDEX}, {"test", 1, F_TEST}, {"contains", 1, F_CONTAINS},
};

/* jq 1.6's keywords: never a function's name here */
static const char *const g_keywords[] = {
    "and", "or", "then", "elif", "else", "end", "as", "def", "reduce", "foreach", "try",
    "catch", "label", "import", "include", "__loc__", NULL,
};

/* ---- parsing ---------------------------------------------------------------- */

typedef struct {
    const char *s;
} parser_t;

static jqf_node_t *p_pipe(parser_t *p);
static jqf_node_t *p_postfix(parser_t *p);

static jqf_node_t *mk(int op, jqf_node_t *a, jqf_node_t *b)
{
    jqf_node_t *n = calloc(1, sizeof *n);
    if (n) {
        n->op = op;
        n->a = a;
        n->b = b;
    }
    return n;
}

static void ws(parser_t *p)
{
    while (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r')
        p->s++;
}

static int id_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int id_char(char c) { return id_start(c) || (c >= '0' && c <= '9'); }

/* the operator T at the cursor, not the start of a longer one (| not |=,
 * // not //=, + not +=, < not <=) */
static int sym(parser_t *p, const char *t)
{
    ws(p);
    size_t n = strlen(t);
    if (strncmp(p->s, t, n))
        return 0;
    if (p->s[n] == '=' && strchr("|/+-<>", t[n - 1]))
        return 0;
    p->s += n;
    return 1;
}

/* the keyword W at the cursor */
static int word(parser_t *p, const char *w)
{
    ws(p);
    size_t n = strlen(w);
    if (strncmp(p->s, w, n) || id_char(p->s[n]))
        return 0;
    p->s += n;
    return 1;
}

/* an identifier at the cursor, copied (NULL if none) */
static char *ident(parser_t *p)
{
    const char *b = p->s;
    if (!id_start(*p->s))
        return NULL;
    while (id_char(*p->s))
        p->s++;
    if (*p->s == ':' && p->s[1] == ':')   /* a module's name */
        return NULL;
    return strndup(b, (size_t)(p->s - b));
}

/* a string literal at the cursor ("), with \(EXP) parts when interp; a
 * plain string is an N_LIT */
static jqf_node_t *p_string(parser_t *p, int interp)
{
    jqf_node_t *n = mk(N_STR, NULL, NULL);
    char *buf = malloc(strlen(p->s) + 1);
    size_t len = 0;
    if (!n || !buf || *p->s != '"')
        return NULL;
    p->s++;
    n->vals = calloc(strlen(p->s) + 1, sizeof *n->vals);
    if (!n->vals)
        return NULL;
    for (;;) {
        char c = *p->s++;
        if (c == 0 || (unsigned char)c < 0x20)
            return NULL;
        if (c == '"')
            break;
        if (c != '\\') {
            buf[len++] = c;
            continue;
        }
        c = *p->s++;
        const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t", *k = c ? strchr(from, c) : NULL;
        if (k) {
            buf[len++] = to[k - from];
        } else if (c == '(' && interp) {
            if (len) {
                jqf_node_t *lit = mk(N_LIT, NULL, NULL);
                if (!lit || !(lit->lit = json_stringn(buf, len)))
                    return NULL;
                n->vals[n->n++] = lit;
                len = 0;
            }
            jqf_node_t *e = p_pipe(p);
            if (!e || !sym(p, ")"))
                return NULL;
            n->vals[n->n++] = e;
        } else {
            return NULL;   /* \u, or an escape jq refuses */
        }
    }
    json_t *s = json_stringn(buf, len);
    free(buf);
    if (!s)
        return NULL;   /* not UTF-8 */
    if (n->n == 0) {
        n->op = N_LIT;
        n->lit = s;
        return n;
    }
    if (len) {
        jqf_node_t *lit = mk(N_LIT, NULL, NULL);
        if (!lit)
            return NULL;
        lit->lit = s;
        n->vals[n->n++] = lit;
    }
    return n;
}

/* { key: TERM, key, "key": TERM, $name, ... } (values: terms, piped) */
static jqf_node_t *p_object(parser_t *p)
{
    jqf_node_t *n = mk(N_OBJECT, NULL, NULL);
    size_t cap = strlen(p->s) + 1;
    if (!n || !(n->keys = calloc(cap, sizeof *n->keys)) || !(n->vals = calloc(cap, sizeof *n->vals)))
        return NULL;
    p->s++;   /* { */
    if (sym(p, "}"))
        return n;
    do {
        jqf_node_t *key = mk(N_LIT, NULL, NULL), *val = NULL;
        char *name = NULL;
        int var = 0;
        if (!key)
            return NULL;
        ws(p);
        if (*p->s == '$') {
            p->s++;
            var = 1;
        }
        if (*p->s == '"' && !var) {
            jqf_node_t *s = p_string(p, 0);
            if (!s || s->op != N_LIT)
                return NULL;
            name = strdup(json_string_value(s->lit));
        } else if (!(name = ident(p))) {
            return NULL;
        }
        for (int i = 0; g_keywords[i]; i++)
            if (!strcmp(name, g_keywords[i]))
                return NULL;
        key->lit = json_string(name);
        if (var) {
            val = mk(N_VAR, NULL, NULL);
            if (!val)
                return NULL;
            val->name = name;
        } else if (sym(p, ":")) {
            val = p_postfix(p);
            while (val && sym(p, "|")) {
                jqf_node_t *b = p_postfix(p);
                val = b ? mk(N_PIPE, val, b) : NULL;
            }
            if (!val)
                return NULL;
        } else {
            val = mk(N_FIELD, mk(N_DOT, NULL, NULL), NULL);
            if (!val || !val->a)
                return NULL;
            val->name = name;
        }
        if (!key->lit)
            return NULL;
        n->keys[n->n] = key;
        n->vals[n->n++] = val;
    } while (sym(p, ","));
    return sym(p, "}") ? n : NULL;
}

/* .name or ."name" of T, the cursor on the dot */
static jqf_node_t *p_field(parser_t *p, jqf_node_t *t)
{
    jqf_node_t *f = mk(N_FIELD, t, NULL);
    if (!f || !t)
        return NULL;
    p->s++;
    if (*p->s == '"') {
        jqf_node_t *k = p_string(p, 0);
        if (!k || k->op != N_LIT)
            return NULL;
        f->name = strdup(json_string_value(k->lit));
    } else {
        f->name = ident(p);
    }
    return f->name ? f : NULL;
}

/* if C then A (elif C then A)* else B end; after `if` */
static jqf_node_t *p_if(parser_t *p)
{
    jqf_node_t *n = mk(N_IF, NULL, NULL);
    if (!n || !(n->a = p_pipe(p)) || !word(p, "then") || !(n->b = p_pipe(p)))
        return NULL;
    if (word(p, "elif"))
        return (n->c = p_if(p)) ? n : NULL;
    if (!word(p, "else") || !(n->c = p_pipe(p)) || !word(p, "end"))
        return NULL;
    return n;
}

static jqf_node_t *p_term(parser_t *p)
{
    jqf_node_t *n;
    ws(p);
    const char *s = p->s;
    if (*s == '.') {
        if (s[1] == '.')
            return NULL;
        n = mk(N_DOT, NULL, NULL);
        if (id_start(s[1]) || s[1] == '"')
            return p_field(p, n);
        p->s++;
        return n;
    }
    if ((*s >= '0' && *s <= '9') || (*s == '-' && s[1] >= '0' && s[1] <= '9')) {
        const char *b = s + (*s == '-');
        while (*b >= '0' && *b <= '9')
            b++;
        if (*b == '.') {
            b++;
            if (!(*b >= '0' && *b <= '9'))
                return NULL;
            while (*b >= '0' && *b <= '9')
                b++;
        }
        if (*b == 'e' || *b == 'E') {
            b++;
            if (*b == '+' || *b == '-')
                b++;
            if (!(*b >= '0' && *b <= '9'))
                return NULL;
            while (*b >= '0' && *b <= '9')
                b++;
        }
        if (id_char(*b) || *b == '.')
            return NULL;
        double v = strtod(s, NULL);
        if (!isfinite(v) || (v == 0 && *s == '-'))
            return NULL;
        n = mk(N_LIT, NULL, NULL);
        if (!n || !(n->lit = json_real(v)))
            return NULL;
        p->s = b;
        return n;
    }
    if (*s == '"')
        return p_string(p, 1);
    if (*s == '$') {
        p->s++;
        n = mk(N_VAR, NULL, NULL);
        if (!n || !(n->name = ident(p)) || !strcmp(n->name, "__loc__"))
            return NULL;
        return n;
    }
    if (*s == '(') {
        p->s++;
        n = p_pipe(p);
        return n && sym(p, ")") ? n : NULL;
    }
    if (*s == '[') {
        p->s++;
        if (sym(p, "]")) {
            n = mk(N_LIT, NULL, NULL);
            return n && (n->lit = json_array()) ? n : NULL;
        }
        n = mk(N_COLLECT, p_pipe(p), NULL);
        return n && n->a && sym(p, "]") ? n : NULL;
    }
    if (*s == '{')
        return p_object(p);
    char *name = ident(p);
    if (!name)
        return NULL;
    if (!strcmp(name, "true") || !strcmp(name, "false") || !strcmp(name, "null")) {
        n = mk(N_LIT, NULL, NULL);
        if (n)
            n->lit = name[0] == 't' ? json_true() : name[0] == 'f' ? json_false() : json_null();
        return n;
    }
    if (!strcmp(name, "if"))
        return p_if(p);
    for (int i = 0; g_keywords[i]; i++)
        if (!strcmp(name, g_keywords[i]))
            return NULL;
    jqf_node_t *args[2] = {NULL, NULL};
    int nargs = 0;
    if (sym(p, "(")) {
        do {
            if (nargs == 2 || !(args[nargs++] = p_pipe(p)))
                return NULL;
        } while (sym(p, ";"));
        if (!sym(p, ")"))
            return NULL;
    }
    for (size_t i = 0; i < sizeof g_fns / sizeof g_fns[0]; i++) {
        if (!strcmp(g_fns[i].name, name) && g_fns[i].nargs == nargs) {
            n = mk(N_CALL, args[0], args[1]);
            if (n)
                n->fn = g_fns[i].fn;
            return n;
        }
    }
    return NULL;
}

/* TERM followed by .name ."name" [EXP] [], each maybe with `?` (jq 1.6:
 * the step's own error is no output), no space before them */
static jqf_node_t *p_postfix(parser_t *p)
{
    ws(p);
    int step = *p->s == '.';   /* `?` may follow: a step, not a (term) */
    jqf_node_t *t = p_term(p);
    while (t && t->op != N_IF) {
        const char *s = p->s;
        if (s[0] == '?' && step && (t->op == N_FIELD || t->op == N_INDEX || t->op == N_EACH) &&
            !t->fn) {
            p->s++;
            t->fn = 1;
            continue;
        }
        if (s[0] == '.' && (id_start(s[1]) || s[1] == '"')) {
            t = p_field(p, t);
        } else if (s[0] == '[') {
            p->s++;
            if (sym(p, "]")) {
                t = mk(N_EACH, t, NULL);
            } else {
                jqf_node_t *i = p_pipe(p);
                if (!i || !sym(p, "]"))
                    return NULL;
                t = mk(N_INDEX, t, i);
            }
        } else if (s[0] == '?' || (s[0] == '.' && s[1] == '[')) {
            return NULL;
        } else {
            break;
        }
        step = 1;
    }
    return t;
}

static jqf_node_t *p_add(parser_t *p)
{
    jqf_node_t *a = p_postfix(p);
    while (a) {
        int op = sym(p, "+") ? N_ADD : sym(p, "-") ? N_SUB : -1;
        if (op < 0)
            break;
        jqf_node_t *b = p_postfix(p);
        a = b ? mk(op, a, b) : NULL;
    }
    return a;
}

static jqf_node_t *p_cmp(parser_t *p)
{
    static const struct { const char *t; int op; } ops[] = {
        {"==", N_EQ}, {"!=", N_NE}, {"<=", N_LE}, {">=", N_GE}, {"<", N_LT}, {">", N_GT},
    };
    jqf_node_t *a = p_add(p);
    if (!a)
        return NULL;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        if (sym(p, ops[i].t)) {
            jqf_node_t *b = p_add(p);
            return b ? mk(ops[i].op, a, b) : NULL;
        }
    }
    return a;
}

/* NEXT (KEYWORD NEXT)*, left to right: and, or */
static jqf_node_t *p_left(parser_t *p, jqf_node_t *(*next)(parser_t *), const char *kw, int op)
{
    jqf_node_t *a = next(p);
    while (a && word(p, kw)) {
        jqf_node_t *b = next(p);
        a = b ? mk(op, a, b) : NULL;
    }
    return a;
}

static jqf_node_t *p_and(parser_t *p) { return p_left(p, p_cmp, "and", N_AND); }
static jqf_node_t *p_or(parser_t *p) { return p_left(p, p_and, "or", N_OR); }

static jqf_node_t *p_alt(parser_t *p)
{
    jqf_node_t *a = p_or(p);
    if (a && sym(p, "//")) {
        jqf_node_t *b = p_alt(p);
        return b ? mk(N_ALT, a, b) : NULL;
    }
    return a;
}

static jqf_node_t *p_comma(parser_t *p)
{
    jqf_node_t *a = p_alt(p);
    while (a && sym(p, ",")) {
        jqf_node_t *b = p_alt(p);
        a = b ? mk(N_COMMA, a, b) : NULL;
    }
    return a;
}

/* a node jq's grammar reads as a Term (what `as` may follow) */
static int is_term(const jqf_node_t *n)
{
    switch (n->op) {
    case N_DOT: case N_FIELD: case N_INDEX: case N_EACH: case N_LIT: case N_VAR:
    case N_COLLECT: case N_OBJECT: case N_STR: case N_CALL:
        return 1;
    default:
        return 0;
    }
}

/* COMMA (| PIPE)?, or TERM as $name | PIPE (the binding reaches to the end) */
static jqf_node_t *p_pipe(parser_t *p)
{
    jqf_node_t *a = p_comma(p);
    if (a && word(p, "as")) {
        jqf_node_t *n = mk(N_BIND, a, NULL);
        ws(p);
        if (!n || !is_term(a) || *p->s != '$')
            return NULL;
        p->s++;
        if (!(n->name = ident(p)) || !sym(p, "|") || !(n->b = p_pipe(p)))
            return NULL;
        return n;
    }
    if (a && sym(p, "|")) {
        jqf_node_t *b = p_pipe(p);
        return b ? mk(N_PIPE, a, b) : NULL;
    }
    return a;
}

jqf_node_t *jqf_parse(const char *filter)
{
    parser_t p = {filter};
    jqf_node_t *n = p_pipe(&p);
    ws(&p);
    return n && *p.s == 0 ? n : NULL;
}

