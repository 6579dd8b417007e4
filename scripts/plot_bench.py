#!/usr/bin/env python3
"""Draws `stagecraft bench` results: median latency of each schedule as grouped bars, one group
per (network, precision), with p10-p90 whiskers; several CSV files (rounds) of one configuration
are pooled by taking, per schedule, the median of their medians.

Usage: scripts/plot_bench.py OUT.png [LABEL=]BENCH_DIR_OR_CSV... [--title TEXT]
(LABEL names the precision/configuration of a file that predates the CSV's dtype column.)
Installs matplotlib with pip when it is missing.
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys


def ensure_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("plot_bench: installing matplotlib with pip...", file=sys.stderr)
        subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "matplotlib"])
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_served(path, models, concurrency, by, title):
    """Requests/s (top) and p99 latency (bottom) against requests in flight, stagecraft and ONNX
    Runtime, one column per model; `by[(engine, model, concurrency)]` holds "rps" and "p99_ms"
    (the serving benchmarks: bench/serve_bench.py, bench/ray_serve_bench.py)."""
    plt = ensure_matplotlib()
    fig, axes = plt.subplots(2, len(models), figsize=(5 * len(models), 7), squeeze=False)
    for j, model in enumerate(models):
        for engine in ("stagecraft", "onnxruntime"):
            rows = [by[(engine, model, c)] for c in concurrency]
            axes[0][j].plot(concurrency, [r["rps"] for r in rows], marker="o", label=engine)
            axes[1][j].plot(concurrency, [r["p99_ms"] for r in rows], marker="o", label=engine)
        axes[0][j].set_title(model)
        axes[0][j].set_ylabel("requests/s")
        axes[1][j].set_ylabel("p99 latency (ms)")
        axes[1][j].set_xlabel("requests in flight")
        for ax in (axes[0][j], axes[1][j]):
            ax.set_xscale("log", base=2)
            ax.grid(alpha=0.3)
            ax.legend()
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def read_rows(paths):
    rows = []
    for spec in paths:
        label, _, path = spec.rpartition("=") if "=" in spec else ("", "", spec)
        csv_path = os.path.join(path, "bench.csv") if os.path.isdir(path) else path
        if not os.path.exists(csv_path):
            sys.exit(f"plot_bench: error: {csv_path} does not exist (give bench --out folders or CSV files)")
        with open(csv_path, newline="") as f:
            for row in csv.DictReader(f):
                if "median_ms" not in row or "schedule" not in row:
                    sys.exit(f"plot_bench: error: {csv_path} is not a stagecraft bench CSV")
                if label:
                    row["dtype"] = label
                rows.append(row)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="image to write (.png or .svg)")
    parser.add_argument("inputs", nargs="+", help="bench --out folders or bench.csv files")
    parser.add_argument("--title", default="stagecraft bench: median latency per schedule")
    args = parser.parse_args()
    rows = read_rows(args.inputs)
    groups = {}  # (network, dtype) -> schedule -> [(median, p10, p90)]
    order = []
    for r in rows:
        key = (r["network"], r.get("dtype", "f32"))
        if key not in groups:
            groups[key] = {}
            order.append(key)
        groups[key].setdefault(r["schedule"], []).append(
            (float(r["median_ms"]), float(r["p10_ms"]), float(r["p90_ms"])))
    schedules = []
    for g in groups.values():
        for s in g:
            if s not in schedules:
                schedules.append(s)

    plt = ensure_matplotlib()
    fig, ax = plt.subplots(figsize=(max(6, 1.8 * len(order) + 2), 4.2))
    width = 0.8 / max(1, len(schedules))
    for k, schedule in enumerate(schedules):
        xs, ys, lo, hi = [], [], [], []
        for i, key in enumerate(order):
            samples = groups[key].get(schedule)
            if not samples:
                continue
            med = statistics.median(s[0] for s in samples)
            p10 = statistics.median(s[1] for s in samples)
            p90 = statistics.median(s[2] for s in samples)
            xs.append(i + (k - (len(schedules) - 1) / 2) * width)
            ys.append(med)
            lo.append(med - p10)
            hi.append(p90 - med)
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=schedule)
    ax.set_xticks(range(len(order)))
    ax.set_xticklabels([f"{n}\n{d}" for n, d in order])
    ax.set_ylabel("median latency (ms), p10-p90 whiskers")
    ax.set_title(args.title)
    ax.legend(fontsize=8, ncol=min(5, len(schedules)))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
