#!/usr/bin/env python3
"""ONNX Runtime against stagecraft schedules of one ONNX model, in one process, interleaved.

Engines: an ONNX Runtime session (CPU provider, all graph optimisations, one thread per core),
stagecraft sessions with the sequential schedule, the default dp schedule (searched now, or
answered by the schedule cache of CACHE_DIR) and any schedule files given as LABEL=FILE. Per round
each engine runs once untimed after a 100 ms pause (ONNX Runtime's pool spins for ~60 ms after a
run, which an engine timed right after it would pay for), then --block timed runs; medians over
--rounds rounds. Prints the CPU, each engine's relative error against ONNX Runtime and a table.
Do not set OMP_WAIT_POLICY=passive: every kernel then wakes the OpenMP team (40% slower on NASNet).

Usage: PYTHONPATH=build/python:python .venv/bin/python bench/vs_ort_schedules.py MODEL.onnx CACHE_DIR
           [LABEL=schedule.yaml ...] [--rounds 8] [--block 3] [--shape 1x3x640x640]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort

import stagecraft

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from pyenv import machine, ort_session, timed_block  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("cache_dir")
    parser.add_argument("schedules", nargs="*", help="LABEL=FILE")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--block", type=int, default=3)
    parser.add_argument("--shape", default=None,
                        help="input shape (1x3x640x640) for a model with dynamic axes; "
                             "default: the declared shape, 1 for each dynamic axis")
    args = parser.parse_args()

    ref_session = ort_session(args.model)
    info = ref_session.get_inputs()[0]
    shape = ([int(d) for d in args.shape.split("x")] if args.shape
             else [d if isinstance(d, int) else 1 for d in info.shape])
    x = np.random.default_rng(0).random(shape, dtype=np.float32)
    engines = {"onnxruntime": lambda: ref_session.run(None, {info.name: x})}
    ref = ref_session.run(None, {info.name: x})[0]

    def add(label: str, schedule: str) -> None:
        s = stagecraft.Session(args.model, schedule=schedule, cache_dir=args.cache_dir, progress=False,
                               input_shapes=[shape] if args.shape else None)
        y = s.run(x)[0]
        # Relative to ORT's largest value; absolute where ORT's output is all zeros (no detection).
        err = float(np.abs(y - ref).max() / max(float(np.abs(ref).max()), 1.0 if not ref.any() else 0.0))
        print(f"{label}: {len(s.schedule.stages)} stages, relative error vs ORT {err:.2e}; {s.plan}",
              flush=True)
        if label.endswith("sequential"):
            print("backend:", s.description, flush=True)
        engines[label] = lambda: s.run(x)

    add("stagecraft sequential", "sequential")
    add("stagecraft dp (default)", "dp")
    for item in args.schedules:
        label, path = item.split("=", 1)
        add(f"stagecraft {label}", path)

    times: dict[str, list[float]] = {k: [] for k in engines}
    for _ in range(args.rounds):
        for k, f in engines.items():
            times[k] += timed_block(f, args.block)
    print(f"CPU: {machine()}; onnxruntime {ort.__version__}; "
          f"{len(times['onnxruntime'])} runs each, interleaved")
    base = statistics.median(times["onnxruntime"])
    print("| engine | median ms | p10 | p90 | / ORT |\n|---|---|---|---|---|")
    for k, v in times.items():
        m = statistics.median(v)
        print(f"| {k} | {m:.1f} | {np.percentile(v, 10):.1f} | {np.percentile(v, 90):.1f} | {m / base:.2f}x |")


if __name__ == "__main__":
    main()
