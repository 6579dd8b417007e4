"""What the project's Python tools share: running in the project's virtual environment (made by
scripts/common.sh's ensure_venv, cached in .venv/) and naming the machine beside a timing."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def reexec_in_venv(tool: str, script: str, packages: list[str], modules: list[str]) -> None:
    """Returns when every module imports in .venv; otherwise makes or fills .venv with packages
    and re-runs `script` there with the same arguments. With STAGECRAFT_NO_VENV=1 the modules must
    import in the current interpreter (no .venv is made or used)."""
    if os.environ.get("STAGECRAFT_NO_VENV") == "1":
        for m in modules:
            try:
                importlib.import_module(m)
            except ImportError as e:
                sys.exit(f"{tool}: STAGECRAFT_NO_VENV=1 but module {m} does not import: {e}")
        return
    if Path(sys.prefix).resolve() == (ROOT / ".venv").resolve():
        try:
            for m in modules:
                importlib.import_module(m)
            return
        except ImportError:
            pass
    cmd = f'source "{ROOT}/scripts/common.sh" && ensure_venv {" ".join(packages)} | tail -n 1'
    result = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True)
    python = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    if result.returncode != 0 or not python:
        sys.exit(f"{tool}: cannot set up the virtual environment:\n{result.stderr[-2000:]}")
    os.execv(python, [python, script, *sys.argv[1:]])


def torch_export(module, x, path: Path, exporter: str) -> None:
    """Exports `module` at input `x` with one of PyTorch's exporters: "ts" (TorchScript,
    opset 17, constants folded) or "dynamo" (opset 18)."""
    import torch
    if exporter == "ts":
        torch.onnx.export(module, (x,), str(path), opset_version=17, do_constant_folding=True,
                          dynamo=False)
    else:
        torch.onnx.export(module, (x,), str(path), opset_version=18, dynamo=True)


def machine() -> str:
    """'CPU model, ISA family, N cores', for every table of timings."""
    model = "unknown CPU"
    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and model == "unknown CPU":
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = line
    except OSError:
        pass
    isa = "AVX-512" if " avx512f" in flags else "AVX2" if " avx2" in flags else "no AVX2"
    if " avx512_vnni" in flags or " avx_vnni" in flags:
        isa += " + VNNI"
    if " avx512_bf16" in flags:
        isa += " + BF16"
    if " amx_bf16" in flags:
        isa += " + AMX"
    return f"{model}, {isa}, {os.cpu_count()} cores"


def ort_session(path: str):
    """An ONNX Runtime session as the benchmarks time it: CPU provider, all graph optimisations,
    one intra-op thread per core."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = os.cpu_count() or 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def timed_block(f, block: int, *args) -> list[float]:
    """One engine's turn in an interleaved comparison: a pause (so the last engine's threads
    settle), one untimed call, then `block` timed calls of f(*args), in milliseconds."""
    import time
    time.sleep(0.1)
    f(*args)
    times = []
    for _ in range(block):
        t = time.perf_counter()
        f(*args)
        times.append((time.perf_counter() - t) * 1e3)
    return times
