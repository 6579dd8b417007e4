"""Perturb the float initializers of an ONNX model: w * (1 + scale * N) + shift * N (seeded).

Detectors built from a config with random weights give near-equal, low class scores: nothing
passes a confidence threshold and ties decide the order. Perturbed weights give distinct scores
and detections to compare (bench/results/yolo_hf_vs_ort.md).

Run:
  .venv/bin/python bench/exports/perturb_weights.py IN.onnx OUT.onnx [--scale 0.3] [--shift 0.05] [--seed 0]
"""

import argparse

import numpy as np
import onnx
from onnx import numpy_helper


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--scale", type=float, default=0.3)
    p.add_argument("--shift", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    m = onnx.load(a.src)
    rng = np.random.default_rng(a.seed)
    changed = 0
    for init in m.graph.initializer:
        if init.data_type != onnx.TensorProto.FLOAT:
            continue
        w = numpy_helper.to_array(init)
        if w.size < 2:  # scalars are thresholds and constants of the graph, not weights
            continue
        w = w * (1 + a.scale * rng.standard_normal(w.shape)) + a.shift * rng.standard_normal(w.shape)
        init.CopyFrom(numpy_helper.from_array(w.astype(np.float32), init.name))
        changed += 1
    onnx.save(m, a.dst)
    print(f"{a.dst}: {changed} initializers perturbed (scale {a.scale}, shift {a.shift}, seed {a.seed})")


if __name__ == "__main__":
    main()
