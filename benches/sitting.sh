#!/usr/bin/env bash
# One sitting of the peer comparison, as the figures of README.md and
# benches/README.md were taken: the workloads bench (chronopool on each timer
# queue beside the Rust peers), the JVM harness if it is there, the workloads
# bench again; then the files in benches/results/ and the tables.
#
#   benches/sitting.sh                 # ~13 min on 2 cores (~3.5 min per Rust run)
#   JVM_RUN=/path/to/jvm/run benches/sitting.sh
#   JVM_RUN= benches/sitting.sh        # no JVM column
#
# Writes (overwrites):
#   benches/results/workloads.jsonl        every run's JSON lines, in sections:
#                                          "=== run 1", "=== jvm", "=== run 2"
#   benches/results/workloads-tables.txt   each Rust run's ratio table (the
#                                          bench's stderr summary), then the
#                                          tables of README.md and benches/README.md
#   benches/results/charts/*.svg           one chart per workload (benches/chart.py)
# and prints the README's table on stdout. Each run's full stderr goes to
# target/sitting/run-N.log.
#
# The JVM harness (JDK ScheduledThreadPoolExecutor, ForkJoinPool,
# java.util.Timer, Netty's HashedWheelTimer) is not part of this repository:
# it is looked for at ../shared/bench/jvm/run unless JVM_RUN says otherwise.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

results=benches/results
logs=target/sitting
mkdir -p "$results/charts" "$logs"
jvm_run=${JVM_RUN-../shared/bench/jvm/run}
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo ", uncommitted changes" || true)
cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' || echo unknown)

cargo bench -p chronopool-benches --bench workloads --no-run

rust_run() { # N
    echo "=== run $1"
    cargo bench -q -p chronopool-benches --bench workloads 2> "$logs/run-$1.log"
}

out=$(mktemp)
{
    echo "# $(date -u '+%Y-%m-%d %H:%M') UTC, commit $commit$dirty, $(nproc) CPUs ($cpu)."
    echo "# run 1, run 2: cargo bench -p chronopool-benches --bench workloads; jvm (if there): the JVM harness, between them."
    rust_run 1
    if [[ -n "$jvm_run" && -x "$jvm_run" ]]; then
        echo "=== jvm"
        "$jvm_run"
    else
        echo "sitting: no JVM harness at '${jvm_run}': no JVM figures" >&2
    fi
    rust_run 2
} > "$out"
mv "$out" "$results/workloads.jsonl"

{
    head -1 "$results/workloads.jsonl"
    for n in 1 2; do
        echo
        echo "Run $n"
        sed -n '/^Summary/,$p' "$logs/run-$n.log"
    done
    echo
    echo "README.md's table (benches/table.py):"
    python3 benches/table.py "$results/workloads.jsonl"
    echo
    echo "benches/README.md's table (benches/table.py --all-queues):"
    python3 benches/table.py --all-queues "$results/workloads.jsonl"
} > "$results/workloads-tables.txt"

python3 benches/chart.py "$results/workloads.jsonl" -o "$results/charts"
python3 benches/table.py "$results/workloads.jsonl"
