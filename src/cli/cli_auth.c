/* cli_auth.c — who the CLI talks to and as whom: the config file, server
 * and token resolution, the HTTP calls every command makes (with paging),
 * and the `login`, `token` and `user` commands. Printing, errors included,
 * is cli_output.c's; nothing there calls back here.
 *
 * Resolution order (first wins): --server/--token flags, DROVER_SERVER /
 * DROVER_TOKEN, the config file ($XDG_CONFIG_HOME/drover/config or
 * ~/.config/drover/config, "key = value" lines, mode 0600), the default
 * server; a token-less session falls back to ./.drover/admin.token.
 */
#include "cli/cli.h"

#include "common/pin.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#define ADMIN_TOKEN_FILE ".drover/admin.token"

/* ---- config file ---------------------------------------------------------- */

static int config_path(char *out, size_t n, drv_error_t *err)
{
    const char *xdg = getenv("XDG_CONFIG_HOME");
    if (xdg && xdg[0] == '/') {
        if ((size_t)snprintf(out, n, "%s/drover/config", xdg) >= n)
            return drv_err_invalid(err, "", "XDG_CONFIG_HOME is too long");
        return 0;
    }
    const char *home = getenv("HOME");
    if (!home || !*home) {
        struct passwd *pw = getpwuid(getuid());
        home = pw ? pw->pw_dir : NULL;
    }
    if (!home || !*home)
        return drv_err_invalid(err, "", "cannot find the config directory: set HOME");
    if ((size_t)snprintf(out, n, "%s/.config/drover/config", home) >= n)
        return drv_err_invalid(err, "", "HOME is too long");
    return 0;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* Read server and token from the config file into the buffers (left
 * untouched for keys the file lacks). A missing file is no error. */
static char conf_ca_file[1024];   /* the config's ca_file ("" = none) */
static bool conf_insecure;        /* its insecure = true */

static int config_read(const char *path, char *server, size_t sn, char *token, size_t tn,
                       drv_error_t *err)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT || errno == ENOTDIR)
            return 0;
        return drv_err_invalid(err, "", "cannot read %s: %s", path, strerror(errno));
    }
    char line[2048];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *s = trim(line);
        if (!*s || *s == '#')
            continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            fclose(f);
            return drv_err_invalid(err, "", "%s:%d: expected \"key = value\"", path, lineno);
        }
        *eq = '\0';
        char *key = trim(s), *val = trim(eq + 1);
        if (strcmp(key, "server") == 0)
            snprintf(server, sn, "%s", val);
        else if (strcmp(key, "token") == 0)
            snprintf(token, tn, "%s", val);
        else if (strcmp(key, "ca_file") == 0)
            snprintf(conf_ca_file, sizeof conf_ca_file, "%s", val);
        else if (strcmp(key, "insecure") == 0)
            conf_insecure = strcmp(val, "true") == 0;
    }
    fclose(f);
    return 0;
}

/* mkdir -p of the directories above path, mode 0700. */
static int make_parents(const char *path, drv_error_t *err)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
            return drv_err_invalid(err, "", "cannot create %s: %s", dir, strerror(errno));
        *p = '/';
    }
    return 0;
}

/* Write the config file atomically (temp file + rename), mode 0600. */
static int config_write(const char *path, const char *server, const char *token,
                        const char *ca_file, bool insecure, drv_error_t *err)
{
    char tmp[1100];
    if (make_parents(path, err) < 0)
        return -1;
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return drv_err_invalid(err, "", "cannot write %s: %s", tmp, strerror(errno));
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        unlink(tmp);
        return drv_err_internal(err, "fdopen: %s", strerror(errno));
    }
    fprintf(f, "# drover CLI configuration, written by `drover login`.\n"
               "server = %s\ntoken = %s\n", server, token);
    if (ca_file && *ca_file)
        fprintf(f, "ca_file = %s\n", ca_file);
    if (insecure)
        fprintf(f, "insecure = true\n");
    int bad = fflush(f) != 0 || fsync(fileno(f)) != 0 || fchmod(fileno(f), 0600) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        return drv_err_invalid(err, "", "cannot write %s: %s", path, strerror(e));
    }
    return 0;
}

static void read_admin_token(char *token, size_t n)
{
    FILE *f = fopen(ADMIN_TOKEN_FILE, "r");
    if (!f)
        return;
    char line[1024];
    if (fgets(line, sizeof line, f))
        snprintf(token, n, "%s", trim(line));
    fclose(f);
}

static int set_server(char *out, size_t n, const char *url, drv_error_t *err)
{
    const char *scheme = strstr(url, "://") ? "" : "http://";
    if (strlen(scheme) + strlen(url) >= n)
        return drv_err_invalid(err, "server", "server URL is too long");
    memcpy(out, scheme, strlen(scheme));
    memcpy(out + strlen(scheme), url, strlen(url) + 1);
    return 0;
}

/* ---- calls ------------------------------------------------------------------- */

static int resolve(drv_cli_t *cli, drv_error_t *err)
{
    char conf_server[1024] = "", conf_token[1024] = "", path[1024];
    const char *env_server = getenv("DROVER_SERVER"), *env_token = getenv("DROVER_TOKEN");
    const char *server = cli->server_flag ? cli->server_flag
                         : env_server && *env_server ? env_server
                                                     : NULL;
    const char *token = cli->token_flag ? cli->token_flag
                        : env_token && *env_token ? env_token
                                                  : NULL;
    {   /* the config's trust goes with the config's server (read even when flags
         * give both; then a config it cannot read is no error) */
        bool need = !server || !token;
        if (config_path(path, sizeof path, need ? err : NULL) < 0 ||
            config_read(path, conf_server, sizeof conf_server, conf_token, sizeof conf_token,
                        need ? err : NULL) < 0) {
            if (need)
                return -1;
            conf_server[0] = conf_token[0] = '\0';
        }
        if (!server && conf_server[0])
            server = conf_server;
        if (!token && conf_token[0])
            token = conf_token;
    }
    const char *env_ca = getenv("DROVER_CA_FILE");
    bool conf_applies = server && strcmp(server, conf_server) == 0;
    const char *ca = cli->ca_file_flag ? cli->ca_file_flag
                     : env_ca && *env_ca ? env_ca
                     : conf_applies ? conf_ca_file : "";
    snprintf(cli->ca_file, sizeof cli->ca_file, "%s", ca);
    if (conf_applies && conf_insecure)
        cli->insecure = true;
    if (set_server(cli->server, sizeof cli->server, server ? server : DRV_CLI_DEFAULT_SERVER,
                   err) < 0)
        return -1;
    cli->token[0] = '\0';
    if (token)
        snprintf(cli->token, sizeof cli->token, "%s", token);
    else
        read_admin_token(cli->token, sizeof cli->token);
    cli->token_missing = cli->token[0] == '\0';
    return 0;
}

/* Plain http:// only to loopback unless --insecure; the CA of --ca-file
 * (or the config's) for https://. */
static int apply_trust(drv_cli_t *cli, drv_error_t *err)
{
    char urls[1024];
    snprintf(urls, sizeof urls, "%s", cli->server);
    for (char *save = NULL, *u = strtok_r(urls, ",", &save); u; u = strtok_r(NULL, ",", &save))
        if (strncmp(u, "http://", 7) == 0 && !cli->insecure && !drv_url_is_loopback(u))
            return drv_err_invalid(err, "server",
                                   "refusing plain http:// to %s, which is not on loopback: the "
                                   "token would cross the network in clear text. Use https:// "
                                   "(droverd --tls), or pass --insecure", u);
    if (!cli->ca_file[0])
        return 0;
    FILE *f = fopen(cli->ca_file, "r");
    if (!f)
        return drv_err_invalid(err, "ca-file", "cannot read CA file %s: %s", cli->ca_file,
                               strerror(errno));
    char pem[65536], pin[80];
    size_t n = fread(pem, 1, sizeof pem - 1, f);
    fclose(f);
    pem[n] = '\0';
    if (drv_pin_of_pem(pem, pin, sizeof pin, err) < 0)
        return drv_err_invalid(err, "ca-file", "%s: %s", cli->ca_file, err->message);
    return drv_httpc_set_tls(cli->http, pem, true, err);
}

int drv_cli_connect(drv_cli_t *cli, drv_error_t *err)
{
    if (cli->http)
        return 0;
    if (resolve(cli, err) < 0)
        return -1;
    cli->http = drv_httpc_create(cli->server, cli->token_missing ? NULL : cli->token, err);
    if (cli->http && apply_trust(cli, err) < 0) {
        drv_httpc_destroy(cli->http);
        cli->http = NULL;
    }
    return cli->http ? 0 : -1;
}

/* login --ca-hash: the CA from GET /v1/tls/ca (unverified), accepted only
 * when its pin is want, saved next to the config; its path into out. */
static int pin_ca(drv_cli_t *cli, const char *want_in, const char *conf, char *out, size_t n,
                  drv_error_t *err)
{
    char want[80], got[80];
    if (drv_pin_parse(want_in, want, sizeof want, err) < 0)
        return -1;
    drv_httpc_t *h = drv_httpc_create(cli->server, NULL, err);
    if (!h || drv_httpc_set_tls(h, NULL, false, err) < 0) {
        drv_httpc_destroy(h);
        return -1;
    }
    drv_http_resp_t r = {0};
    int rc = -1;
    if (drv_httpc_request(h, "GET", "/v1/tls/ca", NULL, NULL, &r, err) < 0)
        goto out;
    if (r.status != 200) {
        drv_err(err, 0, "unavailable", "", "%s/v1/tls/ca answered %ld: the head serves no CA "
                "to pin (is it started with --tls?)", cli->server, r.status);
        goto out;
    }
    if (drv_pin_of_pem(r.body, got, sizeof got, err) < 0)
        goto out;
    if (strcmp(got, want) != 0) {
        drv_err(err, 0, "untrusted", "", "the head at %s presents a CA whose key hash is %s, "
                "not the pinned %s: not sending the token (a man in the middle, or the wrong "
                "--ca-hash)", cli->server, got, want);
        goto out;
    }
    char *slash = strrchr(conf, '/');
    snprintf(out, n, "%.*s/ca.crt", slash ? (int)(slash - conf) : 1, slash ? conf : ".");
    if (make_parents(out, err) < 0)
        goto out;
    FILE *f = fopen(out, "w");
    if (!f || fputs(r.body, f) < 0 || fclose(f) != 0) {
        drv_err_invalid(err, "", "cannot write %s", out);
        goto out;
    }
    rc = 0;
out:
    drv_http_resp_free(&r);
    drv_httpc_destroy(h);
    return rc;
}

json_t *drv_cli_call(drv_cli_t *cli, const char *method, const char *path, const json_t *body,
                     const char *if_match, long *status, drv_error_t *err)
{
    if (status)
        *status = 0;
    if (drv_cli_connect(cli, err) < 0)
        return NULL;
    return drv_httpc_json(cli->http, method, path, body, if_match, status, err);
}

json_t *drv_cli_list(drv_cli_t *cli, const char *path, drv_error_t *err)
{
    json_t *all = json_array();
    char url[4096], prev[1024] = "";
    snprintf(url, sizeof url, "%s", path);
    for (int page = 0; page < 1000000; page++) {
        json_t *doc = drv_cli_call(cli, "GET", url, NULL, NULL, NULL, err);
        if (!doc)
            goto error;
        json_t *items = json_is_array(doc) ? doc : json_object_get(doc, "items");
        if (!json_is_array(items)) {
            json_decref(doc);
            drv_err_internal(err, "droverd answered GET %s without an items list", path);
            goto error;
        }
        json_array_extend(all, items);
        const char *next = json_string_value(json_object_get(doc, "next_page_token"));
        if (!next || !*next) {
            json_decref(doc);
            return all;
        }
        if (strcmp(next, prev) == 0 || strlen(next) >= sizeof prev) {
            json_decref(doc);
            drv_err_internal(err, "droverd sent a bad next_page_token for %s", path);
            goto error;
        }
        snprintf(prev, sizeof prev, "%s", next);
        json_decref(doc);
        char esc[3 * sizeof prev];
        if (drv_http_escape(prev, esc, sizeof esc) < 0 ||
            (size_t)snprintf(url, sizeof url, "%s%cpage_token=%s", path,
                             strchr(path, '?') ? '&' : '?', esc) >= sizeof url)
            goto too_long;
    }
too_long:
    drv_err_internal(err, "list URL for %s is too long", path);
error:
    json_decref(all);
    return NULL;
}

int drv_cli_pathf(char *out, size_t n, const char *fmt, ...)
{
    va_list ap;
    size_t j = 0;
    int rc = 0;
    va_start(ap, fmt);
    for (const char *p = fmt; *p && rc == 0; p++) {
        if (*p == '%' && p[1] == 's') {
            if (drv_http_escape(va_arg(ap, const char *), out + j, n - j) < 0)
                rc = -1;
            else
                j += strlen(out + j);
            p++;
        } else if (*p == '%' && p[1] == '%') {
            if (j + 1 >= n)
                rc = -1;
            else
                out[j++] = '%';
            p++;
        } else {
            if (j + 1 >= n)
                rc = -1;
            else
                out[j++] = *p;
        }
    }
    va_end(ap);
    if (n > 0)
        out[j < n ? j : n - 1] = '\0';
    return rc;
}

/* ---- login --------------------------------------------------------------------- */

/* Read a token from stdin; prompt without echo on a terminal. */
static int read_token(char *out, size_t n)
{
    bool tty = isatty(STDIN_FILENO);
    struct termios old, quiet;
    if (tty) {
        fprintf(stderr, "Token: ");
        fflush(stderr);
        if (tcgetattr(STDIN_FILENO, &old) == 0) {
            quiet = old;
            quiet.c_lflag &= ~(tcflag_t)ECHO;
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
        } else {
            tty = false;
        }
    }
    char line[1024];
    char *got = fgets(line, sizeof line, stdin);
    if (tty) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
        fputc('\n', stderr);
    }
    if (!got)
        return -1;
    snprintf(out, n, "%s", trim(line));
    return out[0] ? 0 : -1;
}

static int run_login(drv_cli_t *cli, const drv_cli_args_t *a)
{
    drv_error_t err = {0};
    char token[1024] = "", path[1024];
    if (resolve(cli, &err) < 0)
        return drv_cli_fail(cli, &err);
    const char *env_token = getenv("DROVER_TOKEN");
    if (cli->token_flag)
        snprintf(token, sizeof token, "%s", cli->token_flag);
    else if (env_token && *env_token)
        snprintf(token, sizeof token, "%s", env_token);
    else if (read_token(token, sizeof token) < 0)
        return drv_cli_usage(a, "no token: pass --token TOKEN (or type it on standard input)");
    snprintf(cli->token, sizeof cli->token, "%s", token);
    cli->token_missing = false;
    const char *hash = drv_cli_opt(a, "ca-hash");
    if (hash && cli->ca_file_flag)
        return drv_cli_usage(a, "give --ca-file or --ca-hash, not both");
    if (config_path(path, sizeof path, &err) < 0)
        return drv_cli_fail(cli, &err);
    if (hash && pin_ca(cli, hash, path, cli->ca_file, sizeof cli->ca_file, &err) < 0)
        return drv_cli_fail(cli, &err);
    if (cli->ca_file_flag) {   /* saved as an absolute path */
        char abs[PATH_MAX];
        if (!realpath(cli->ca_file_flag, abs)) {
            drv_err_invalid(&err, "ca-file", "cannot read CA file %s: %s", cli->ca_file_flag,
                            strerror(errno));
            return drv_cli_fail(cli, &err);
        }
        snprintf(cli->ca_file, sizeof cli->ca_file, "%s", abs);
    }
    cli->http = drv_httpc_create(cli->server, token, &err);
    if (!cli->http || apply_trust(cli, &err) < 0)
        return drv_cli_fail(cli, &err);
    json_t *me = drv_httpc_json(cli->http, "GET", "/v1/users/me", NULL, NULL, NULL, &err);
    if (!me)
        return drv_cli_fail(cli, &err);
    if (config_write(path, cli->server, token, cli->ca_file, cli->insecure, &err) < 0) {
        json_decref(me);
        return drv_cli_fail(cli, &err);
    }
    if (cli->format == DRV_OUT_JSON || cli->format == DRV_OUT_YAML) {
        drv_cli_print_doc(cli, me);
    } else {
        const char *id = json_string_value(json_object_get(me, "id"));
        const char *role = json_string_value(json_object_get(me, "role"));
        printf("Logged in to %s as %s (role %s). Saved to %s\n", cli->server, id ? id : "?",
               role ? role : "?", path);
    }
    json_decref(me);
    return DRV_CLI_OK;
}

static const drv_cli_opt_t login_opts[] = {
    {"ca-hash", 0, "sha256:HEX", "trust the head's CA only if its public key has this hash"},
    {NULL, 0, NULL, NULL},
};

const drv_cli_cmd_t drv_cli_cmd_login = {
    .name = "login",
    .summary = "check a token against droverd and save server and token",
    .usage = "login [--server URL] [--token TOKEN] [--ca-file FILE | --ca-hash sha256:HEX]",
    .help = "Checks the token with GET /v1/users/me, then writes server and token to\n"
            "$XDG_CONFIG_HOME/drover/config (else ~/.config/drover/config), mode 0600.\n"
            "For an https:// head, --ca-file trusts that CA; --ca-hash fetches the head's\n"
            "CA (GET /v1/tls/ca), accepts it only when the SHA-256 of its public key is\n"
            "the pin (the head's DATA_DIR/tls/ca.hash), keeps it as ca.crt next to the\n"
            "config, and only then sends the token. The trust (and --insecure) is saved\n"
            "with the server.\n"
            "Without --token, DROVER_TOKEN is used, else the token is read from standard\n"
            "input (not echoed on a terminal).\n"
            "\nExamples:\n"
            "  drover login --server http://head:7480 --token drv_...\n"
            "  drover login --server http://127.0.0.1:7480 < .drover/admin.token\n"
            "  drover login --server https://head:7480 --ca-hash sha256:3f2a... --token drv_...\n",
    .opts = login_opts,
    .min_pos = 0,
    .max_pos = 0,
    .run = run_login,
};

/* ---- token --------------------------------------------------------------------- */

long long drv_cli_parse_duration(const char *s)
{
    long long total = 0;
    if (!*s)
        return -1;
    while (*s) {
        if (*s < '0' || *s > '9')
            return -1;
        long long v = 0;
        while (*s >= '0' && *s <= '9') {
            v = v * 10 + (*s++ - '0');
            if (v > 100LL * 365 * 86400)
                return -1;
        }
        long long unit = 1;
        switch (*s) {
        case '\0': break;
        case 's': unit = 1, s++; break;
        case 'm': unit = 60, s++; break;
        case 'h': unit = 3600, s++; break;
        case 'd': unit = 86400, s++; break;
        case 'w': unit = 7 * 86400, s++; break;
        default: return -1;
        }
        total += v * unit;
        if (total > 100LL * 365 * 86400)
            return -1;
    }
    return total;
}

static int add_scopes(const drv_cli_args_t *a, json_t *body)
{
    const char *vals[16];
    int n = drv_cli_opt_all(a, "scope", vals, 16);
    if (n == 0)
        return 0;
    json_t *scopes = json_array();
    json_object_set_new(body, "scopes", scopes);
    for (int i = 0; i < n; i++) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", vals[i]);
        for (char *save = NULL, *s = strtok_r(buf, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
            if (strcmp(s, "all") != 0 && strcmp(s, "read") != 0 && strcmp(s, "predict") != 0 &&
                strcmp(s, "gateway") != 0)
                return drv_cli_usage(a, "unknown scope \"%s\" (use all, read, predict or gateway)",
                                     s);
            json_array_append_new(scopes, json_string(s));
        }
    }
    return 0;
}

static int run_token_create(drv_cli_t *cli, const drv_cli_args_t *a)
{
    drv_error_t err = {0};
    json_t *body = json_object();
    const char *desc = drv_cli_opt(a, "description"), *id = drv_cli_opt(a, "id");
    const char *expires = drv_cli_opt(a, "expires-in");
    int rc = DRV_CLI_OK;
    if (desc)
        json_object_set_new(body, "description", json_string(desc));
    if (id)
        json_object_set_new(body, "id", json_string(id));
    if (expires) {
        long long secs = drv_cli_parse_duration(expires);
        if (secs <= 0) {
            rc = drv_cli_usage(a, "bad --expires-in \"%s\" (e.g. 3600s, 30m, 12h, 7d)", expires);
            goto out;
        }
        json_object_set_new(body, "expires_in_seconds", json_integer(secs));
    }
    if ((rc = add_scopes(a, body)) != 0)
        goto out;
    json_t *tok = drv_cli_call(cli, "POST", "/v1/tokens", body, NULL, NULL, &err);
    if (!tok) {
        rc = drv_cli_fail(cli, &err);
        goto out;
    }
    if (cli->format == DRV_OUT_JSON || cli->format == DRV_OUT_YAML)
        drv_cli_print_doc(cli, tok);
    else
        drv_cli_print_secret("token", json_string_value(json_object_get(tok, "id")),
                             json_string_value(json_object_get(tok, "secret")));
    json_decref(tok);
out:
    json_decref(body);
    return rc;
}

static int run_token_list(drv_cli_t *cli, const drv_cli_args_t *a)
{
    drv_error_t err = {0};
    json_t *items = drv_cli_list(cli, "/v1/tokens", &err);
    if (!items)
        return drv_cli_fail(cli, &err);
    int rc = drv_cli_print(cli, "tokens", items, true, false);
    json_decref(items);
    return rc;
}

/* DELETE each /v1/<coll>/ID; "what/ID verb" per success, stop at an error. */
static int delete_each(drv_cli_t *cli, const drv_cli_args_t *a, const char *coll,
                       const char *what, const char *verb, bool cascade)
{
    drv_error_t err = {0};
    char path[1024];
    json_t *done = json_array();
    int rc = DRV_CLI_OK;
    for (int i = 0; i < a->npos; i++) {
        if (drv_cli_pathf(path, sizeof path, cascade ? "/v1/%s/%s?cascade=true" : "/v1/%s/%s",
                          coll, a->pos[i]) < 0) {
            rc = drv_cli_usage(a, "id too long");
            break;
        }
        json_t *obj = drv_cli_call(cli, "DELETE", path, NULL, NULL, NULL, &err);
        if (!obj) {
            drv_cli_cascade_hint(&err);
            rc = drv_cli_fail(cli, &err);
            break;
        }
        if (cli->format == DRV_OUT_JSON || cli->format == DRV_OUT_YAML)
            json_array_append(done, obj);
        else
            printf("%s/%s %s\n", what, a->pos[i], verb);
        json_decref(obj);
    }
    if (cli->format == DRV_OUT_JSON || cli->format == DRV_OUT_YAML) {
        if (json_array_size(done) == 1)
            drv_cli_print_doc(cli, json_array_get(done, 0));
        else if (json_array_size(done) > 1)
            drv_cli_print_doc(cli, done);
    }
    json_decref(done);
    return rc;
}

static int run_token_revoke(drv_cli_t *cli, const drv_cli_args_t *a)
{
    return delete_each(cli, a, "tokens", "token", "revoked", false);
}

static const drv_cli_opt_t token_create_opts[] = {
    {"description", 'd', "TEXT", "what the token is for"},
    {"scope", 0, "SCOPE",
     "all (default), read, predict or gateway (admins: for drover-gateway); repeat or "
     "comma-separate for several"},
    {"expires-in", 0, "DURATION", "lifetime: 3600, 3600s, 30m, 12h, 7d, 1h30m (default: never)"},
    {"id", 0, "ID", "token id (default: chosen by the server)"},
    {NULL, 0, NULL, NULL},
};

static const drv_cli_cmd_t token_create = {
    .name = "create",
    .summary = "create a personal access token; its secret is shown once",
    .usage = "token create [--description TEXT] [--scope SCOPE] [--expires-in DURATION]",
    .help = "The secret is printed once and never again (the server keeps only a hash).\n"
            "With -o json the answer is the token object, secret included.\n"
            "\nExamples:\n"
            "  drover token create --description ci --scope read --expires-in 7d\n"
            "  drover token create --scope predict -o json | jq -r .secret\n",
    .opts = token_create_opts,
    .min_pos = 0,
    .max_pos = 0,
    .run = run_token_create,
};

static const drv_cli_cmd_t token_list = {
    .name = "list",
    .summary = "list your tokens (revoked ones included)",
    .usage = "token list [-o table|wide|json|yaml]",
    .help = "Examples:\n  drover token list\n  drover token list -o json\n",
    .min_pos = 0,
    .max_pos = 0,
    .run = run_token_list,
};

static const drv_cli_cmd_t token_revoke = {
    .name = "revoke",
    .summary = "revoke tokens",
    .usage = "token revoke ID [ID...]",
    .help = "Examples:\n  drover token revoke ci-token\n",
    .min_pos = 1,
    .max_pos = -1,
    .run = run_token_revoke,
};

static const drv_cli_cmd_t *const token_cmds[] = {&token_create, &token_list, &token_revoke,
                                                  NULL};

const drv_cli_cmd_t drv_cli_cmd_token = {
    .name = "token",
    .summary = "create, list and revoke personal access tokens",
    .usage = "token COMMAND [flags]",
    .subcmds = token_cmds,
};

/* ---- user ----------------------------------------------------------------------- */

static int run_user_create(drv_cli_t *cli, const drv_cli_args_t *a)
{
    drv_error_t err = {0};
    const char *role = drv_cli_opt(a, "role");
    if (role && strcmp(role, "member") != 0 && strcmp(role, "admin") != 0)
        return drv_cli_usage(a, "unknown role \"%s\" (use member or admin)", role);
    json_t *body = json_pack("{s:s, s:s}", "id", a->pos[0], "role", role ? role : "member");
    json_t *user = drv_cli_call(cli, "POST", "/v1/users", body, NULL, NULL, &err);
    json_decref(body);
    if (!user)
        return drv_cli_fail(cli, &err);
    if (cli->format == DRV_OUT_JSON || cli->format == DRV_OUT_YAML) {
        drv_cli_print_doc(cli, user);
    } else {
        json_t *tok = json_object_get(user, "token");
        const char *r = json_string_value(json_object_get(user, "role"));
        printf("user/%s created (role %s)\n", a->pos[0], r ? r : "?");
        if (json_string_value(json_object_get(tok, "secret")))
            drv_cli_print_secret("token", json_string_value(json_object_get(tok, "id")),
                                 json_string_value(json_object_get(tok, "secret")));
    }
    json_decref(user);
    return DRV_CLI_OK;
}

static int run_user_list(drv_cli_t *cli, const drv_cli_args_t *a)
{
    drv_error_t err = {0};
    json_t *items = drv_cli_list(cli, "/v1/users", &err);
    if (!items)
        return drv_cli_fail(cli, &err);
    int rc = drv_cli_print(cli, "users", items, true, false);
    json_decref(items);
    return rc;
}

static int run_user_delete(drv_cli_t *cli, const drv_cli_args_t *a)
{
    return delete_each(cli, a, "users", "user", "deleted", drv_cli_flag(a, "cascade"));
}

static const drv_cli_opt_t user_create_opts[] = {
    {"role", 0, "ROLE", "member (default) or admin"},
    {NULL, 0, NULL, NULL},
};

static const drv_cli_opt_t user_delete_opts[] = {
    {"cascade", 0, NULL, "also delete everything the user owns"},
    {NULL, 0, NULL, NULL},
};

static const drv_cli_cmd_t user_create = {
    .name = "create",
    .summary = "create a user (admin only) and print its first token",
    .usage = "user create ID [--role member|admin]",
    .help = "The new user's first token secret is printed once; hand it over safely.\n"
            "\nExamples:\n"
            "  drover user create alice\n"
            "  drover user create ops --role admin -o json\n",
    .opts = user_create_opts,
    .min_pos = 1,
    .max_pos = 1,
    .run = run_user_create,
};

static const drv_cli_cmd_t user_list = {
    .name = "list",
    .summary = "list users (admin only)",
    .usage = "user list [-o table|wide|json|yaml]",
    .help = "Examples:\n  drover user list\n",
    .min_pos = 0,
    .max_pos = 0,
    .run = run_user_list,
};

static const drv_cli_cmd_t user_delete = {
    .name = "delete",
    .summary = "delete users (admin only; not your own)",
    .usage = "user delete ID [ID...] [--cascade]",
    .help = "A user who owns resources is refused unless --cascade is given.\n"
            "\nExamples:\n  drover user delete alice --cascade\n",
    .opts = user_delete_opts,
    .min_pos = 1,
    .max_pos = -1,
    .run = run_user_delete,
};

static const drv_cli_cmd_t *const user_cmds[] = {&user_create, &user_list, &user_delete, NULL};

const drv_cli_cmd_t drv_cli_cmd_user = {
    .name = "user",
    .summary = "create, list and delete users (admin)",
    .usage = "user COMMAND [flags]",
    .subcmds = user_cmds,
};
