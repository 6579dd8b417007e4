#!/usr/bin/env python3
"""Writes tests/onnx/patterns/: tiny ONNX models (a few kilobytes) exported from tiny PyTorch
modules, one per pattern that PyTorch's exporters write for real CNNs, with both exporters
(TorchScript `dynamo=False`, opset 17; `dynamo=True`, opset 18), an input and PyTorch's output.
The test suite runs each through stagecraft and compares (tests/onnx/test_onnx_patterns.cpp), so
CI covers every pattern without installing torch. ONNX Runtime checks each file here too.

Usage: scripts/make_onnx_patterns.py [--out tests/onnx/patterns]   (sets up .venv with torch)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from onnx_pattern_modules import modules  # noqa: E402
from pyenv import ROOT, reexec_in_venv, torch_export  # noqa: E402

PACKAGES = ["numpy", "onnx", "onnxruntime", "onnxscript", "torch"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(ROOT / "tests" / "onnx" / "patterns"))
    p.add_argument("--only", default="", help="comma-separated pattern names (default: all)")
    args = p.parse_args()
    reexec_in_venv("make_onnx_patterns", __file__, PACKAGES, PACKAGES)
    import numpy as np
    import onnx
    import onnxruntime as ort
    import torch

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    failed = 0
    only = [n for n in args.only.split(",") if n]
    for name, (module, shape) in modules().items():
        if only and name not in only:
            continue
        module.eval()
        for m in module.modules():  # non-trivial batch-norm statistics
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.data.uniform_(0.5, 1.5)
                m.bias.data.uniform_(-0.2, 0.2)
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.data.uniform_(0.5, 1.5)
                m.bias.data.uniform_(-0.2, 0.2)
        x = torch.randn(*shape)
        with torch.no_grad():
            want = module(x).numpy()
        np.save(out / f"{name}.input.npy", x.numpy())
        np.save(out / f"{name}.expected.npy", want)
        for exporter in ("ts", "dynamo"):
            path = out / f"{name}_{exporter}.onnx"
            tmp = out / f".{name}_{exporter}.tmp.onnx"
            torch_export(module, x, tmp, exporter)
            model = onnx.load(str(tmp), load_external_data=True)
            model.producer_name += f" (stagecraft pattern '{name}')"
            onnx.save(model, str(path))  # weights inside: kilobytes
            for extra in (tmp, Path(str(tmp) + ".data")):
                if extra.exists():
                    extra.unlink()
            got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
                None, {model.graph.input[0].name: x.numpy()})[0]
            err = float(np.abs(got - want).max() / max(1e-12, np.abs(want).max()))
            ops = sorted({n.op_type for n in model.graph.node})
            print(f"{path.name}: {path.stat().st_size} bytes, ORT rel err {err:.1e}, ops {', '.join(ops)}")
            failed += err > 1e-4
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
