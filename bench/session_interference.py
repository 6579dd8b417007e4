#!/usr/bin/env python3
"""Does one stagecraft session slow another in the same process? (the open question behind
`bench` figures that sit 15-25% above `run`'s.) Times session A alone, beside a second session B
(another schedule, or int8), after B ran, and after B is gone; interleaved blocks, medians.

Usage: bench/session_interference.py MODEL.onnx|NETWORK [--other int8|sequential|dp] [--rounds 10]
(needs the Python package: build/python from ./scripts/test.sh)
"""
from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "build" / "python"), str(ROOT / "python"), str(ROOT / "scripts")]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("--other", default="int8", help="B: int8 (A's schedule in int8), sequential or dp")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--cache-dir", default=str(ROOT / ".cache" / "side_by_side" / "cache"))
    args = p.parse_args()
    import numpy as np
    import stagecraft
    from pyenv import machine

    a = stagecraft.Session(args.model, cache_dir=args.cache_dir)
    x = np.random.default_rng(0).random(a.inputs[0].shape, dtype=np.float32)

    def timed(s) -> float:
        for _ in range(2):
            s.run(x)
        v = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            s.run(x)
            v.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(v)

    print(f"{machine()}; {a.description}")
    print(f"A alone:            {timed(a):7.1f} ms   {timed(a):7.1f} ms")
    if args.other == "int8":
        b = stagecraft.Session(args.model, dtype="int8", cache_dir=args.cache_dir)
    else:
        b = stagecraft.Session(args.model, schedule=args.other, cache_dir=args.cache_dir)
    print(f"A beside B:         {timed(a):7.1f} ms")
    print(f"B ({args.other}):  {timed(b):12.1f} ms")
    print(f"A after B ran:      {timed(a):7.1f} ms")
    del b
    gc.collect()
    print(f"A after B is gone:  {timed(a):7.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
