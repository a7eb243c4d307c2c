#!/usr/bin/env python3
"""The performance tables of README.md and benches/README.md, from a sitting's
JSON lines.

Usage:

    benches/table.py [--all-queues] [FILE ...]

    benches/table.py benches/results/workloads.jsonl               # README.md's table
    benches/table.py --all-queues benches/results/workloads.jsonl  # benches/README.md's

Input: the JSON lines of `cargo bench -p chronopool-benches --bench workloads`
and of the JVM harness, as `benches/sitting.sh` writes them: sections opened by
lines starting with `===`. Every section holding a `chronopool-*` system is one
run of the Rust bench (its cells show one figure per run, in order); the JVM
systems (`jdk-`, `java-`, `netty-`) may come in any section (several values of
one figure: their median). Other lines are skipped.

Output (stdout): a Markdown table, one row per workload and metric. Lower is
better for every metric but `runs_ratio`. A system whose `runs_ratio` is below
0.99 in a workload fell behind its schedule: it is left out of the best of its
group for that workload's other metrics (as in the bench's own summary).

* default: chronopool's best queue (the one with the best mean over the runs),
  the best Rust peer and the best JVM peer, each named in its cell;
* `--all-queues`: one column per chronopool queue instead of the best one.

Python 3 standard library only.
"""

import argparse
import json
import statistics
import sys

# (workload, metric, label) in table order; late_max_us and overhead_ms are
# left out (the tables file has them).
ROWS = [
    ("spawn", "ns_per_task", "spawn · ns per task"),
    ("spawn-tree", "ns_per_task", "spawn-tree · ns per task"),
    ("timer-fire", "insert_ns_per_op", "timer-fire · insert ns/op"),
    ("timer-fire", "late_p50_us", "timer-fire · late p50 µs"),
    ("timer-fire", "late_p99_us", "timer-fire · late p99 µs"),
    ("cancel", "insert_ns_per_op", "cancel · insert ns/op"),
    ("cancel", "cancel_ns_per_op", "cancel · cancel ns/op"),
    ("cancel", "bytes_per_pending", "cancel · bytes per pending"),
    ("cancel", "bytes_after_cancel", "cancel · bytes after cancel"),
    ("periodic", "runs_ratio", "periodic · runs ratio (higher is better)"),
    ("periodic", "late_p99_us", "periodic · late p99 µs"),
    ("periodic", "cpu_ms", "periodic · CPU ms"),
    ("idle", "idle_cpu_ms", "idle · CPU ms in 5 s"),
    ("latency", "late_p50_us", "latency · late p50 µs"),
    ("latency", "late_p99_us", "latency · late p99 µs"),
    ("sleep-future", "insert_ns_per_op", "sleep-future · insert ns/op"),
    ("sleep-future", "late_p50_us", "sleep-future · late p50 µs"),
    ("sleep-future", "late_p99_us", "sleep-future · late p99 µs"),
    ("sleep-future", "bytes_per_pending", "sleep-future · bytes per pending"),
]

KEPT_UP = 0.99

NAMES = {
    "chronopool-heap": "heap",
    "chronopool-hashed-wheel": "hashed wheel",
    "chronopool-hierarchical-wheel": "hierarchical wheel",
    "chronopool-heap-sleep": "heap",
    "chronopool-hashed-wheel-sleep": "hashed wheel",
    "chronopool-hierarchical-wheel-sleep": "hierarchical wheel",
    "tokio-sleep": "tokio::time::sleep",
    "async-io-timer": "async-io Timer",
    "scheduled-thread-pool": "scheduled-thread-pool",
    "jdk-forkjoin": "ForkJoinPool",
    "jdk-stpe": "JDK STPE",
    "jdk-stpe-roc": "JDK STPE (remove on cancel)",
    "java-util-timer": "java.util.Timer",
    "netty-hwt-1ms": "Netty (1 ms)",
    "netty-hwt-100ms": "Netty (100 ms)",
}

JVM_PREFIXES = ("jdk-", "java-", "netty-")


def family(system):
    if system.startswith("chronopool"):
        return "chronopool"
    if system.startswith(JVM_PREFIXES):
        return "jvm"
    return "rust"


def read(paths):
    """The Rust runs ([{(system, workload, metric): value}]) and the JVM
    figures ({(system, workload, metric): [values]})."""
    sections, current = [], []
    for path in paths or ["-"]:
        f = sys.stdin if path == "-" else open(path, encoding="utf-8")
        for line in f:
            line = line.strip()
            if line.startswith("==="):
                sections.append(current)
                current = []
                continue
            if not line.startswith("{"):
                continue
            try:
                r = json.loads(line)
                key, value = (r["system"], r["workload"], r["metric"]), float(r["value"])
            except (ValueError, KeyError, TypeError):
                continue
            current.append((key, value))
        sections.append(current)
        current = []
    runs, jvm = [], {}
    for records in sections:
        if any(family(k[0]) == "chronopool" for k, _ in records):
            runs.append({k: v for k, v in records if family(k[0]) != "jvm"})
        for k, v in records:
            if family(k[0]) == "jvm":
                jvm.setdefault(k, []).append(v)
    jvm = {k: statistics.median(vs) for k, vs in jvm.items()}
    return runs, jvm


def better(metric, a, b):
    return a > b if metric == "runs_ratio" else a < b


def fmt(metric, v):
    if metric == "runs_ratio":
        return f"{v:.3f}"
    a = abs(v)
    if a >= 100:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.0f}"
    if a >= 1:
        return f"{v:.1f}"
    return f"{v:.2g}"


def behind(figures, workload):
    """Systems whose runs_ratio in `workload` is below KEPT_UP."""
    return {k[0] for k, v in figures.items() if k[1] == workload and k[2] == "runs_ratio" and v < KEPT_UP}


def best(runs, fam, workload, metric):
    """The system of family `fam` with the best mean over `runs`, and its
    values (one per run); None if no system of the family has the figure."""
    systems = {k[0] for run in runs for k in run if family(k[0]) == fam and k[1:] == (workload, metric)}
    if metric != "runs_ratio":
        for run in runs:
            systems -= behind(run, workload)
    scored = []
    for s in sorted(systems):
        values = [run.get((s, workload, metric)) for run in runs]
        if None in values:
            continue
        scored.append((statistics.mean(values), s, values))
    if not scored:
        return None
    pick = scored[0]
    for entry in scored[1:]:
        if better(metric, entry[0], pick[0]):
            pick = entry
    return pick[1], pick[2]


def cell(metric, found, named=True):
    if found is None:
        return "—"
    system, values = found
    figures = ", ".join(fmt(metric, v) for v in values)
    return f"{NAMES.get(system, system)} {figures}" if named else figures


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", help='JSON-lines files ("-" or none: stdin)')
    ap.add_argument("--all-queues", action="store_true", help="one column per chronopool queue")
    args = ap.parse_args(argv)
    runs, jvm = read(args.files)
    if not runs:
        print("table.py: no run with chronopool's systems", file=sys.stderr)
        return 1
    # A queue's column holds its executor's figures and, for sleep-future,
    # those of its timer futures (system "<queue>-sleep").
    def system(q, workload):
        return q + "-sleep" if workload == "sleep-future" else q

    queues = [
        s for s in NAMES
        if s.startswith("chronopool") and not s.endswith("-sleep")
        and any((system(s, w), w, m) in runs[0] for w, m, _ in ROWS)
    ]
    if args.all_queues:
        head = ["workload · metric"] + [NAMES[q] for q in queues] + ["best Rust peer", "best JVM peer"]
    else:
        head = ["workload · metric", "chronopool (best queue)", "best Rust peer", "best JVM peer"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for workload, metric, label in ROWS:
        if not any((system(q, workload), workload, metric) in run for run in runs for q in queues):
            continue
        row = [label]
        if args.all_queues:
            for q in queues:
                s = system(q, workload)
                values = [run.get((s, workload, metric)) for run in runs]
                row.append(cell(metric, None if None in values else (s, values), named=False))
        else:
            row.append(cell(metric, best(runs, "chronopool", workload, metric)))
        row.append(cell(metric, best(runs, "rust", workload, metric)))
        row.append(cell(metric, best([jvm], "jvm", workload, metric) if jvm else None))
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
