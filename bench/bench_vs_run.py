#!/usr/bin/env python3
"""Does `stagecraft bench` measure what `stagecraft run` runs?

For one network, several trials; each trial runs `stagecraft bench NET` (every schedule, timed in
alternating blocks inside one process) and, right after, `stagecraft run NET --schedule S` for
each of the same schedules (one process each, the schedule searched with the same cache). Per
schedule it reports the median over trials of bench's median and of run's median, and their
ratio; it exits 1 when a ratio leaves [1 - tolerance, 1 + tolerance] (default 15%: this VM drifts
by more than that between phases of seconds, so trials and medians, never one run).

Usage: bench/bench_vs_run.py [--network inception_v3] [--trials 5] [--iters 20]
                             [--tolerance 0.15] [--out bench/results/bench_vs_run.md]
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "scripts"))
from pyenv import ROOT, machine  # noqa: E402

# bench's schedule names and the `run` flags that build the same schedule.
SCHEDULES = {
    "sequential": ["--schedule", "sequential"],
    "greedy": ["--schedule", "greedy"],
    "dp-merge": ["--schedule", "dp", "--mode", "merge"],
    "dp-concurrent": ["--schedule", "dp", "--mode", "concurrent"],
    "dp-both": ["--schedule", "dp", "--mode", "both"],
}


def call(cmd: list[str]) -> str:
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"bench_vs_run: {' '.join(cmd)} failed: {(result.stderr or result.stdout).strip()[-400:]}")
    return result.stdout


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--network", default="inception_v3")
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--iters", type=int, default=20, help="timed runs per schedule, in bench and in run")
    p.add_argument("--tolerance", type=float, default=0.15)
    p.add_argument("--stagecraft", default=str(ROOT / "build" / "cli" / "stagecraft"))
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "bench_vs_run.md"))
    args = p.parse_args()
    binary = args.stagecraft
    if not Path(binary).exists():
        sys.exit(f"bench_vs_run: {binary} does not exist: build first (./scripts/test.sh)")
    work = Path(tempfile.mkdtemp(prefix="bench_vs_run."))
    cache = ["--cache-dir", str(work / "cache")]
    bench_ms: dict[str, list[float]] = {s: [] for s in SCHEDULES}
    run_ms: dict[str, list[float]] = {s: [] for s in SCHEDULES}
    for trial in range(args.trials):
        print(f"bench_vs_run: trial {trial + 1}/{args.trials}", file=sys.stderr, flush=True)
        call([binary, "bench", args.network, "--backend", "cpu", "--iters", str(args.iters),
              "--out", str(work / "bench"), *cache])
        results = json.loads((work / "bench" / "bench.json").read_text())["results"]
        for r in results:
            if r["schedule"] in bench_ms:
                bench_ms[r["schedule"]].append(r["median_ms"])
        names = list(SCHEDULES)
        names = names[trial % len(names):] + names[:trial % len(names)]  # phases spread over all
        for name in names:
            flags = SCHEDULES[name]
            out = call([binary, "run", args.network, "--backend", "cpu", *flags,
                        "--iters", str(args.iters), *cache])
            m = re.search(r"latency: median ([0-9.]+) ms", out)
            if not m:
                sys.exit(f"bench_vs_run: no latency in the output of run {name}:\n{out}")
            run_ms[name].append(float(m.group(1)))

    lines = [f"# `stagecraft bench` against `stagecraft run`: {args.network}", "",
             f"- machine: {machine()}",
             f"- command: `python3 bench/bench_vs_run.py --network {args.network} --trials {args.trials} "
             f"--iters {args.iters} --tolerance {args.tolerance}`",
             f"- per trial: `stagecraft bench` (all schedules, alternating blocks, {args.iters} timed runs "
             "each), then `stagecraft run --schedule ...` per schedule (order rotated per trial); medians over trials of each "
             "command's median", "",
             "| schedule | bench ms (per trial) | run ms (per trial) | bench / run |", "|---|---|---|---|"]
    failed = []
    for name in SCHEDULES:
        b, r = statistics.median(bench_ms[name]), statistics.median(run_ms[name])
        ratio = b / r
        if abs(ratio - 1) > args.tolerance:
            failed.append(f"{name} {ratio:.2f}")
        lines.append(f"| {name} | {b:.1f} ({', '.join(f'{v:.1f}' for v in bench_ms[name])}) | "
                     f"{r:.1f} ({', '.join(f'{v:.1f}' for v in run_ms[name])}) | {ratio:.2f} |")
    lines += ["", f"Within ±{args.tolerance:.0%}: " + ("yes" if not failed else "no: " + ", ".join(failed))]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
