/* cli.h — what the files of the `drover` CLI share: the command and flag
 * tables, the parsed arguments, the session context (server, token, output
 * format, HTTP client) and the output helpers.
 *
 * Each command group lives in its own file and exports its command structs
 * (drv_cli_cmd_*); main.c lists them in the dispatch table. A command's run
 * function returns the process exit code: DRV_CLI_OK, DRV_CLI_FAIL (the
 * server refused, or a file was bad; the reason is already printed on
 * stderr) or DRV_CLI_USAGE (wrong command line; printed with a --help hint).
 * Single-threaded: the context belongs to main().
 */
#ifndef DRV_CLI_H
#define DRV_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "common/error.h"
#include "common/httpc.h"

#define DRV_CLI_DEFAULT_SERVER "http://127.0.0.1:7480"

enum { DRV_CLI_OK = 0, DRV_CLI_FAIL = 1, DRV_CLI_USAGE = 2 };

typedef enum drv_cli_format {
    DRV_OUT_TABLE,
    DRV_OUT_WIDE,
    DRV_OUT_JSON,
    DRV_OUT_YAML,
} drv_cli_format_t;

/* One flag of a command. A table of these ends with a {NULL} entry. */
typedef struct drv_cli_opt {
    const char *name;        /* long name without "--" */
    char short_name;         /* 0 = none */
    const char *metavar;     /* NULL: boolean flag; else the value's name */
    const char *help;
} drv_cli_opt_t;

#define DRV_CLI_MAX_POS 32
#define DRV_CLI_MAX_VALS 64

struct drv_cli;
struct drv_cli_args;

typedef struct drv_cli_cmd {
    const char *name;
    const char *summary;                 /* one line, for command lists */
    const char *usage;                   /* after "drover ": "get KIND [ID] [flags]" */
    const char *help;                    /* description and examples (may be NULL) */
    const drv_cli_opt_t *opts;           /* may be NULL */
    int min_pos, max_pos;                /* positional arguments; max -1 = any */
    int (*run)(struct drv_cli *cli, const struct drv_cli_args *args);
    const struct drv_cli_cmd *const *subcmds; /* command groups: NULL-terminated */
} drv_cli_cmd_t;

/* A parsed command line of one (sub)command. */
typedef struct drv_cli_args {
    const drv_cli_cmd_t *cmd;
    char cmd_path[64];                   /* "token create", for messages */
    const char *pos[DRV_CLI_MAX_POS];
    int npos;
    /* every flag given, in order: which flag (index in cmd->opts), value
     * ("" for boolean flags) */
    int val_opt[DRV_CLI_MAX_VALS];
    const char *val[DRV_CLI_MAX_VALS];
    int nval;
} drv_cli_args_t;

typedef struct drv_cli {
    const char *server_flag;             /* --server, NULL when not given */
    const char *token_flag;              /* --token */
    const char *ca_file_flag;            /* --ca-file */
    bool insecure;                       /* --insecure (or the config's insecure = true) */
    char ca_file[1024];                  /* the CA https heads must chain to ("": system's) */
    drv_cli_format_t format;
    bool format_set;                     /* -o given */
    /* resolved by drv_cli_connect() */
    char server[1024];
    char token[1024];
    bool token_missing;                  /* no token anywhere */
    drv_httpc_t *http;
} drv_cli_t;

/* ---- flags (cli_flags.c) ------------------------------------------------ */

/* Last value of flag `name`, NULL when not given. */
const char *drv_cli_opt(const drv_cli_args_t *a, const char *name);
bool drv_cli_flag(const drv_cli_args_t *a, const char *name);
/* All values of a repeatable flag, in order; returns the count. */
int drv_cli_opt_all(const drv_cli_args_t *a, const char *name, const char **out, int max);
/* Parse a numeric flag; prints a usage error and returns -1 when malformed.
 * Absent flags leave *out as it is and return 0. */
int drv_cli_opt_long(const drv_cli_args_t *a, const char *name, long long min, long long max,
                     long long *out);
int drv_cli_opt_double(const drv_cli_args_t *a, const char *name, double min, double max,
                       double *out);

/* Print "drover CMD: message" and the --help hint on stderr; returns
 * DRV_CLI_USAGE. */
int drv_cli_usage(const drv_cli_args_t *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- talking to droverd (cli_auth.c) -------------------------------------- */

/* Resolve server and token (flags > env > config file > defaults) and
 * create the HTTP client. Returns -1 with err filled on a bad config. */
int drv_cli_connect(drv_cli_t *cli, drv_error_t *err);
/* One call; see drv_httpc_json(). Connects first when needed. */
json_t *drv_cli_call(drv_cli_t *cli, const char *method, const char *path, const json_t *body,
                     const char *if_match, long *status, drv_error_t *err);
/* GET a list, following next_page_token to the end; returns the items. */
json_t *drv_cli_list(drv_cli_t *cli, const char *path, drv_error_t *err);
/* printf into out where every %s argument is percent-escaped (path
 * segments, query values); %% is a percent sign. -1 when too long. */
int drv_cli_pathf(char *out, size_t n, const char *fmt, ...);
/* "90", "90s", "30m", "12h", "7d", "2w", "1h30m" -> seconds; -1 when
 * malformed or over 100 years. */
long long drv_cli_parse_duration(const char *s);

/* ---- objects on the command line (cli_objects.c) ------------------------- */

/* A kind's names: "clusters", "cluster", short forms ("cl"). */
typedef struct drv_cli_kind {
    const char *plural;
    const char *singular;
    const char *aliases[3];
} drv_cli_kind_t;

/* The kind a word names (plural, singular or short form), NULL if none. */
const drv_cli_kind_t *drv_cli_kind(const char *word);

/* The objects a command line names. */
typedef struct drv_cli_objects {
    const drv_cli_kind_t *kind;          /* NULL: no arguments */
    const char *ids[DRV_CLI_MAX_POS];    /* point into the arguments */
    int nids;
} drv_cli_objects_t;

/* Parse the positional arguments as "KIND [ID...]" or "KIND/ID [KIND/ID...]"
 * (every one of the same kind; nested ids keep their slash:
 * nodepool/demo/gpu is nodepool "demo/gpu"). With implied (a kind name),
 * lone IDs without a kind are of that kind ("predict demo"). 0, or
 * DRV_CLI_USAGE after printing (an unknown kind gets a "did you mean"). */
int drv_cli_objects(const drv_cli_args_t *a, const char *implied, drv_cli_objects_t *out);

/* The one object of kind (a singular: "deployment") the arguments name: ID,
 * KIND/ID or KIND ID. 0, or DRV_CLI_USAGE after printing. */
int drv_cli_one_object(const drv_cli_args_t *a, const char *kind, const char **id);

/* A refused DELETE's message (409) worded for the CLI: the API's
 * "?cascade=true" becomes --cascade. Call before drv_cli_fail(). */
void drv_cli_cascade_hint(drv_error_t *err);

/* ---- output (cli_output.c) --------------------------------------------- */

/* Print "error: message (field: f)" on stderr; returns DRV_CLI_FAIL. */
int drv_cli_fail(drv_cli_t *cli, const drv_error_t *err);

/* Print doc as JSON (pretty) or YAML per cli->format. */
int drv_cli_print_doc(const drv_cli_t *cli, const json_t *doc);
/* Print a resource or a list of them in the chosen format. kind names the
 * table layout ("clusters", "nodepools", ... see cli_output.c). */
int drv_cli_print(const drv_cli_t *cli, const char *kind, const json_t *doc, bool is_list,
                  bool show_owner);
/* A table of items (array) with kind's columns. */
void drv_cli_print_table(const char *kind, const json_t *items, bool wide, bool show_owner);
/* The same, every line indented by `indent` spaces (tables inside describe). */
void drv_cli_print_table_at(const char *kind, const json_t *items, bool wide, bool show_owner,
                            int indent);
/* How long ago an RFC 3339 time was: "42s", "5m", "3h", "2d"; "" when
 * unparsable. */
void drv_cli_age(const char *rfc3339, char *out, size_t n);
/* The longest cell or describe value rendered (bytes, NUL included). */
#define DRV_CLI_CELL_MAX 1024
/* A value as one table cell: strings as they are, scalar arrays
 * comma-joined (cli_output.c). */
void drv_cli_render(const json_t *v, char *out, size_t n);
/* Control characters replaced by spaces, so a value stays on one line. */
void drv_cli_sanitize(char *s);
/* Display width of UTF-8 text: code points, not bytes. */
int drv_cli_width(const char *s);
/* The multi-line key/value view of `drover describe` (cli_describe.c). */
void drv_cli_describe(const json_t *obj);
/* Secret-bearing answers (token create, user create) in table mode. */
void drv_cli_print_secret(const char *what, const char *id, const char *secret);

/* ---- events (cli_events.c) ---------------------------------------------- */

/* The "Events:" section of `drover describe`: the object's recent events
 * (GET /v1/events?QUERY: kind=K&object=ID, or cluster=C) as TYPE, AGE,
 * MESSAGE, or "<none>". DRV_CLI_OK, or the failure's code. */
int drv_cli_describe_events(drv_cli_t *cli, const char *query);

/* ---- nodes (cli_nodes.c) ------------------------------------------------ */

/* describe node in table mode: the node's fields, a table of its GPUs and
 * one of the replicas placed on it (GET /v1/replicas?node=ID). */
int drv_cli_describe_node(drv_cli_t *cli, const json_t *node);

/* describe deployment in table mode: its fields, then a Metrics block from
 * GET /v1/deployments/ID/metrics (cli_metrics.c). */
int drv_cli_describe_deployment(drv_cli_t *cli, const json_t *dep);

/* describe job in table mode: its state, attempt, workers and queue facts,
 * then its placement by rank (cli_job.c). */
int drv_cli_describe_job(drv_cli_t *cli, const json_t *job);

/* ---- artifacts (cli_artifact.c) ------------------------------------------ */

/* Cold starts (cli_coldstart.c): describe replica in table mode (its
 * fields, then a "Cold start:" block); a replica status's block; a
 * deployment status's "Cold starts:" table (nothing when there are none). */
int drv_cli_describe_replica(drv_cli_t *cli, const json_t *rep);
void drv_cli_print_cold_start(const json_t *status);
void drv_cli_print_cold_starts(const json_t *dep_status);

/* Where a cold deployment's start is (cli_progress.c): one line from its
 * replicas (an array of replica objects) for `drover predict`. */
typedef enum drv_cli_phase {
    DRV_PHASE_UNKNOWN,
    DRV_PHASE_WAITING,           /* no replica, or none placed yet */
    DRV_PHASE_FETCHING,          /* fetching the model's artifact */
    DRV_PHASE_STARTING,          /* its process is starting */
    DRV_PHASE_READY,             /* a replica is ready */
} drv_cli_phase_t;
drv_cli_phase_t drv_cli_cold_line(const json_t *replicas, char *out, size_t n);

/* describe artifact in table mode: fields, its files, the models using it. */
int drv_cli_describe_artifact(drv_cli_t *cli, const json_t *artifact);
/* `drover get uploads`: the caller's unfinished uploads (cli_artifact.c). */
bool drv_cli_is_uploads(const drv_cli_args_t *a);
int drv_cli_get_uploads(drv_cli_t *cli, const drv_cli_args_t *a);
/* "512 B", "1.5 MiB". */
void drv_cli_bytes(uint64_t n, char *out, size_t len);

/* ---- checkpoints (cli_checkpoints.c) ------------------------------------- */

/* Is the KIND argument checkpoints (checkpoint, ckpt)? */
bool drv_cli_is_checkpoints(const drv_cli_args_t *a);
/* `drover get checkpoints DEPLOYMENT`. */
int drv_cli_get_checkpoints(drv_cli_t *cli, const drv_cli_args_t *a);
/* describe deployment's "Checkpoints:" table (nothing when there are none). */
void drv_cli_describe_checkpoints(drv_cli_t *cli, const char *dep);

/* ---- commands ------------------------------------------------------------ */

extern const drv_cli_cmd_t drv_cli_cmd_login;
extern const drv_cli_cmd_t drv_cli_cmd_token;
extern const drv_cli_cmd_t drv_cli_cmd_user;
extern const drv_cli_cmd_t drv_cli_cmd_apply;
extern const drv_cli_cmd_t drv_cli_cmd_get;
extern const drv_cli_cmd_t drv_cli_cmd_describe;
extern const drv_cli_cmd_t drv_cli_cmd_delete;
extern const drv_cli_cmd_t drv_cli_cmd_instance_types;
extern const drv_cli_cmd_t drv_cli_cmd_recommend;
extern const drv_cli_cmd_t drv_cli_cmd_cordon;
extern const drv_cli_cmd_t drv_cli_cmd_logs;
extern const drv_cli_cmd_t drv_cli_cmd_events;
extern const drv_cli_cmd_t drv_cli_cmd_status;
extern const drv_cli_cmd_t drv_cli_cmd_uncordon;
extern const drv_cli_cmd_t drv_cli_cmd_drain;
extern const drv_cli_cmd_t drv_cli_cmd_node;
extern const drv_cli_cmd_t drv_cli_cmd_audit;
extern const drv_cli_cmd_t drv_cli_cmd_nodepool;
extern const drv_cli_cmd_t drv_cli_cmd_predict;
extern const drv_cli_cmd_t drv_cli_cmd_artifact;

#endif
