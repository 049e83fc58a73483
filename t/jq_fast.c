/* jq_fast.c — the tests' shortcut for jq: the same answer as jq 1.6, byte
 * for byte, in a process that starts in about a millisecond (jq 1.6
 * compiles its builtins at every start: ~30 ms of CPU, and a suite starts
 * it some 5,000 times). t/lib/common.bash makes `jq` a function that runs
 * this; t/jq_fast.sh compares the two.
 *
 * This file: the options (-r, -e, -c, -n, alone or together as -re, -rc...;
 * --arg NAME TEXT, --argjson NAME JSON), the input (one JSON value on
 * stdin), jq 1.6's printing, and the hand-over to jq. The filter is read
 * by t/jq_fast_parse.c and run by t/jq_fast_eval.c (the subset of jq's
 * language it answers is listed there).
 * Anything else — another option, a filter outside the subset, an input
 * that is not exactly one JSON value jansson takes (duplicate keys, NUL,
 * invalid UTF-8, a literal -0, an integer too big), a run where jq would
 * stop with an error — is jq's: it runs jq with the same arguments, its
 * input replayed from memory. Output is written only at the end, so a
 * hand-over part way prints nothing of ours.
 */
#define _GNU_SOURCE
#include "jq_fast.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    const char *trace = getenv("JQ_FAST_TRACE");   /* t/jq_fast.sh: which path answered */
    if (trace) {
        int fd = open(trace, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0) {
            if (write(fd, "jq\n", 3) != 3)
                perror("jq_fast: JQ_FAST_TRACE");
            close(fd);
        }
    }
    g_argv[0] = "jq";
    execvp("jq", g_argv);
    perror("jq_fast: exec jq");
    _exit(2);
}

void jqf_put(jqf_out_t *o, const char *s, size_t n)
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
static void puts_(jqf_out_t *o, const char *s) { jqf_put(o, s, strlen(s)); }

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
static void put_number(jqf_out_t *o, double x)
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
        jqf_put(o, res, (size_t)k);
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
    jqf_put(o, res, (size_t)k);
}

/* a string as jq 1.6 prints it: " and \ escaped, \b \f \n \r \t by name,
 * the other controls and DEL as \u00xx, everything else as is (UTF-8) */
static void put_string(jqf_out_t *o, const char *s, size_t n)
{
    char esc[8];
    jqf_put(o, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            jqf_put(o, esc, 2);
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
            jqf_put(o, (const char *)&s[i], 1);
        }
    }
    jqf_put(o, "\"", 1);
}

static void indent(jqf_out_t *o, int pretty, int depth)
{
    if (!pretty)
        return;
    jqf_put(o, "\n", 1);
    for (int i = 0; i < depth; i++)
        jqf_put(o, "  ", 2);
}

void jqf_put_value(jqf_out_t *o, json_t *v, int pretty, int depth)
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
        jqf_put(o, "[", 1);
        for (i = 0; i < n; i++) {
            if (i)
                jqf_put(o, ",", 1);
            indent(o, pretty, depth + 1);
            jqf_put_value(o, json_array_get(v, i), pretty, depth + 1);
        }
        indent(o, pretty, depth);
        jqf_put(o, "]", 1);
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
        jqf_put(o, "{", 1);
        json_object_foreach(v, key, m) {
            if (!first)
                jqf_put(o, ",", 1);
            first = 0;
            indent(o, pretty, depth + 1);
            put_string(o, key, strlen(key));
            jqf_put(o, pretty ? ": " : ":", pretty ? 2 : 1);
            jqf_put_value(o, m, pretty, depth + 1);
        }
        indent(o, pretty, depth);
        jqf_put(o, "}", 1);
        break;
    }
    }
}

/* the options jq_fast takes (-r -e -c -n, alone or together) and the
 * outputs so far */
typedef struct {
    int raw, exit_status, compact, null_input;
    jqf_out_t o;
    json_t *last;   /* the last output (for -e) */
} prog_t;

/* an output line as jq writes it (-r: a string's bytes as they are) */
static int emit(json_t *v, void *ctx)
{
    prog_t *p = ctx;
    if (p->raw && json_is_string(v))
        jqf_put(&p->o, json_string_value(v), json_string_length(v));
    else
        jqf_put_value(&p->o, v, !p->compact, 0);
    jqf_put(&p->o, "\n", 1);
    p->last = v;
    return 0;
}

/* ---- main ------------------------------------------------------------------ */

/* all of FD into *buf (NUL after it); -1 on a read error */
static int read_fd(int fd, char **buf, size_t *len)
{
    size_t cap = 65536;
    *len = 0;
    if (!(*buf = malloc(cap)))
        return -1;
    for (;;) {
        if (*len + 1 >= cap) {
            char *n = realloc(*buf, cap * 2);
            if (!n)
                return -1;
            *buf = n;
            cap *= 2;
        }
        ssize_t r = read(fd, *buf + *len, cap - *len - 1);
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        *len += (size_t)r;
    }
    (*buf)[*len] = 0;
    return 0;
}

static int read_file(const char *path, char **buf, size_t *len)
{
    int fd = open(path, O_RDONLY), rc = fd < 0 ? -1 : read_fd(fd, buf, len);
    if (fd >= 0)
        close(fd);
    return rc;
}

/* a literal -0 in the input (outside strings: "worker-0" is fine): jq
 * prints it as -0, jansson reads 0 */
static int has_minus_zero(const char *in, size_t len)
{
    int in_string = 0;
    for (size_t i = 0; i < len; i++) {
        char c = in[i];
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
        if (c != '-' || i + 1 >= len || in[i + 1] != '0')
            continue;
        char next = i + 2 < len ? in[i + 2] : 0;
        if (next != '.' && !(next >= '0' && next <= '9'))
            return 1;
    }
    return 0;
}

/* the JSON values of BUF, one after another, as jq reads them; NULL
 * where jansson would read otherwise or not at all (jq's to say). One
 * value of any kind, or objects, arrays and strings in a row (where
 * jansson's end of each is sure; a number or a word it reads a byte past) */
static json_t *load_all(const char *buf, size_t len)
{
    json_error_t err;
    json_t *all = json_array(), *v;
    size_t off = 0;
    if (!all || has_minus_zero(buf, len))
        return NULL;
    if ((v = json_loadb(buf, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &err)))
        return json_array_append_new(all, v) ? NULL : all;
    for (;;) {
        while (off < len && (buf[off] == ' ' || buf[off] == '\t' || buf[off] == '\n' || buf[off] == '\r'))
            off++;
        if (off == len)
            return all;
        if (buf[off] != '{' && buf[off] != '[' && buf[off] != '"')
            return NULL;
        v = json_loadb(buf + off, len - off,
                       JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES, &err);
        if (!v || err.position <= 0 || json_array_append_new(all, v))
            return NULL;
        off += (size_t)err.position;
    }
}

/* one JSON value (--argjson) */
static json_t *load_one(const char *text)
{
    json_t *all = load_all(text, strlen(text));
    return all && json_array_size(all) == 1 ? json_array_get(all, 0) : NULL;
}

/* text as jq -R reads it: a string (valid UTF-8 and no NUL, else NULL) */
static json_t *raw_string(const char *buf, size_t len)
{
    return memchr(buf, 0, len) ? NULL : json_stringn(buf, len);
}

/* -R: each line a string (the last one's newline may be missing) */
static json_t *raw_lines(const char *buf, size_t len)
{
    json_t *all = json_array(), *v;
    const char *end = buf + len, *nl;
    if (!all)
        return NULL;
    while (buf < end) {
        nl = memchr(buf, '\n', (size_t)(end - buf));
        if (!nl)
            nl = end;
        if (!(v = raw_string(buf, (size_t)(nl - buf))) || json_array_append_new(all, v))
            return NULL;
        buf = nl + 1;
    }
    return all;
}

int main(int argc, char **argv)
{
    prog_t p = {0};
    const char *filter = NULL, *file = NULL;
    jqf_env_t vars[16];
    const jqf_env_t *env = NULL;
    int nvars = 0, slurp = 0, raw_in = 0;
    char *buf;
    size_t len;
    static const struct { const char *name; char flag; } longs[] = {
        {"--raw-output", 'r'}, {"--exit-status", 'e'}, {"--compact-output", 'c'},
        {"--null-input", 'n'}, {"--slurp", 's'}, {"--raw-input", 'R'},
    };
    g_argv = argv;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        char shortf[3] = {'-', 0, 0};
        for (size_t k = 0; k < sizeof longs / sizeof longs[0]; k++)
            if (!strcmp(a, longs[k].name))
                shortf[1] = longs[k].flag;
        if ((!strcmp(a, "--arg") || !strcmp(a, "--argjson") || !strcmp(a, "--slurpfile") ||
             !strcmp(a, "--rawfile")) && i + 2 < argc && nvars < 16) {
            /* --arg: the text; --argjson: its value; --slurpfile: the file's
             * values in an array; --rawfile: the file's text */
            json_t *v = NULL;
            if (!strcmp(a, "--arg"))
                v = json_string(argv[i + 2]);
            else if (!strcmp(a, "--argjson"))
                v = load_one(argv[i + 2]);
            else if (!read_file(argv[i + 2], &buf, &len))
                v = a[2] == 's' ? load_all(buf, len) : raw_string(buf, len);
            if (!v)
                jq_exec();
            vars[nvars] = (jqf_env_t){argv[i + 1], v, env};
            env = &vars[nvars++];
            i += 2;
            continue;
        }
        if (shortf[1])
            a = shortf;   /* as its short form */
        else if (!(a[0] == '-' && a[1] && a[1] != '-')) {
            if (a[0] == '-' || file)
                jq_exec();
            if (filter)
                file = a;
            else
                filter = a;
            continue;
        }
        for (const char *c = a + 1; *c; c++) {
            switch (*c) {
            case 'r': p.raw = 1; break;
            case 'e': p.exit_status = 1; break;
            case 'c': p.compact = 1; break;
            case 'n': p.null_input = 1; break;
            case 's': slurp = 1; break;
            case 'R': raw_in = 1; break;
            default: jq_exec();
            }
        }
    }
    jqf_node_t *prog = filter ? jqf_parse(filter) : NULL;
    if (!prog || (p.null_input && (slurp || raw_in)))
        jq_exec();
    /* the inputs: null (-n), or the file's or stdin's values (-R: lines,
     * -s: all of them in one array, -Rs: all the text in one string) */
    json_t *inputs = json_array(), *in;
    if (p.null_input) {
        json_array_append(inputs, json_null());
    } else {
        if (file ? read_file(file, &buf, &len) : read_fd(0, &buf, &len))
            jq_exec();
        if (!file) {
            g_in = buf;
            g_in_len = len;
        }
        in = raw_in && slurp ? raw_string(buf, len) : raw_in ? raw_lines(buf, len) : load_all(buf, len);
        if (!in)
            jq_exec();
        if (slurp)
            json_array_append(inputs, in);
        else
            inputs = in;
    }
    /* jq's exit status with -e is the last input's: 1 when its last output
     * is false or null, 4 when it has none */
    int rc = 0;   /* no input at all (nothing, or white space): no output, 0 */
    size_t k;
    json_array_foreach(inputs, k, in) {
        p.last = NULL;
        if (jqf_run(prog, in, env, emit, &p))
            jq_exec();
        rc = !p.exit_status ? 0 : !p.last ? 4 : json_is_null(p.last) || json_is_false(p.last) ? 1 : 0;
    }
    if ((p.o.len && fwrite(p.o.buf, 1, p.o.len, stdout) != p.o.len) || fflush(stdout))
        rc = 2;
    return rc;
}
