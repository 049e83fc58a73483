/* jq_fast.c — the tests' shortcut for jq's most common calls: the same
 * answer as jq 1.6, byte for byte, in a process that starts in about a
 * millisecond (jq 1.6 compiles its builtins at every start: ~30 ms of CPU,
 * and a suite starts it some 5,000 times). t/lib/common.bash makes `jq` a
 * function that runs this; t/jq_fast.sh compares the two.
 *
 * What it answers itself (one JSON value on stdin; options -r, -e, -c,
 * alone or together as -re, -rc...):
 *   PATH                 . or steps .name, [N] (N < 0 from the end), []
 *                        (one [] at most): .status.state, .items[].id, .[0]
 *   PATH // LIT          LIT: "text" (no backslash), an integer, true,
 *                        false, null, empty, {}, []   (no [] in PATH)
 *   PATH | length, length
 *   PATH == LIT, PATH != LIT                          (no [] in PATH)
 *   the tests' list_all and replicas_ready filters, written exactly as
 *   there (see t/lib/common.bash)
 * Anything else — another option or filter, an input that is not exactly
 * one JSON value jansson takes (duplicate keys, NUL, invalid UTF-8, a
 * literal -0, an integer too big), a step jq would refuse (.x of a number,
 * [] of null), a length of a boolean — is jq's: it runs jq with the same
 * arguments, its input replayed from memory.
 */
#define _GNU_SOURCE
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_STEPS 32
#define LIST_ALL_FILTER "(.next_page_token // \"\"), ((.items // []) | tojson)"
#define READY_FILTER "length == $n and all(.[]; .status.state == \"ready\")"

enum { ST_KEY, ST_INDEX, ST_EACH };
enum { F_PATH, F_ALT, F_LENGTH, F_EQ, F_NE, F_LIST_ALL, F_READY };

typedef struct {
    int kind;
    char *key;
    long index;
} step_t;

typedef struct {
    int raw, exit_status, compact;
    int form;
    step_t steps[MAX_STEPS];
    int nsteps, each;
    json_t *lit;     /* // LIT, == LIT; NULL for `empty` */
    long n;          /* $n of the replicas_ready filter */
} prog_t;

typedef struct {
    char *buf;
    size_t len, cap;
} out_t;

static char **g_argv;
static char *g_in;
static size_t g_in_len;

/* fall back: jq itself, with our arguments and, if read, our input */
static void jq_exec(void)
{
    if (g_in) {
        int p[2];
        if (pipe(p) == 0) {
            pid_t pid = fork();
            if (pid == 0) {
                close(p[0]);
                size_t off = 0;
                while (off < g_in_len) {
                    ssize_t w = write(p[1], g_in + off, g_in_len - off);
                    if (w <= 0)
                        _exit(0);
                    off += (size_t)w;
                }
                _exit(0);
            }
            if (pid > 0) {
                close(p[1]);
                dup2(p[0], 0);
                close(p[0]);
            }
        }
    }
    if (getenv("JQ_FAST_NO_FALLBACK"))   /* t/jq_fast.sh: which path answered */
        _exit(98);
    g_argv[0] = "jq";
    execvp("jq", g_argv);
    perror("jq_fast: exec jq");
    _exit(2);
}

static void put(out_t *o, const char *s, size_t n)
{
    if (o->len + n + 1 > o->cap) {
        o->cap = (o->len + n + 1) * 2;
        o->buf = realloc(o->buf, o->cap);
        if (!o->buf)
            jq_exec();
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
}
static void puts_(out_t *o, const char *s) { put(o, s, strlen(s)); }

/* the digits of D.DDDe±X one unit up or down in the last place; 1 and
 * tmp changed if that reads back as x. At a power of two the doubles
 * around x are closer below than above, so the nearest decimal of a length
 * may miss x where the next one up still reads back as it (2^-24: jq
 * prints 5.960464477539063e-08, not ...0625e-08) */
static int nudge(char *tmp, double x, int dir)
{
    char t[64];
    char *e = strchr(tmp, 'e');
    size_t n = (size_t)(e - tmp);
    if (n >= sizeof t)
        return 0;
    memcpy(t, tmp, strlen(tmp) + 1);
    for (char *c = t + n - 1; c >= t; c--) {
        if (*c == '.')
            continue;
        if (dir > 0 && *c < '9') {
            (*c)++;
            break;
        }
        if (dir < 0 && *c > '0') {
            (*c)--;
            break;
        }
        if (c == t)
            return 0;   /* 9.99e5 up or 0.00 down: a digit more; not needed */
        *c = dir > 0 ? '0' : '9';
    }
    if (t[0] == '0' || strtod(t, NULL) != x)
        return 0;
    memcpy(tmp, t, strlen(t) + 1);
    return 1;
}

/* a number as jq 1.6 prints it (jvp_dtoa_fmt): the shortest digits that
 * read back as the same double; exponent form when the point is 4 or more
 * places before them or more than 15 places after them */
static void put_number(out_t *o, double x)
{
    char tmp[64], digits[32], res[64];
    int p, nd = 0, decpt, i, k = 0;
    if (isnan(x)) {
        puts_(o, "null");
        return;
    }
    if (x > 1.7976931348623157e308)
        x = 1.7976931348623157e308;
    if (x < -1.7976931348623157e308)
        x = -1.7976931348623157e308;
    if (signbit(x))
        res[k++] = '-';
    x = fabs(x);
    if (x == 0) {
        res[k++] = '0';
        put(o, res, (size_t)k);
        return;
    }
    for (p = 0; p < 17; p++) {
        snprintf(tmp, sizeof tmp, "%.*e", p, x);
        if (strtod(tmp, NULL) == x || nudge(tmp, x, 1) || nudge(tmp, x, -1))
            break;
    }
    /* tmp: D[.DDD]e[+-]XX */
    char *e = strchr(tmp, 'e');
    for (char *c = tmp; c < e; c++)
        if (*c >= '0' && *c <= '9')
            digits[nd++] = *c;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = 0;
    decpt = atoi(e + 1) + 1;
    if (decpt <= -4 || decpt > nd + 15) {
        res[k++] = digits[0];
        if (nd > 1) {
            res[k++] = '.';
            for (i = 1; i < nd; i++)
                res[k++] = digits[i];
        }
        k += snprintf(res + k, sizeof res - (size_t)k, "e%c%02d", decpt - 1 < 0 ? '-' : '+',
                      abs(decpt - 1));
    } else if (decpt <= 0) {
        res[k++] = '0';
        res[k++] = '.';
        for (i = 0; i < -decpt; i++)
            res[k++] = '0';
        for (i = 0; i < nd; i++)
            res[k++] = digits[i];
    } else {
        for (i = 0; i < nd || i < decpt; i++) {
            if (i == decpt)
                res[k++] = '.';
            res[k++] = i < nd ? digits[i] : '0';
        }
    }
    put(o, res, (size_t)k);
}

/* a string as jq 1.6 prints it: " and \ escaped, \b \f \n \r \t by name,
 * the other controls and DEL as \u00xx, everything else as is (UTF-8) */
static void put_string(out_t *o, const char *s, size_t n)
{
    char esc[8];
    put(o, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            put(o, esc, 2);
        } else if (c < 0x20 || c == 0x7f) {
            const char *named = c == '\b' ? "\\b" : c == '\f' ? "\\f" : c == '\n' ? "\\n"
                              : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
            if (named) {
                puts_(o, named);
            } else {
                snprintf(esc, sizeof esc, "\\u%04x", c);
                puts_(o, esc);
            }
        } else {
            put(o, (const char *)&s[i], 1);
        }
    }
    put(o, "\"", 1);
}

static void indent(out_t *o, int pretty, int depth)
{
    if (!pretty)
        return;
    put(o, "\n", 1);
    for (int i = 0; i < depth; i++)
        put(o, "  ", 2);
}

static void put_value(out_t *o, json_t *v, int pretty, int depth)
{
    switch (json_typeof(v)) {
    case JSON_NULL: puts_(o, "null"); break;
    case JSON_TRUE: puts_(o, "true"); break;
    case JSON_FALSE: puts_(o, "false"); break;
    case JSON_INTEGER: put_number(o, (double)json_integer_value(v)); break;
    case JSON_REAL: put_number(o, json_real_value(v)); break;
    case JSON_STRING: put_string(o, json_string_value(v), json_string_length(v)); break;
    case JSON_ARRAY: {
        size_t i, n = json_array_size(v);
        if (n == 0) {
            puts_(o, "[]");
            break;
        }
        put(o, "[", 1);
        for (i = 0; i < n; i++) {
            if (i)
                put(o, ",", 1);
            indent(o, pretty, depth + 1);
            put_value(o, json_array_get(v, i), pretty, depth + 1);
        }
        indent(o, pretty, depth);
        put(o, "]", 1);
        break;
    }
    case JSON_OBJECT: {
        const char *key;
        json_t *m;
        int first = 1;
        if (json_object_size(v) == 0) {
            puts_(o, "{}");
            break;
        }
        put(o, "{", 1);
        json_object_foreach(v, key, m) {
            if (!first)
                put(o, ",", 1);
            first = 0;
            indent(o, pretty, depth + 1);
            put_string(o, key, strlen(key));
            put(o, pretty ? ": " : ":", pretty ? 2 : 1);
            put_value(o, m, pretty, depth + 1);
        }
        indent(o, pretty, depth);
        put(o, "}", 1);
        break;
    }
    }
}

/* an output line as jq writes it (-r: a string's bytes as they are) */
static void emit(out_t *o, const prog_t *p, json_t *v)
{
    if (p->raw && json_is_string(v))
        put(o, json_string_value(v), json_string_length(v));
    else
        put_value(o, v, !p->compact, 0);
    put(o, "\n", 1);
}

/* ---- the filter ---------------------------------------------------------- */

static const char *skip_ws(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\n')
        s++;
    return s;
}

/* a path: ".", or one or more steps; returns the end, NULL if not one */
static const char *parse_path(prog_t *p, const char *s)
{
    if (*s != '.')
        return NULL;
    if (s[1] == 0 || s[1] == ' ' || s[1] == '|') {   /* the identity */
        return s + 1;
    }
    while (*s == '.' || *s == '[') {
        if (p->nsteps == MAX_STEPS)
            return NULL;
        step_t *st = &p->steps[p->nsteps];
        if (*s == '.')
            s++;
        if (*s == '[') {
            s++;
            if (*s == ']') {
                if (p->each)
                    return NULL;
                st->kind = ST_EACH;
                p->each = 1;
                s++;
            } else {
                char *end;
                if (!(*s == '-' || (*s >= '0' && *s <= '9')))
                    return NULL;
                st->kind = ST_INDEX;
                st->index = strtol(s, &end, 10);
                if (*end != ']' || end - s > 9)
                    return NULL;
                s = end + 1;
            }
        } else {
            const char *b = s;
            if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
                return NULL;
            while ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
                   *s == '_')
                s++;
            st->kind = ST_KEY;
            st->key = strndup(b, (size_t)(s - b));
        }
        p->nsteps++;
    }
    return s;
}

/* a literal; *is_empty for `empty` */
static const char *parse_lit(prog_t *p, const char *s, int *is_empty)
{
    *is_empty = 0;
    if (*s == '"') {
        const char *e = strchr(s + 1, '"');
        if (!e || memchr(s + 1, '\\', (size_t)(e - s - 1)))
            return NULL;
        for (const char *c = s + 1; c < e; c++)
            if ((unsigned char)*c < 0x20)
                return NULL;
        p->lit = json_stringn(s + 1, (size_t)(e - s - 1));
        return p->lit ? e + 1 : NULL;
    }
    if (*s == '-' || (*s >= '0' && *s <= '9')) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || end - s > 12 || *end == '.' || *end == 'e' || *end == 'E')
            return NULL;
        p->lit = json_integer(v);
        return end;
    }
    static const struct { const char *word; int kind; } words[] = {
        {"true", JSON_TRUE}, {"false", JSON_FALSE}, {"null", JSON_NULL},
        {"empty", -1}, {"{}", JSON_OBJECT}, {"[]", JSON_ARRAY},
    };
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        size_t n = strlen(words[i].word);
        if (strncmp(s, words[i].word, n))
            continue;
        char next = s[n];
        if ((next >= 'a' && next <= 'z') || (next >= 'A' && next <= 'Z') || next == '_' ||
            (next >= '0' && next <= '9'))
            return NULL;
        switch (words[i].kind) {
        case -1: *is_empty = 1; break;
        case JSON_TRUE: p->lit = json_true(); break;
        case JSON_FALSE: p->lit = json_false(); break;
        case JSON_NULL: p->lit = json_null(); break;
        case JSON_OBJECT: p->lit = json_object(); break;
        default: p->lit = json_array(); break;
        }
        return s + n;
    }
    return NULL;
}

static int parse_filter(prog_t *p, const char *f)
{
    const char *s = skip_ws(f);
    int is_empty;
    if (!strcmp(s, "length")) {
        p->form = F_LENGTH;
        return 0;
    }
    s = parse_path(p, s);
    if (!s)
        return -1;
    s = skip_ws(s);
    if (*s == 0) {
        p->form = F_PATH;
        return 0;
    }
    if (*s == '|') {
        s = skip_ws(s + 1);
        if (strncmp(s, "length", 6) || *skip_ws(s + 6) || p->each)
            return -1;
        p->form = F_LENGTH;
        return 0;
    }
    if (p->each)
        return -1;
    if (!strncmp(s, "//", 2))
        p->form = F_ALT;
    else if (!strncmp(s, "==", 2))
        p->form = F_EQ;
    else if (!strncmp(s, "!=", 2))
        p->form = F_NE;
    else
        return -1;
    s = parse_lit(p, skip_ws(s + 2), &is_empty);
    if (!s || *skip_ws(s) || (is_empty && p->form != F_ALT))
        return -1;
    return 0;
}

/* ---- evaluation ------------------------------------------------------------ */

/* walk steps [from, nsteps) from v; calls out for each result; -1: jq
 * would refuse a step (let jq say so) */
static int walk(const prog_t *p, int from, json_t *v, int (*out)(const prog_t *, json_t *, void *),
                void *ctx)
{
    for (int i = from; i < p->nsteps; i++) {
        const step_t *st = &p->steps[i];
        if (st->kind == ST_KEY) {
            if (json_is_null(v))
                continue;
            if (!json_is_object(v))
                return -1;
            v = json_object_get(v, st->key);
            if (!v)
                v = json_null();
        } else if (st->kind == ST_INDEX) {
            if (json_is_null(v))
                continue;
            if (!json_is_array(v))
                return -1;
            long n = (long)json_array_size(v), k = st->index < 0 ? n + st->index : st->index;
            v = k >= 0 && k < n ? json_array_get(v, (size_t)k) : json_null();
        } else {
            if (json_is_array(v)) {
                for (size_t k = 0; k < json_array_size(v); k++)
                    if (walk(p, i + 1, json_array_get(v, k), out, ctx))
                        return -1;
            } else if (json_is_object(v)) {
                const char *key;
                json_t *m;
                json_object_foreach(v, key, m) {
                    if (walk(p, i + 1, m, out, ctx))
                        return -1;
                }
            } else {
                return -1;
            }
            return 0;
        }
    }
    return out(p, v, ctx);
}

typedef struct {
    json_t **all;
    size_t n, cap;
} results_t;

static int collect(const prog_t *p, json_t *v, void *ctx)
{
    (void)p;
    results_t *r = ctx;
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 16;
        r->all = realloc(r->all, r->cap * sizeof *r->all);
        if (!r->all)
            return -1;
    }
    r->all[r->n++] = v;
    return 0;
}

static int truthy(json_t *v) { return v && !json_is_null(v) && !json_is_false(v); }

/* jq's ==: numbers by value, the rest by structure */
static int same(json_t *a, json_t *b)
{
    if (json_is_number(a) && json_is_number(b))
        return json_number_value(a) == json_number_value(b);
    return json_equal(a, b);
}

/* jq's length; -1 where jq refuses (a boolean) */
static int length_of(json_t *v, json_t **res)
{
    switch (json_typeof(v)) {
    case JSON_NULL: *res = json_integer(0); return 0;
    case JSON_ARRAY: *res = json_integer((json_int_t)json_array_size(v)); return 0;
    case JSON_OBJECT: *res = json_integer((json_int_t)json_object_size(v)); return 0;
    case JSON_INTEGER: *res = json_real(fabs((double)json_integer_value(v))); return 0;
    case JSON_REAL: *res = json_real(fabs(json_real_value(v))); return 0;
    case JSON_STRING: {
        const unsigned char *s = (const unsigned char *)json_string_value(v);
        size_t n = json_string_length(v), cps = 0;
        for (size_t i = 0; i < n; i++)
            if ((s[i] & 0xc0) != 0x80)
                cps++;
        *res = json_integer((json_int_t)cps);
        return 0;
    }
    default: return -1;
    }
}

/* run the program on the input; -1: jq's to answer */
static int run(prog_t *p, json_t *in, out_t *o, int *rc)
{
    results_t r = {0};
    json_t *last = NULL, *tmp = NULL;
    int any = 0;
    if (p->form == F_LIST_ALL) {
        if (!json_is_object(in))
            return -1;
        json_t *tok = json_object_get(in, "next_page_token"), *items = json_object_get(in, "items");
        out_t js = {0};
        emit(o, p, truthy(tok) ? tok : (tmp = json_string("")));
        json_decref(tmp);
        if (!truthy(items))
            items = tmp = json_array();
        put_value(&js, items, 0, 0);
        json_decref(tmp);
        tmp = json_stringn(js.buf ? js.buf : "", js.len);
        free(js.buf);
        emit(o, p, tmp);
        last = tmp;
        *rc = p->exit_status && !truthy(last) ? 1 : 0;
        json_decref(tmp);
        return 0;
    }
    if (p->form == F_READY) {
        /* length == $n and all(.[]; .status.state == "ready"); an input
         * where any step of it would fail is jq's, wherever it is */
        json_t *len, *m;
        size_t k;
        if (!json_is_array(in))
            return -1;
        json_array_foreach(in, k, m) {
            json_t *st = json_is_object(m) ? json_object_get(m, "status") : NULL;
            if (!json_is_object(m) && !json_is_null(m))
                return -1;
            if (st && !json_is_object(st) && !json_is_null(st))
                return -1;
        }
        if (length_of(in, &len))
            return -1;
        int ok = json_number_value(len) == (double)p->n;
        json_decref(len);
        json_array_foreach(in, k, m) {
            json_t *st = json_is_object(m) ? json_object_get(m, "status") : NULL;
            json_t *state = json_is_object(st) ? json_object_get(st, "state") : NULL;
            if (!json_is_string(state) || strcmp(json_string_value(state), "ready"))
                ok = 0;
        }
        last = ok ? json_true() : json_false();
        emit(o, p, last);
        *rc = p->exit_status && !ok ? 1 : 0;
        return 0;
    }
    if (p->form == F_LENGTH && p->nsteps == 0) {
        if (length_of(in, &tmp))
            return -1;
        emit(o, p, tmp);
        *rc = 0;
        json_decref(tmp);
        return 0;
    }
    if (walk(p, 0, in, collect, &r)) {
        free(r.all);
        return -1;
    }
    switch (p->form) {
    case F_PATH:
        for (size_t i = 0; i < r.n; i++) {
            emit(o, p, r.all[i]);
            last = r.all[i];
            any = 1;
        }
        break;
    case F_LENGTH:
        if (length_of(r.all[0], &tmp)) {
            free(r.all);
            return -1;
        }
        emit(o, p, tmp);
        json_decref(tmp);
        tmp = NULL;
        any = 1;
        last = json_true();
        break;
    case F_ALT:
        if (truthy(r.all[0])) {
            last = r.all[0];
        } else {
            last = p->lit;   /* NULL: empty */
        }
        if (last) {
            emit(o, p, last);
            any = 1;
        }
        break;
    case F_EQ:
    case F_NE: {
        int eq = same(r.all[0], p->lit);
        last = (p->form == F_EQ) == eq ? json_true() : json_false();
        emit(o, p, last);
        any = 1;
        break;
    }
    }
    free(r.all);
    if (!p->exit_status)
        *rc = 0;
    else if (!any)
        *rc = 4;
    else
        *rc = truthy(last) ? 0 : 1;
    return 0;
}

/* ---- main ------------------------------------------------------------------ */

static void read_input(void)
{
    size_t cap = 65536;
    g_in = malloc(cap);
    if (!g_in)
        jq_exec();
    for (;;) {
        if (g_in_len == cap) {
            char *n = realloc(g_in, cap * 2);
            if (!n)
                jq_exec();
            g_in = n;
            cap *= 2;
        }
        ssize_t r = read(0, g_in + g_in_len, cap - g_in_len);
        if (r < 0)
            jq_exec();
        if (r == 0)
            break;
        g_in_len += (size_t)r;
    }
}

/* a literal -0 in the input (outside strings: "worker-0" is fine): jq
 * prints it as -0, jansson reads 0 */
static int has_minus_zero(void)
{
    int in_string = 0;
    for (size_t i = 0; i < g_in_len; i++) {
        char c = g_in[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = 0;
            continue;
        }
        if (c == '"') {
            in_string = 1;
            continue;
        }
        if (c != '-' || i + 1 >= g_in_len || g_in[i + 1] != '0')
            continue;
        char next = i + 2 < g_in_len ? g_in[i + 2] : 0;
        if (next != '.' && !(next >= '0' && next <= '9'))
            return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    prog_t p = {0};
    const char *filter = NULL;
    int have_n = 0;
    g_argv = argv;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--argjson") && i + 2 < argc && !strcmp(argv[i + 1], "n")) {
            char *end;
            p.n = strtol(argv[i + 2], &end, 10);
            if (*end || end == argv[i + 2] || have_n)
                jq_exec();
            have_n = 1;
            i += 2;
        } else if (a[0] == '-' && a[1] && a[1] != '-') {
            for (const char *c = a + 1; *c; c++) {
                if (*c == 'r')
                    p.raw = 1;
                else if (*c == 'e')
                    p.exit_status = 1;
                else if (*c == 'c')
                    p.compact = 1;
                else
                    jq_exec();
            }
        } else if (a[0] == '-' || filter) {
            jq_exec();
        } else {
            filter = a;
        }
    }
    if (!filter)
        jq_exec();
    if (!strcmp(filter, LIST_ALL_FILTER) && !have_n) {
        p.form = F_LIST_ALL;
    } else if (!strcmp(filter, READY_FILTER) && have_n) {
        p.form = F_READY;
    } else if (have_n || parse_filter(&p, filter)) {
        jq_exec();
    }
    read_input();
    if (has_minus_zero())
        jq_exec();
    json_error_t err;
    json_t *in = json_loadb(g_in, g_in_len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &err);
    if (!in)
        jq_exec();
    out_t o = {0};
    int rc = 0;
    if (run(&p, in, &o, &rc))
        jq_exec();
    if ((o.len && fwrite(o.buf, 1, o.len, stdout) != o.len) || fflush(stdout))
        rc = 2;
    for (int i = 0; i < p.nsteps; i++)
        free(p.steps[i].key);
    json_decref(p.lit);
    json_decref(in);
    free(o.buf);
    free(g_in);
    return rc;
}
