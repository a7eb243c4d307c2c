#!/usr/bin/env python3
"""Bar charts of the workload benchmark's JSON lines, one SVG per workload.

Usage:

    benches/chart.py [-o DIR] [FILE ...]

    # chronopool and its Rust peers, straight from the bench:
    cargo bench -p chronopool-benches --bench workloads > results.jsonl
    benches/chart.py results.jsonl                  # -> benches/results/charts/*.svg

    # several harnesses together (same line format), from files or stdin:
    benches/chart.py chronopool.jsonl rust-peers.jsonl jvm.jsonl -o /tmp/charts
    cat *.jsonl | benches/chart.py -o /tmp/charts   # "-" or no FILE: stdin

Input: lines {"system":..,"workload":..,"metric":..,"value":..} as printed by
`cargo bench -p chronopool-benches --bench workloads`, by the shared Rust peer
harness and by the JVM harness (systems like `jdk-stpe`, `netty-hwt-1ms`). Any
other line (a "=== run 2" header, a blank line) is skipped. When one (system, workload,
metric) appears more than once (several runs pasted together), its bar shows
the median and its label says how many values it stands for.

Output: DIR/<workload>.svg (default DIR: benches/results/charts beside this
script), one horizontal bar chart per metric, one bar per system in the same
order in every panel: chronopool's systems first (names starting with
`chronopool`, highlighted), then the Rust peers, then the JVM peers (names
starting with `jdk-`, `java-`, `netty-`). Every bar carries its value. A
panel uses a log scale where its positive values span more than 100x.
Lower is better for every metric but `runs_ratio`. A system whose
`runs_ratio` is below 0.99 in a workload did not keep up with the schedule:
its label carries a dagger in that workload's panels (its other figures there
cover less work), the same rule as the bench's summary table.

Python 3 standard library only.
"""

import argparse
import html
import json
import math
import statistics
import sys
from pathlib import Path

# The spec's workload order; workloads not listed follow in input order.
WORKLOAD_ORDER = ["spawn", "spawn-tree", "timer-fire", "cancel", "periodic", "idle", "latency", "sleep-future"]

# A runs_ratio below this means the system fell behind (as in the bench's table).
KEPT_UP = 0.99

# A panel switches to a log scale when max / min of its positive values exceeds this.
LOG_SPAN = 100.0

JVM_PREFIXES = ("jdk-", "java-", "netty-")

COLORS = {"chronopool": "#d9480f", "rust": "#5c7cfa", "jvm": "#868e96"}
LEGEND = [("chronopool", "chronopool"), ("rust", "Rust peer"), ("jvm", "JVM peer")]

# Layout, in SVG user units (px).
WIDTH = 860
BAR_H = 16
BAR_GAP = 5
FONT = 12
CHAR_W = 7.0  # rough width of one character at FONT
PANEL_TOP = 34  # title and axis labels above the bars
PANEL_BOTTOM = 14
VALUE_ROOM = 110  # right of the plot area: the longest value label


def family(system):
    """Which group a system belongs to: chronopool, rust (peer) or jvm (peer)."""
    if system.startswith("chronopool"):
        return "chronopool"
    if system.startswith(JVM_PREFIXES):
        return "jvm"
    return "rust"


def read_lines(paths):
    """Yields the text lines of the given files ("-": stdin; none: stdin)."""
    if not paths:
        paths = ["-"]
    for path in paths:
        if path == "-":
            yield from sys.stdin
        else:
            with open(path, encoding="utf-8") as f:
                yield from f


def parse(lines):
    """The figures: {workload: {metric: {system: [values]}}}, plus the systems
    in order of first appearance."""
    figures, systems = {}, []
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            rec = json.loads(line)
            system, workload, metric = rec["system"], rec["workload"], rec["metric"]
            value = rec["value"]
        except (ValueError, KeyError, TypeError):
            continue
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            continue
        figures.setdefault(workload, {}).setdefault(metric, {}).setdefault(system, []).append(float(value))
        if system not in systems:
            systems.append(system)
    return figures, systems


def system_order(systems):
    """chronopool's systems, then the Rust peers, then the JVM peers; input
    order within each group."""
    rank = {"chronopool": 0, "rust": 1, "jvm": 2}
    return sorted(systems, key=lambda s: (rank[family(s)], systems.index(s)))


def fmt(v):
    """A value label: about 4 significant digits, thousands separated."""
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.1f}"
    if a >= 10:
        return f"{v:.2f}"
    if a >= 0.01 or v == 0:
        return f"{v:.3f}"
    return f"{v:.2g}"


def nice_step(span, ticks=5):
    """A step of 1, 2 or 5 times a power of ten giving about `ticks` ticks."""
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * power >= raw:
            return m * power
    return 10 * power


class Scale:
    """Maps values of one panel onto x pixels, linearly or logarithmically."""

    def __init__(self, values, x0, x1):
        self.x0, self.x1 = x0, x1
        positive = [v for v in values if v > 0]
        self.log = bool(positive) and min(positive) * LOG_SPAN < max(positive)
        if self.log:
            self.lo = 10 ** math.floor(math.log10(min(positive)))
            self.hi = 10 ** math.ceil(math.log10(max(positive)))
            if self.hi <= self.lo:
                self.hi = self.lo * 10
        else:
            lo, hi = min(0.0, min(values)), max(0.0, max(values))
            if hi == lo:
                hi = lo + 1.0
            step = nice_step(hi - lo)
            self.lo = math.floor(lo / step) * step
            self.hi = math.ceil(hi / step) * step
            self.step = step

    def x(self, v):
        """The x pixel of value v (clamped to the plot area)."""
        if self.log:
            if v <= self.lo:
                return self.x0
            t = (math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        else:
            t = (v - self.lo) / (self.hi - self.lo)
        return self.x0 + max(0.0, min(1.0, t)) * (self.x1 - self.x0)

    def base(self):
        """Where bars start: 0 on a linear scale, the left edge on a log one."""
        return self.x0 if self.log else self.x(0.0)

    def ticks(self):
        """The gridline values."""
        if self.log:
            k0, k1 = round(math.log10(self.lo)), round(math.log10(self.hi))
            return [10.0**k for k in range(k0, k1 + 1)]
        n = round((self.hi - self.lo) / self.step)
        return [self.lo + i * self.step for i in range(n + 1)]


def tick_label(v, log):
    """A gridline label."""
    if log and (v >= 1e6 or v < 1e-2):
        return f"1e{round(math.log10(v))}"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:g}"


def text(x, y, s, anchor="start", size=FONT, weight="normal", fill="#212529"):
    """An SVG text element."""
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" '
        f'font-weight="{weight}" fill="{fill}">{html.escape(s)}</text>'
    )


def fell_behind(metrics):
    """The systems whose runs_ratio (median) in this workload is below KEPT_UP."""
    ratios = metrics.get("runs_ratio", {})
    return {s for s, vs in ratios.items() if statistics.median(vs) < KEPT_UP}


def label_width(systems):
    """Room for the system labels left of the bars."""
    longest = max(len(s) + 6 for s in systems)  # " (×3)" and a dagger
    return 16 + longest * CHAR_W


def panel(metric, by_system, order, behind, top, label_w):
    """The SVG elements of one metric's panel starting at y = top, and its height."""
    systems = [s for s in order if s in by_system]
    values = {s: statistics.median(by_system[s]) for s in systems}
    x0, x1 = label_w, WIDTH - VALUE_ROOM
    scale = Scale(list(values.values()), x0, x1)
    better = "higher is better" if metric == "runs_ratio" else "lower is better"
    title = f"{metric} ({better}{', log scale' if scale.log else ''})"
    out = [text(10, top + 14, title, size=FONT + 1, weight="bold")]
    bars_top = top + PANEL_TOP
    bars_h = len(systems) * (BAR_H + BAR_GAP)
    for t in scale.ticks():
        x = scale.x(t)
        out.append(
            f'<line x1="{x:.1f}" y1="{bars_top - 4}" x2="{x:.1f}" y2="{bars_top + bars_h}" '
            'stroke="#dee2e6" stroke-width="1"/>'
        )
        out.append(text(x, bars_top - 8, tick_label(t, scale.log), anchor="middle", size=FONT - 2, fill="#868e96"))
    for i, s in enumerate(systems):
        y = bars_top + i * (BAR_H + BAR_GAP)
        v = values[s]
        ours = family(s) == "chronopool"
        count = len(by_system[s])
        label = s + (f" (×{count})" if count > 1 else "") + (" †" if s in behind and metric != "runs_ratio" else "")
        weight = "bold" if ours else "normal"
        out.append(text(label_w - 8, y + BAR_H - 4, label, anchor="end", weight=weight))
        xa, xb = sorted((scale.base(), scale.x(v)))
        outline = ' stroke="#212529" stroke-width="1.5"' if ours else ""
        out.append(
            f'<rect x="{xa:.1f}" y="{y}" width="{max(xb - xa, 1.0):.1f}" height="{BAR_H}" '
            f'fill="{COLORS[family(s)]}"{outline}/>'
        )
        out.append(text(max(xb, scale.base()) + 5, y + BAR_H - 4, fmt(v), weight=weight))
    return out, PANEL_TOP + bars_h + PANEL_BOTTOM


def legend(y, systems, behind):
    """The legend line for the groups present (and the dagger's meaning
    where it is used)."""
    out, x = [], 10
    present = {family(s) for s in systems}
    for key, name in (entry for entry in LEGEND if entry[0] in present):
        out.append(f'<rect x="{x}" y="{y - 10}" width="12" height="12" fill="{COLORS[key]}"/>')
        out.append(text(x + 17, y, name, size=FONT - 1))
        x += 30 + len(name) * CHAR_W
    if behind:
        out.append(text(x + 10, y, f"† runs_ratio < {KEPT_UP}: fell behind; its figures cover less work", size=FONT - 1))
    return out


def workload_svg(workload, metrics, order):
    """The SVG document of one workload."""
    systems = [s for s in order if any(s in m for m in metrics.values())]
    behind = fell_behind(metrics)
    label_w = label_width(systems)
    body, y = [text(10, 22, f"workload: {workload}", size=FONT + 4, weight="bold")], 34
    for metric, by_system in metrics.items():
        elements, height = panel(metric, by_system, order, behind, y, label_w)
        body += elements
        y += height
    body += legend(y + 8, systems, behind)
    height = y + 20
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
            f'viewBox="0 0 {WIDTH} {height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">',
            f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
            *body,
            "</svg>",
            "",
        ]
    )


def workloads_in_order(figures):
    """The spec's workloads first, in its order, then any others."""
    known = [w for w in WORKLOAD_ORDER if w in figures]
    return known + [w for w in figures if w not in WORKLOAD_ORDER]


def main(argv=None):
    """Reads the JSON lines, writes one SVG per workload, lists them on stderr."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", help='JSON-lines files ("-" or none: stdin)')
    ap.add_argument(
        "-o",
        "--out",
        default=str(Path(__file__).resolve().parent / "results" / "charts"),
        help="output directory (default: benches/results/charts)",
    )
    args = ap.parse_args(argv)
    figures, systems = parse(read_lines(args.files))
    if not figures:
        print("chart.py: no JSON lines with system, workload, metric and value", file=sys.stderr)
        return 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    order = system_order(systems)
    for workload in workloads_in_order(figures):
        path = out / f"{workload}.svg"
        path.write_text(workload_svg(workload, figures[workload], order), encoding="utf-8")
        print(f"chart.py: wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
