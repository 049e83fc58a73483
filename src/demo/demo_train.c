/* demo_train.c — drover-demo-train: a small distributed "training" program
 * that follows the environment drover gives a job's workers (the torchrun
 * contract): the ranks meet at MASTER_ADDR:MASTER_PORT (rank 0 listens,
 * the others connect), and at each step every rank sends its gradient to
 * rank 0, which sums them and sends the sum back (a toy all-reduce over
 * TCP); each rank fits one number to its own target, so the loss falls
 * step by step. Every K steps each rank writes a checkpoint into
 * DROVER_CHECKPOINT_DIR as a subdirectory step-NNNNNNNN with a COMPLETE
 * marker written last (older ones beyond --keep are removed); its state
 * file also says who wrote it ("rank R world W master A:P attempt N
 * resumed S local LOCAL_RANK/LOCAL_WORLD_SIZE node NODE_RANK/NNODES"). At
 * start the
 * ranks agree (through rank 0) on the newest step all of them hold
 * complete and resume from it, printing "resumed from step N".
 *
 *   drover-demo-train [--steps N] [--checkpoint-every K] [--step-ms MS]
 *                     [--keep N] [--fail-at STEP [--fail-rank R]] [--hold-at STEP]
 *
 * --fail-at makes rank R (default 0) exit 1 when it reaches STEP in
 * attempt 1 (DROVER_JOB_ATTEMPT), to show a gang restart. --hold-at makes
 * every rank stop after STEP (and its checkpoint) in attempt 1 and wait
 * there until it is killed: a test's way to keep a gang running until it
 * has done what it needs (kill a node, say), however slow the machine.
 * Exit 0 after the
 * last step; 1 on a failure (a peer gone, a bad checkpoint, ...); 2 on bad
 * flags or environment.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_WORLD 4096
#define CONNECT_TRIES 600   /* x 100 ms: rank 0 may start a little later */

static int world, rank, attempt;
static int *peers;          /* rank 0: the socket of each other rank */
static int master = -1;     /* other ranks: the socket to rank 0 */

static void die(const char *fmt, const char *a)
{
    fprintf(stderr, "drover-demo-train: rank %d: ", rank);
    fprintf(stderr, fmt, a);
    fprintf(stderr, "\n");
    exit(1);
}

static int env_int(const char *name, int def, int lo, int hi)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < lo || x > hi) {
        fprintf(stderr, "drover-demo-train: %s=%s is not a number in [%d, %d]\n", name, v, lo,
                hi);
        exit(2);
    }
    return (int)x;
}

static int send_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int recv_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = recv(fd, p, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static void rendezvous(const char *addr, int port)
{
    if (world == 1)
        return;
    int one = 1;
    if (rank == 0) {
        int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_ANY)};
        if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 64) < 0)
            die("cannot listen on MASTER_PORT: %s", strerror(errno));
        peers = calloc((size_t)world, sizeof *peers);
        for (int got = 1; got < world;) {
            int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
            if (fd < 0 && errno == EINTR)
                continue;
            if (fd < 0)
                die("accept: %s", strerror(errno));
            int32_t r;
            if (recv_all(fd, &r, sizeof r) < 0 || r <= 0 || r >= world || peers[r]) {
                close(fd);   /* not one of ours (or a duplicate): ignore it */
                continue;
            }
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            peers[r] = fd;
            got++;
        }
        close(ls);
        return;
    }
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(addr, ps, &hints, &res);
    if (rc != 0)
        die("cannot resolve MASTER_ADDR: %s", gai_strerror(rc));
    for (int tries = 0; tries < CONNECT_TRIES; tries++) {
        int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
            master = fd;
            break;
        }
        if (fd >= 0)
            close(fd);
        usleep(100 * 1000);
    }
    freeaddrinfo(res);
    if (master < 0)
        die("rank 0 never answered at MASTER_ADDR:MASTER_PORT (%s)", "gave up after 60 s");
    setsockopt(master, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int32_t r = rank;
    if (send_all(master, &r, sizeof r) < 0)
        die("rendezvous: %s", strerror(errno));
}

/* Rank 0 combines one value of every rank (op 0: sum, 1: min) and every
 * rank gets the result. */
static double all_reduce(double v, int op)
{
    if (world == 1)
        return v;
    if (rank != 0) {
        if (send_all(master, &v, sizeof v) < 0 || recv_all(master, &v, sizeof v) < 0)
            die("rank 0 went away (%s)", "all-reduce");
        return v;
    }
    double acc = v;
    for (int r = 1; r < world; r++) {
        double x;
        if (recv_all(peers[r], &x, sizeof x) < 0) {
            char m[32];
            snprintf(m, sizeof m, "%d", r);
            die("rank %s went away (all-reduce)", m);
        }
        acc = op == 0 ? acc + x : (x < acc ? x : acc);
    }
    for (int r = 1; r < world; r++)
        if (send_all(peers[r], &acc, sizeof acc) < 0)
            die("a rank went away (%s)", "all-reduce");
    return acc;
}

/* --- checkpoints ------------------------------------------------------------ */

static const char *ckdir;

/* The newest complete checkpoint at or before step `limit` (0: none). */
static int newest_complete(int limit)
{
    DIR *d = ckdir ? opendir(ckdir) : NULL;
    int best = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        int step;
        char tail;
        if (sscanf(e->d_name, "step-%d%c", &step, &tail) != 1 || step <= best || step > limit)
            continue;
        char marker[4096];
        snprintf(marker, sizeof marker, "%s/%s/COMPLETE", ckdir, e->d_name);
        if (access(marker, F_OK) == 0)
            best = step;
    }
    if (d)
        closedir(d);
    return best;
}

static void load(int step, double *w)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/step-%08d/state", ckdir, step);
    FILE *f = fopen(path, "r");
    int s;
    if (!f || fscanf(f, "step %d w %lf", &s, w) != 2 || s != step)
        die("checkpoint %s is unreadable", path);
    fclose(f);
}

static char run_line[512];   /* who wrote a checkpoint: rank, world, master, attempt */

static void save(int step, double w, int keep)
{
    if (!ckdir)
        return;
    char dir[4096], tmp[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/step-%08d", ckdir, step);
    snprintf(tmp, sizeof tmp, "%s/.step-%08d.tmp", ckdir, step);
    mkdir(tmp, 0700);
    snprintf(path, sizeof path, "%s/state", tmp);
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "step %d w %.17g\n%s\n", step, w, run_line) < 0 || fflush(f) != 0 ||
        fsync(fileno(f)) != 0 || fclose(f) != 0)
        die("cannot write a checkpoint in %s", ckdir);
    if (rename(tmp, dir) < 0) {
        if (errno != EEXIST && errno != ENOTEMPTY)
            die("cannot write a checkpoint: %s", strerror(errno));
        unlink(path);   /* this step is there already (a step redone after a resume) */
        rmdir(tmp);
    }
    snprintf(path, sizeof path, "%s/COMPLETE", dir);
    f = fopen(path, "w");
    if (!f || fclose(f) != 0)
        die("cannot mark a checkpoint complete in %s", ckdir);
    /* keep the newest `keep` */
    DIR *d = opendir(ckdir);
    struct dirent *e;
    int steps[1024], n = 0;
    while (d && (e = readdir(d)) && n < 1024) {
        int s;
        char tail;
        if (sscanf(e->d_name, "step-%d%c", &s, &tail) == 1)
            steps[n++] = s;
    }
    if (d)
        closedir(d);
    for (int i = 0; i < n; i++) {
        int newer = 0;
        for (int j = 0; j < n; j++)
            newer += steps[j] > steps[i];
        if (newer < keep)
            continue;
        char p[4200];
        snprintf(p, sizeof p, "%s/step-%08d/COMPLETE", ckdir, steps[i]);
        unlink(p);
        snprintf(p, sizeof p, "%s/step-%08d/state", ckdir, steps[i]);
        unlink(p);
        snprintf(p, sizeof p, "%s/step-%08d", ckdir, steps[i]);
        rmdir(p);
    }
    printf("checkpoint step %d\n", step);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: drover-demo-train [--steps N] [--checkpoint-every K] [--step-ms MS]\n"
               "                         [--keep N] [--fail-at STEP [--fail-rank R]]\n"
               "                         [--hold-at STEP]\n"
               "A toy distributed training program for drover jobs: the ranks meet at\n"
               "MASTER_ADDR:MASTER_PORT, all-reduce one number per step over TCP, checkpoint\n"
               "every K steps into DROVER_CHECKPOINT_DIR and resume from the newest complete\n"
               "checkpoint. Reads WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT,\n"
               "DROVER_CHECKPOINT_DIR, DROVER_JOB_ATTEMPT.\n"
               "  --steps N             steps to run (default 20)\n"
               "  --checkpoint-every K  checkpoint interval in steps (default 5; 0: never)\n"
               "  --step-ms MS          time one step takes (default 100)\n"
               "  --keep N              complete checkpoints kept (default 3)\n"
               "  --fail-at STEP        in attempt 1, rank --fail-rank exits 1 at STEP\n"
               "  --fail-rank R         (default 0)\n"
               "  --hold-at STEP        in attempt 1, every rank waits after STEP until killed\n");
}

static int flag_int(const char *name, const char *v, int lo, int hi)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (!*v || *end || x < lo || x > hi) {
        fprintf(stderr, "drover-demo-train: --%s %s: expected a number in [%d, %d]\n", name, v,
                lo, hi);
        exit(2);
    }
    return (int)x;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int steps = 20, every = 5, step_ms = 100, keep = 3, fail_at = -1, fail_rank = 0,
        hold_at = -1;
    static const struct option opts[] = {
        {"steps", required_argument, 0, 's'},       {"checkpoint-every", required_argument, 0, 'k'},
        {"step-ms", required_argument, 0, 'm'},     {"keep", required_argument, 0, 'K'},
        {"fail-at", required_argument, 0, 'f'},     {"fail-rank", required_argument, 0, 'r'},
        {"hold-at", required_argument, 0, 'H'},     {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 's': steps = flag_int("steps", optarg, 1, 100000000); break;
        case 'k': every = flag_int("checkpoint-every", optarg, 0, 100000000); break;
        case 'm': step_ms = flag_int("step-ms", optarg, 0, 3600000); break;
        case 'K': keep = flag_int("keep", optarg, 1, 1000); break;
        case 'f': fail_at = flag_int("fail-at", optarg, 1, 100000000); break;
        case 'r': fail_rank = flag_int("fail-rank", optarg, 0, MAX_WORLD - 1); break;
        case 'H': hold_at = flag_int("hold-at", optarg, 1, 100000000); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "drover-demo-train: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    world = env_int("WORLD_SIZE", 1, 1, MAX_WORLD);
    rank = env_int("RANK", 0, 0, world - 1);
    attempt = env_int("DROVER_JOB_ATTEMPT", 1, 1, 1000000);
    int port = env_int("MASTER_PORT", 29500, 1, 65535);
    const char *addr = getenv("MASTER_ADDR") && *getenv("MASTER_ADDR") ? getenv("MASTER_ADDR")
                                                                        : "127.0.0.1";
    ckdir = getenv("DROVER_CHECKPOINT_DIR") && *getenv("DROVER_CHECKPOINT_DIR")
                ? getenv("DROVER_CHECKPOINT_DIR") : NULL;
    if (ckdir)
        mkdir(ckdir, 0700);
    printf("rank %d of %d, master %s:%d, attempt %d, local rank %s of %s, node %s of %s\n", rank,
           world, addr, port, attempt, getenv("LOCAL_RANK") ? getenv("LOCAL_RANK") : "?",
           getenv("LOCAL_WORLD_SIZE") ? getenv("LOCAL_WORLD_SIZE") : "?",
           getenv("NODE_RANK") ? getenv("NODE_RANK") : "?",
           getenv("NNODES") ? getenv("NNODES") : "?");
    rendezvous(addr, port);
    /* the newest step every rank holds complete: the smallest of the
     * ranks' newest, checked (a rank may lack it: restored from older
     * uploads elsewhere, or pruned here), then the next older, ... */
    int start = (int)all_reduce((double)newest_complete(1 << 30), 1);
    while (start > 0 && all_reduce(newest_complete(start) == start ? 1.0 : 0.0, 1) < 1.0)
        start = (int)all_reduce((double)newest_complete(start - 1), 1);
    double w = 0.0, target = 1.0 + rank;   /* each rank pulls w to its own target */
    if (start > 0) {
        load(start, &w);
        printf("resumed from step %d\n", start);
    }
    snprintf(run_line, sizeof run_line,
             "rank %d world %d master %s:%d attempt %d resumed %d local %s/%s node %s/%s", rank,
             world, addr, port, attempt, start, getenv("LOCAL_RANK") ? getenv("LOCAL_RANK") : "?",
             getenv("LOCAL_WORLD_SIZE") ? getenv("LOCAL_WORLD_SIZE") : "?",
             getenv("NODE_RANK") ? getenv("NODE_RANK") : "?",
             getenv("NNODES") ? getenv("NNODES") : "?");
    double loss = 0;
    for (int step = start + 1; step <= steps; step++) {
        if (step == fail_at && rank == fail_rank && attempt == 1) {
            fprintf(stderr, "drover-demo-train: rank %d: failing at step %d as asked "
                            "(--fail-at)\n", rank, step);
            return 1;
        }
        if (step_ms > 0) {
            struct timespec ts = {step_ms / 1000, (long)(step_ms % 1000) * 1000000L};
            while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
        }
        double grad = all_reduce(w - target, 0) / world;
        loss = all_reduce((w - target) * (w - target), 0) / world;
        w -= 0.5 * grad;
        printf("step %d loss %.6f\n", step, loss);
        if (every > 0 && step % every == 0)
            save(step, w, keep);
        if (step == hold_at && attempt == 1) {
            printf("holding at step %d (--hold-at)\n", step);
            for (;;)
                pause();
        }
    }
    printf("done: %d steps, loss %.6f, w %.6f\n", steps, loss, w);
    return 0;
}
