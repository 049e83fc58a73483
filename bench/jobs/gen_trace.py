#!/usr/bin/env python3
"""gen_trace.py — a synthetic training-job trace for `drover-sim jobs`, drawn
from the shape of the published Philly and Helios traces (sources and which
numbers are assumptions: bench/jobs/README.md). Python 3, stdlib only;
deterministic for a seed.

    gen_trace.py [--jobs N] [--users U] [--hours H] [--seed S]
                 [--max-gpus G] [--nodes-out NODES.csv --nodes K] > TRACE.csv

Columns: submit_time,user,workers,gpus_per_worker,duration,priority,preemptible
"""
import argparse
import math
import random
import sys

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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--hours", type=float, default=48.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-gpus", type=int, default=64, help="largest job (GPUs)")
    ap.add_argument("--nodes", type=int, default=16, help="nodes of 8 GPUs in --nodes-out")
    ap.add_argument("--nodes-out", help="also write a node list (8 x H100 per node)")
    a = ap.parse_args()
    if a.jobs < 1 or a.users < 1 or a.hours <= 0 or a.max_gpus < 1 or a.nodes < 1:
        ap.error("--jobs, --users, --hours, --max-gpus and --nodes must be positive")
    rng = random.Random(a.seed)
    # users: Zipf-like activity (a few heavy users), ASSUMPTION
    weights = [1.0 / (k + 1) for k in range(a.users)]
    span = a.hours * 3600.0
    mean_gap = span / a.jobs
    t = 0.0
    out = sys.stdout
    out.write("submit_time,user,workers,gpus_per_worker,duration,priority,preemptible\n")
    for _ in range(a.jobs):
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
