#!/usr/bin/env python3
"""How closely int8 agrees with f32, without timing: stagecraft int8 and OpenVINO int8 (NNCF
post-training quantisation) against ONNX Runtime f32, per model, both calibrated on the same
--calibration random inputs (uniform [0, 1), seed 1000) and compared on --samples others (seed 0),
as bench/cpu_engines.py --int8 does (same inputs, same metric): the min and mean cosine of the
input-dependent part of the outputs (each output minus the mean output over the inputs) and the
top-1 agreement. stagecraft runs a sequential schedule (the schedule does not change the values
beyond one quantisation step). Quick enough to run after each change to the quantiser.

Usage: PYTHONPATH=build/python:python .venv/bin/python bench/int8_agreement.py MODEL.onnx...
           [--samples 8] [--calibration 16] [--no-nncf] [--out FILE.md]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from pyenv import machine, ort_session, reexec_in_venv  # noqa: E402

reexec_in_venv("int8_agreement", __file__, ["numpy", "onnxruntime", "openvino", "nncf"],
               ["numpy", "onnxruntime", "openvino", "nncf"])

import numpy as np  # noqa: E402

import stagecraft  # noqa: E402


def scores(got: list[np.ndarray], want: list[np.ndarray]) -> tuple[float, float, float]:
    """(min cosine, mean cosine) of the input-dependent parts, and the top-1 agreement."""
    g = np.stack([x.reshape(-1) for x in got]).astype(np.float64)
    w = np.stack([x.reshape(-1) for x in want]).astype(np.float64)
    top1 = float(np.mean(np.argmax(g, axis=1) == np.argmax(w, axis=1)))
    gc, wc = g - g.mean(axis=0), w - w.mean(axis=0)
    cos = np.sum(gc * wc, axis=1) / np.maximum(np.linalg.norm(gc, axis=1) * np.linalg.norm(wc, axis=1), 1e-30)
    return float(cos.min()), float(cos.mean()), top1


def model_rows(path: str, samples: int, calibration: int, nncf_too: bool) -> list[str]:
    ref = ort_session(path)
    first = ref.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in first.shape]
    rng = np.random.default_rng(1000)
    calib = [rng.random(shape, dtype=np.float32) for _ in range(calibration)]
    rng = np.random.default_rng(0)
    xs = [rng.random(shape, dtype=np.float32) for _ in range(samples)]
    want = [ref.run(None, {first.name: x})[0] for x in xs]
    row = [Path(path).stem]
    if nncf_too:
        import nncf
        import openvino as ov

        core = ov.Core()
        quantised = nncf.quantize(core.read_model(path), nncf.Dataset(calib), subset_size=calibration)
        compiled = core.compile_model(quantised, "CPU", {"PERFORMANCE_HINT": "LATENCY"})
        row.append("{:.4f} / {:.4f} / {:.0%}".format(*scores([compiled(x)[0] for x in xs], want)))
    cal = str(Path(tempfile.mkdtemp()) / "model.calib.yaml")
    stagecraft.calibrate(path, inputs=calib, path=cal, progress=False)
    s = stagecraft.Session(path, dtype="int8", calibration=cal, schedule="sequential", progress=False)
    row.append("{:.4f} / {:.4f} / {:.0%}".format(*scores([s.run(x)[0] for x in xs], want)))
    print(" | ".join(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+")
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--calibration", type=int, default=16)
    parser.add_argument("--no-nncf", action="store_true", help="stagecraft only")
    parser.add_argument("--out")
    args = parser.parse_args()
    print(machine(), flush=True)
    header = ["model"] + ([] if args.no_nncf else ["OpenVINO int8 (NNCF)"]) + ["stagecraft int8"]
    lines = [f"int8 against ONNX Runtime f32 over {args.samples} random inputs, calibrated on "
             f"{args.calibration} others: min cosine / mean cosine of the input-dependent part / "
             "top-1 agreement", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for path in args.models:
        lines.append("| " + " | ".join(model_rows(path, args.samples, args.calibration, not args.no_nncf)) + " |")
    if args.out:
        Path(args.out).write_text(machine() + "\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
