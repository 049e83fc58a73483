/* prepull.c — see prepull.h: one child process per image the nodepool
 * pre-pulls, reaped without blocking. */
#define _GNU_SOURCE
#include "agent/prepull.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/container.h"
#include "common/log.h"
#include "common/util.h"

#define PREPULL_MAX 32

typedef struct entry {
    char *image;
    pid_t pid;                 /* > 0 while pulling */
    int state;                 /* 0 pulling, 1 ready, 2 failed */
    char error[512];
    char log[4200], auth[4200];
    bool listed;
} entry_t;

struct drv_prepull {
    char engine[16];
    char *state_dir;
    entry_t e[PREPULL_MAX];
    size_t n;
    unsigned seq;
    bool has_list;
};

/* $1 engine, $2 image, $3 $4 the login's file and directory ("": none):
 * present already, or pulled */
static const char script[] =
    "[ -n \"$3\" ] && export REGISTRY_AUTH_FILE=\"$3\" DOCKER_CONFIG=\"$4\"\n"
    "\"$1\" image inspect \"$2\" >/dev/null 2>&1 && { echo \"drover: image $2 is on this node\"; "
    "exit 0; }\n"
    "echo \"drover: pulling image $2\"\n"
    "exec \"$1\" pull \"$2\"\n";

drv_prepull_t *drv_prepull_create(const char *engine, const char *state_dir)
{
    drv_prepull_t *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    snprintf(p->engine, sizeof p->engine, "%s", engine);
    p->state_dir = drv_strdup(state_dir);
    return p;
}

static void forget(entry_t *e)
{
    if (e->auth[0]) {
        char f[4300];
        snprintf(f, sizeof f, "%s/config.json", e->auth);
        unlink(f);
        rmdir(e->auth);
    }
    free(e->image);
    memset(e, 0, sizeof *e);
}

void drv_prepull_destroy(drv_prepull_t *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        free(p->e[i].image);   /* a pull still running ends on its own; its login stays */
    free(p->state_dir);
    free(p);
}

/* The last line of the pull's output, for its error. */
static void last_line(const char *path, char *out, size_t n)
{
    char buf[4096];
    out[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    off_t end = lseek(fd, 0, SEEK_END);
    off_t from = end > (off_t)sizeof buf - 1 ? end - (off_t)sizeof buf + 1 : 0;
    ssize_t k = pread(fd, buf, sizeof buf - 1, from);
    close(fd);
    if (k <= 0)
        return;
    buf[k] = '\0';
    while (k > 0 && (buf[k - 1] == '\n' || buf[k - 1] == '\r'))
        buf[--k] = '\0';
    char *nl = strrchr(buf, '\n');
    snprintf(out, n, "%s", nl ? nl + 1 : buf);
}

static void start(drv_prepull_t *p, entry_t *e, const json_t *auth)
{
    unsigned id = ++p->seq;
    snprintf(e->log, sizeof e->log, "%s/prepull-%u.log", p->state_dir, id);
    const char *reg = json_string_value(json_object_get(auth, "registry"));
    const char *user = json_string_value(json_object_get(auth, "username"));
    const char *pw = json_string_value(json_object_get(auth, "password"));
    if (reg && user && pw) {
        char name[32];
        snprintf(name, sizeof name, "prepull-%u", id);
        if (drv_ctr_write_auth(p->state_dir, name, reg, user, pw, e->auth, sizeof e->auth,
                               e->error, sizeof e->error) < 0) {
            e->state = 2;
            e->auth[0] = '\0';
            return;
        }
    }
    int fd = open(e->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(e->error, sizeof e->error, "cannot write %s: %s", e->log, strerror(errno));
        e->state = 2;
        return;
    }
    char authfile[4300] = "";
    if (e->auth[0])
        snprintf(authfile, sizeof authfile, "%s/config.json", e->auth);
    pid_t pid = fork();
    if (pid == 0) {
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0)
            dup2(nul, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        setsid();
        execl("/bin/sh", "sh", "-c", script, "drover-prepull", p->engine, e->image, authfile,
              e->auth, (char *)NULL);
        _exit(127);
    }
    close(fd);
    if (pid < 0) {
        snprintf(e->error, sizeof e->error, "fork: %s", strerror(errno));
        e->state = 2;
        return;
    }
    e->pid = pid;
    e->state = 0;
    drv_info("prepull: pulling image %s (nodepool prefetch)", e->image);
}

void drv_prepull_set(drv_prepull_t *p, const json_t *list)
{
    p->has_list = true;
    for (size_t i = 0; i < p->n; i++)
        p->e[i].listed = false;
    size_t k;
    json_t *it;
    json_array_foreach(list, k, it) {
        const char *image = json_string_value(json_object_get(it, "image"));
        if (!image || !*image || image[0] == '-')
            continue;
        entry_t *e = NULL;
        for (size_t i = 0; i < p->n && !e; i++)
            if (strcmp(p->e[i].image, image) == 0)
                e = &p->e[i];
        if (!e) {
            if (p->n == PREPULL_MAX)
                continue;
            e = &p->e[p->n++];
            e->image = drv_strdup(image);
            e->listed = true;
            start(p, e, json_object_get(it, "registry_auth"));
        } else if (e->state == 2 && e->pid == 0) {   /* a new list: a failed pull is tried again */
            e->error[0] = '\0';
            e->listed = true;
            start(p, e, json_object_get(it, "registry_auth"));
        }
        e->listed = true;
    }
}

json_t *drv_prepull_report(drv_prepull_t *p)
{
    if (!p || !p->has_list)
        return NULL;
    json_t *out = json_array();
    for (size_t i = 0; i < p->n;) {
        entry_t *e = &p->e[i];
        int wst;
        if (e->pid > 0 && waitpid(e->pid, &wst, WNOHANG) == e->pid) {
            e->pid = 0;
            e->state = WIFEXITED(wst) && WEXITSTATUS(wst) == 0 ? 1 : 2;
            if (e->state == 2) {
                last_line(e->log, e->error, sizeof e->error);
                if (!e->error[0])
                    snprintf(e->error, sizeof e->error, "the pull exited with status %d",
                             WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst));
                drv_warn("prepull: image %s: %s", e->image, e->error);
            } else {
                drv_info("prepull: image %s is on this node", e->image);
            }
            unlink(e->log);
            if (e->auth[0]) {   /* the login is only for the pull */
                char f[4300];
                snprintf(f, sizeof f, "%s/config.json", e->auth);
                unlink(f);
                rmdir(e->auth);
                e->auth[0] = '\0';
            }
        }
        if (!e->listed && e->pid == 0) {   /* dropped from the list and done */
            forget(e);
            memmove(e, e + 1, (p->n - i - 1) * sizeof *e);
            memset(&p->e[--p->n], 0, sizeof p->e[0]);
            continue;
        }
        if (e->listed) {
            static const char *const names[] = {"pulling", "ready", "failed"};
            json_t *o = json_pack("{s:s, s:s}", "image", e->image, "state", names[e->state]);
            if (e->state == 2 && e->error[0])
                json_object_set_new(o, "error", json_string(e->error));
            json_array_append_new(out, o);
        }
        i++;
    }
    return out;
}
