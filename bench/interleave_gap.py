#!/usr/bin/env python3
"""Why does an engine run slower in an interleaved comparison than on its own? Times, in one
process: stagecraft sessions before any other engine is loaded (back to back), again once ONNX
Runtime and OpenVINO are loaded and have run, every engine back to back, and every engine
interleaved as bench/cpu_engines.py times them (a pause, one untimed run, then a block). Prints
min / median / p90 per engine and phase, the thread limiter's limited runs and the threads'
CPU masks. The question it answers: is the gap between `stagecraft run` and bench/cpu_engines.py
ours (stagecraft slower interleaved than back to back, more than the others) or the bench's?

Usage: bench/interleave_gap.py MODEL.onnx [--only-stagecraft] [--runs 20] [--rounds 4] [--block 3]
       [--dtypes int8,bf16,f32] [--schedules sequential,dp] [--calibration 8] [--cache-dir D]
"""
from __future__ import annotations

import argparse
import collections
import glob
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from pyenv import machine, ort_session, timed_block  # noqa: E402

import numpy as np  # noqa: E402

import stagecraft  # noqa: E402


def masks() -> str:
    """The CPU masks of this process's threads: mask -> thread count."""
    d: collections.Counter = collections.Counter()
    for t in glob.glob("/proc/self/task/*/status"):
        try:
            for line in open(t):
                if line.startswith("Cpus_allowed_list"):
                    d[line.split()[1]] += 1
        except OSError:
            pass
    return ", ".join(f"{k}: {n}" for k, n in d.most_common())


def stats(ts: list[float]) -> str:
    s = sorted(ts)
    return f"min {s[0]:.2f} med {statistics.median(s):.2f} p90 {s[int(0.9 * (len(s) - 1))]:.2f}"


def back_to_back(f, x, runs: int) -> list[float]:
    for _ in range(3):
        f(x)
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        f(x)
        out.append((time.perf_counter() - t) * 1e3)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("--only-stagecraft", action="store_true")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--block", type=int, default=3)
    p.add_argument("--dtypes", default="int8,bf16,f32")
    p.add_argument("--schedules", default="sequential")
    p.add_argument("--calibration", type=int, default=8)
    p.add_argument("--search-budget", type=float, default=8.0)
    p.add_argument("--cache-dir", default="/tmp/interleave_cache")
    a = p.parse_args()
    tag = f"{Path(a.model).stem} adapt={os.environ.get('STAGECRAFT_ADAPT_THREADS', '1')}"
    print(f"== {tag}: {machine()}; pid {os.getpid()}; affinity {len(os.sched_getaffinity(0))} CPUs", flush=True)

    t0 = time.time()
    sessions = {}
    for dtype in a.dtypes.split(","):
        for sched in a.schedules.split(","):
            kw = {"calibration_samples": a.calibration} if dtype == "int8" else {}
            if sched == "dp":
                kw["search_budget"] = a.search_budget
            s = stagecraft.Session(a.model, dtype=dtype, schedule=sched, cache_dir=a.cache_dir,
                                   progress=False, **kw)
            sessions[f"sc {dtype} {sched}"] = s
    first = next(iter(sessions.values()))
    print(f"{tag}: {first.description}", flush=True)
    print(f"{tag}: sessions built in {time.time() - t0:.1f} s; threads: {masks()}", flush=True)
    shape = list(first.inputs[0].shape)
    x = np.random.default_rng(0).random(shape, dtype=np.float32)
    runs = {k: (lambda v, s=s: s.run(v)) for k, s in sessions.items()}

    def phase(name: str, engines: dict) -> None:
        for k, f in engines.items():
            print(f"{tag}: [{name}] {k:24s} {stats(back_to_back(f, x, a.runs))}", flush=True)

    phase("alone, back to back", runs)
    if not a.only_stagecraft:
        import onnxruntime as ort
        import openvino as ov
        ref = ort_session(a.model)
        name = ref.get_inputs()[0].name
        others = {"ORT f32": lambda v: ref.run(None, {name: v})}
        core = ov.Core()
        latency = {"PERFORMANCE_HINT": "LATENCY"}
        ov_default = core.compile_model(a.model, "CPU", latency)
        others["OV default"] = lambda v, c=ov_default: c(v)
        if "int8" in a.dtypes:
            import nncf
            rng = np.random.default_rng(1000)
            calib = [rng.random(shape, dtype=np.float32) for _ in range(a.calibration)]
            ov_q = nncf.quantize(core.read_model(a.model), nncf.Dataset(calib), subset_size=a.calibration)
            others["OV int8"] = lambda v, c=core.compile_model(ov_q, "CPU", latency): c(v)
        for f in others.values():
            f(x)
        print(f"{tag}: others loaded; threads: {masks()}", flush=True)
        phase("others loaded, back to back", runs)
        phase("others, back to back", others)
        runs = {**others, **runs}
    for label, pause in (("interleaved, 0.1 s pause", True), ("interleaved, no pause", False)):
        times: dict = {k: [] for k in runs}
        for _ in range(a.rounds):
            for k, f in runs.items():
                if pause:
                    times[k] += timed_block(f, a.block, x)
                else:
                    f(x)
                    times[k] += back_to_back(f, x, a.block)[-a.block:]
        for k, v in times.items():
            print(f"{tag}: [{label}] {k:24s} {stats(v)}", flush=True)
    limited = {k: s.limited_runs for k, s in sessions.items()}
    print(f"{tag}: limited runs {limited}; threads: {masks()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
