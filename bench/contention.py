#!/usr/bin/env python3
"""How much slower stagecraft and ONNX Runtime run while another process keeps one core busy.

Per model: an ONNX Runtime session (CPU provider, all optimisations, one thread per core) and a
stagecraft Session (default dp schedule, or --schedule), one process; rounds alternate an idle
phase and a loaded phase (a child process spinning on one core, started before and stopped after
the phase), and within each phase the engines alternate: --settle untimed runs each (a load
lasts longer than a few runs, and stagecraft adapts its intra-op threads to it after a few), then
blocks of --block runs after one untimed run. Prints the CPU, the medians per engine and phase, and each engine's slowdown (loaded
median / idle median), with the OpenMP settings of the environment (OMP_WAIT_POLICY,
GOMP_SPINCOUNT), which must be set before the process starts.

Usage: PYTHONPATH=build/python:python .venv/bin/python bench/contention.py MODEL.onnx...
           [--rounds 6] [--block 5] [--schedule dp] [--cache-dir DIR] [--out FILE.md]
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from pyenv import machine, ort_session, timed_block  # noqa: E402

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402

import stagecraft  # noqa: E402


def spin() -> None:
    while True:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--block", type=int, default=5)
    parser.add_argument("--settle", type=int, default=8,
                        help="untimed runs of each engine when a phase begins (a load lasts longer than a block: "
                             "stagecraft adapts its threads to it after a few runs)")
    parser.add_argument("--schedule", default="dp")
    parser.add_argument("--cache-dir", default=".cache/contention")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    env = ", ".join(f"{k}={os.environ[k]}" for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS")
                    if k in os.environ) or "OpenMP defaults"
    lines = [f"CPU: {machine()}; onnxruntime {ort.__version__}; {env}; stagecraft schedule "
             f"{args.schedule}; {args.rounds} rounds x {args.block} runs per engine and phase, after "
             f"{args.settle} untimed", "",
             "| model | engine | idle ms | one core busy ms | slowdown |", "|---|---|---|---|---|"]
    print(lines[0], flush=True)
    for path in args.models:
        ref = ort_session(path)
        info = ref.get_inputs()[0]
        x = np.random.default_rng(0).random([d if isinstance(d, int) else 1 for d in info.shape],
                                            dtype=np.float32)
        s = stagecraft.Session(path, schedule=args.schedule, cache_dir=args.cache_dir, progress=False)
        engines = {"onnxruntime": lambda: ref.run(None, {info.name: x}), "stagecraft": lambda: s.run(x)}
        times = {(e, phase): [] for e in engines for phase in ("idle", "loaded")}
        for _ in range(args.rounds):
            for phase in ("idle", "loaded"):
                hog = None
                if phase == "loaded":
                    hog = multiprocessing.Process(target=spin, daemon=True)
                    hog.start()
                    time.sleep(0.2)
                for _ in range(args.settle):
                    for f in engines.values():
                        f()
                for e, f in engines.items():
                    times[(e, phase)] += timed_block(f, args.block)
                if hog:
                    hog.terminate()
                    hog.join()
        model = Path(path).stem
        for e in engines:
            idle = statistics.median(times[(e, "idle")])
            loaded = statistics.median(times[(e, "loaded")])
            lines.append(f"| {model} | {e} | {idle:.1f} | {loaded:.1f} | {loaded / idle:.2f}x |")
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
