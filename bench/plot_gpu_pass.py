#!/usr/bin/env python3
"""Plots of a GPU pass (scripts/gpu_pass.sh) from its merged bench.csv and baseline.csv.

  bench/plot_gpu_pass.py RESULTS_DIR [--title TEXT]

Writes into RESULTS_DIR:
  normalised_throughput.png  IOS's figure: per network, each schedule's throughput over the
                             sequential schedule's (CUDA Graph replay of one stream), one panel per
                             precision (f32 strict, TF32, f16), with the geometric mean
  vs_pytorch.png             batch-1 latency of stagecraft (sequential, dp-both) beside PyTorch
                             eager and torch.compile(mode="reduce-overhead"), per precision
Needs matplotlib (the tools' virtual environment: scripts/pyenv.py installs it).
"""
from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from pyenv import reexec_in_venv  # noqa: E402

reexec_in_venv("plot_gpu_pass", __file__, ["matplotlib"], ["matplotlib"])

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SCHEDULES = ["sequential", "greedy", "dp-merge", "dp-concurrent", "dp-both"]
NETWORKS = ["inception_v3", "randwire", "nasnet_a_large", "squeezenet1_0"]
PRECISIONS = [("f32-strict", "f32", "f32 (FMA, no TF32)"), ("tf32", "tf32", "TF32"), ("f16-nhwc", "f16", "f16 (NHWC)")]


def geomean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", type=Path)
    p.add_argument("--title", default="")
    args = p.parse_args()
    bench = list(csv.DictReader(open(args.results / "bench.csv")))
    latency = {(r["variant"], r["network"], r["schedule"]): float(r["median_ms"]) for r in bench}
    baseline_path = args.results / "baseline.csv"
    baseline = list(csv.DictReader(open(baseline_path))) if baseline_path.exists() else []
    torch_ms = {(r["network"], r["engine"], r["precision"]): float(r["median_ms"])
                for r in baseline if r.get("median_ms") and not r.get("error")}

    fig, axes = plt.subplots(1, len(PRECISIONS), figsize=(15, 4.2), sharey=True)
    width = 0.8 / len(SCHEDULES)
    for ax, (variant, _, label) in zip(axes, PRECISIONS):
        groups = NETWORKS + ["geomean"]
        for i, schedule in enumerate(SCHEDULES):
            values = []
            for net in NETWORKS:
                seq, ms = latency.get((variant, net, "sequential")), latency.get((variant, net, schedule))
                values.append(seq / ms if seq and ms else 0.0)
            values.append(geomean(values))
            xs = [g + (i - (len(SCHEDULES) - 1) / 2) * width for g in range(len(groups))]
            ax.bar(xs, values, width, label=schedule)
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([g.replace("_", "\n", 1) for g in groups], fontsize=8)
        ax.set_title(label)
    axes[0].set_ylabel("throughput / sequential (CUDA Graph)")
    axes[0].legend(fontsize=8)
    fig.suptitle(args.title or "stagecraft schedules, batch 1: normalised throughput")
    fig.tight_layout()
    fig.savefig(args.results / "normalised_throughput.png", dpi=110)

    engines = [("stagecraft sequential", lambda n, v, p: latency.get((v, n, "sequential"))),
               ("stagecraft dp-both", lambda n, v, p: latency.get((v, n, "dp-both"))),
               ("PyTorch eager", lambda n, v, p: torch_ms.get((n, "pytorch-eager", p))),
               ("torch.compile reduce-overhead", lambda n, v, p: torch_ms.get((n, "pytorch-compile-ro", p)))]
    fig, axes = plt.subplots(1, len(PRECISIONS), figsize=(15, 4.2))
    width = 0.8 / len(engines)
    for ax, (variant, precision, label) in zip(axes, PRECISIONS):
        for i, (name, get) in enumerate(engines):
            values = [get(net, variant, precision) or 0.0 for net in NETWORKS]
            xs = [g + (i - (len(engines) - 1) / 2) * width for g in range(len(NETWORKS))]
            bars = ax.bar(xs, values, width, label=name)
            for bar, v in zip(bars, values):
                if v == 0.0:  # not measured: say so instead of drawing nothing
                    ax.text(bar.get_x() + bar.get_width() / 2, 0.1, "n/m", ha="center", fontsize=6, rotation=90)
        ax.set_xticks(range(len(NETWORKS)))
        ax.set_xticklabels([n.replace("_", "\n", 1) for n in NETWORKS], fontsize=8)
        ax.set_title(label)
        ax.set_ylabel("latency (ms, lower is better)")
    axes[0].legend(fontsize=8)
    fig.suptitle((args.title or "batch 1") + ": stagecraft and PyTorch (n/m: not measured)")
    fig.tight_layout()
    fig.savefig(args.results / "vs_pytorch.png", dpi=110)
    print(f"wrote {args.results / 'normalised_throughput.png'} and {args.results / 'vs_pytorch.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
