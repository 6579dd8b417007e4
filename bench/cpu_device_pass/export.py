#!/usr/bin/env python3
"""Exports the measurement's models exactly as scripts/model_zoo.py does (its calibrated_model:
random weights, batch-norm statistics from 4 training-mode passes over random images; its export:
TorchScript exporter, opset 17, constants folded, batch 1, written to a temporary name and renamed),
one after the other in the order given, into FOLDER as <name>_ts.onnx (timm models as
timm_<name>_ts.onnx). An existing file is kept. Prints one line per model.

Usage: python3 bench/cpu_device_pass/export.py FOLDER MODEL... (torchvision names, or timm/NAME)
Env: EXPORT_THREADS (torch intra-op threads; default: torch's own choice)."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import model_zoo  # noqa: E402  (imports without side effects; main() is not run)


def main() -> int:
    folder = Path(sys.argv[1])
    folder.mkdir(parents=True, exist_ok=True)
    import torch
    if os.environ.get("EXPORT_THREADS"):
        torch.set_num_threads(int(os.environ["EXPORT_THREADS"]))
    failed = 0
    for name in sys.argv[2:]:
        t = time.time()
        try:
            size = model_zoo.input_size(name)
            path = folder / f"{name.replace('/', '_')}_ts.onnx"
            if not path.exists():
                model = model_zoo.calibrated_model(name, size)
                path = model_zoo.export(model, name, size, "ts", folder)
            print(f"export: {name} {size}x{size} -> {path} ({path.stat().st_size / 2**20:.0f} MiB, "
                  f"{time.time() - t:.1f} s)", flush=True)
        except Exception as e:  # noqa: BLE001 - the next model still gets its turn
            failed += 1
            (folder / f"{name.replace('/', '_')}_ts.failed").write_text(str(e))
            print(f"export: {name} FAILED after {time.time() - t:.1f} s: "
                  f"{str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__}",
                  flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
