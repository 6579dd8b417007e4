#!/usr/bin/env python3
"""Load ONNX models as a user would and compare stagecraft's outputs with ONNX Runtime's.

For each model: a stagecraft Session (sequential schedule) and an ONNX Runtime session on one
random input (seed 0); prints the load time, the output shapes, the largest relative difference
(max |stagecraft - ORT| / max |ORT| over the outputs) and the model's data-dependent tail, or the
one-line refusal. Symbolic input dimensions are filled with batch 1 and --size (640 by default;
224 for a model whose file name has "cls").

Usage: PYTHONPATH=build/python:python .venv/bin/python bench/agree_with_ort.py MODEL.onnx ... [--size 640]
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
import onnx
import onnxruntime as ort

import stagecraft

ort.set_default_logger_severity(3)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="+")
    p.add_argument("--size", type=int, default=640, help="H and W where the model leaves them symbolic")
    a = p.parse_args()
    print(f"onnxruntime {ort.__version__}; stagecraft: {stagecraft.backends()}")
    for path in a.models:
        name = os.path.basename(path)
        try:
            m = onnx.load(path, load_external_data=False)
            inp = m.graph.input[0]
            size = 224 if "cls" in name else a.size
            shape = [d.dim_value if d.HasField("dim_value") else (1 if k == 0 else size)
                     for k, d in enumerate(inp.type.tensor_type.shape.dim)]
            t = time.time()
            session = stagecraft.Session(stagecraft.Model(path, input_shapes=[shape]), schedule="sequential")
            loaded = time.time() - t
            ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            got, want = session.run(x), ref.run(None, {inp.name: x})
            errors = [float(np.abs(g - w).max() / max(1e-6, float(np.abs(w).max()))) if g.shape == w.shape else float("inf")
                      for g, w in zip(got, want)]
            tail = f"; tail: {session.model.tail}" if session.model.tail else ""
            print(f"{name}: loads ({loaded:.1f} s), outputs {[tuple(g.shape) for g in got]}, "
                  f"relative difference {max(errors):.1e}{tail}")
        except Exception as e:  # a refusal is a result here: print its line and go on
            print(f"{name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")


if __name__ == "__main__":
    main()
