#!/usr/bin/env python3
"""gen_trace.py — a synthetic training-job trace for `drover-sim jobs`, drawn
from the shape of the published Philly and Helios traces (sources and which
numbers are assumptions: bench/jobs/README.md). Python 3, stdlib only;
deterministic for a seed.

    gen_trace.py [--jobs N] [--users U] [--hours H] [--seed S]
                 [--max-gpus G] [--nodes-out NODES.csv --nodes K]
                 [--from-helios cluster_log.csv] > TRACE.csv

--from-helios draws each job's (GPUs, duration) pair, and the hour-of-day
profile of arrivals, from a Helios cluster_log.csv (the public SenseTime
trace, github.com/S-Lab-System-Group/HeliosData) instead of the built-in
shapes: the published distribution itself, resampled. Without it, the
built-in shapes are assumptions (README).

Columns: submit_time,user,workers,gpus_per_worker,duration,priority,preemptible
"""
import argparse
import csv
import math
import random
import sys
from datetime import datetime

# GPU demand per job (total GPUs): heavily skewed to 1 GPU with a tail of
# multi-node gangs (ASSUMPTION shaped after Philly/Helios, see README).
GPU_DEMAND = [(1, 0.60), (2, 0.12), (4, 0.12), (8, 0.10), (16, 0.04), (32, 0.015), (64, 0.005)]
# Durations: log-normal, median 10 minutes, sigma 2.0 (heavy tail: p99 of
# roughly a day), clipped to [30 s, 7 days] (ASSUMPTION, see README).
DUR_MEDIAN_S = 600.0
DUR_SIGMA = 2.0
DUR_MIN_S, DUR_MAX_S = 30.0, 7 * 86400.0
# Larger jobs run longer (ASSUMPTION): the median scales with gpus ** 0.3.
DUR_GPU_EXP = 0.3
# Diurnal arrivals: a rate that peaks mid-day at 2x the trough (ASSUMPTION).
DIURNAL = 0.5


def pick(rng, table):
    x = rng.random() * sum(w for _, w in table)
    for v, w in table:
        x -= w
        if x <= 0:
            return v
    return table[-1][0]


def load_helios(path, max_gpus):
    """(gpus, nodes, duration) of every GPU job with a positive duration, and
    the count of submissions per hour of the day, from a Helios
    cluster_log.csv (columns by header name: gpu_num, node_num, duration,
    submit_time 'YYYY-MM-DD HH:MM:SS')."""
    jobs, hours = [], [0] * 24
    try:
        f = open(path, newline="")
    except OSError as e:
        sys.exit("gen_trace.py: %s: %s" % (path, e.strerror))
    with f:
        rd = csv.DictReader(f)
        need = {"gpu_num", "node_num", "duration", "submit_time"}
        missing = need - set(rd.fieldnames or [])
        if missing:
            sys.exit("gen_trace.py: %s: not a Helios cluster_log.csv (no column %s)"
                     % (path, ", ".join(sorted(missing))))
        for n, row in enumerate(rd, start=2):
            try:
                g, nodes, d = int(row["gpu_num"]), int(row["node_num"] or 0), float(row["duration"])
                h = datetime.strptime(row["submit_time"], "%Y-%m-%d %H:%M:%S").hour
            except (TypeError, ValueError):
                sys.exit("gen_trace.py: %s:%d: bad gpu_num, node_num, duration or submit_time"
                         % (path, n))
            if g < 1 or d <= 0 or g > max_gpus:
                continue
            jobs.append((g, nodes, d))
            hours[h] += 1
    if not jobs:
        sys.exit("gen_trace.py: %s: no GPU job with a duration > 0" % path)
    return jobs, hours


def gang_shape(gpus, nodes):
    """workers x GPUs per worker for a job of `gpus` GPUs on `nodes` nodes
    (8-GPU nodes): one worker up to 8; else one worker per node when the
    GPUs divide evenly into at most 8 per node; else 8-GPU workers,
    rounded up."""
    if gpus <= 8:
        return 1, gpus
    if nodes > 0 and gpus % nodes == 0 and gpus // nodes <= 8:
        return nodes, gpus // nodes
    return (gpus + 7) // 8, 8


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--hours", type=float, default=48.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-gpus", type=int, default=64, help="largest job (GPUs)")
    ap.add_argument("--nodes", type=int, default=16, help="nodes of 8 GPUs in --nodes-out")
    ap.add_argument("--nodes-out", help="also write a node list (8 x H100 per node)")
    ap.add_argument("--from-helios", metavar="CLUSTER_LOG",
                    help="resample (GPUs, duration) and the hour-of-day arrival profile "
                         "from a Helios cluster_log.csv")
    a = ap.parse_args()
    if a.jobs < 1 or a.users < 1 or a.hours <= 0 or a.max_gpus < 1 or a.nodes < 1:
        ap.error("--jobs, --users, --hours, --max-gpus and --nodes must be positive")
    rng = random.Random(a.seed)
    helios = load_helios(a.from_helios, a.max_gpus) if a.from_helios else None
    if helios:
        peak = max(helios[1])
        hour_w = [h / peak for h in helios[1]]
    # users: Zipf-like activity (a few heavy users), ASSUMPTION
    weights = [1.0 / (k + 1) for k in range(a.users)]
    span = a.hours * 3600.0
    mean_gap = span / a.jobs
    t = 0.0
    out = sys.stdout
    out.write("submit_time,user,workers,gpus_per_worker,duration,priority,preemptible\n")
    for _ in range(a.jobs):
        if helios:
            # thinning with the trace's hour-of-day profile (mean gap kept)
            mean_w = sum(hour_w) / 24
            while True:
                t += rng.expovariate(1.0 / (mean_gap * mean_w))
                if rng.random() <= hour_w[int(t // 3600) % 24]:
                    break
            g, nodes, dur = rng.choice(helios[0])
            workers, per = gang_shape(g, nodes)
        else:
            # thinning of a Poisson process with a diurnal rate
            while True:
                t += rng.expovariate(1.0 / (mean_gap * (1 - DIURNAL / 2)))
                rate = 1 - DIURNAL / 2 + (DIURNAL / 2) * math.sin(2 * math.pi * (t / 86400.0 - 0.25))
                if rng.random() * (1 + DIURNAL / 2) <= rate + DIURNAL / 2:
                    break
            gpus = min(pick(rng, GPU_DEMAND), a.max_gpus)
            workers, per = (1, gpus) if gpus <= 8 else (gpus // 8, 8)
            med = DUR_MEDIAN_S * gpus ** DUR_GPU_EXP
            dur = min(max(rng.lognormvariate(math.log(med), DUR_SIGMA), DUR_MIN_S), DUR_MAX_S)
        user = "u%02d" % pick(rng, list(zip(range(a.users), weights)))
        # 20% are high-priority production runs, 60% preemptible (ASSUMPTION)
        prio = 10 if rng.random() < 0.2 else 0
        pre = 1 if prio == 0 and rng.random() < 0.75 else 0
        out.write("%.1f,%s,%d,%d,%.1f,%d,%d\n" % (t, user, workers, per, dur, prio, pre))
    if a.nodes_out:
        with open(a.nodes_out, "w") as f:
            f.write("sn,cpu_milli,memory_mib,gpu,model\n")
            for k in range(a.nodes):
                f.write("node%03d,192000,2097152,8,H100\n" % k)


if __name__ == "__main__":
    main()
