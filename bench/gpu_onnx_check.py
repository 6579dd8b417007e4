#!/usr/bin/env python3
"""ONNX models on the CUDA backend, as a user runs them: `stagecraft run MODEL.onnx --backend cuda`.

Two parts, each a table in OUT/onnx.md and rows in OUT/onnx.json:

- patterns: every committed pattern model (tests/onnx/patterns/, both exporters) run by the CLI
  on the committed input in the backend's default layout and in NHWC; its output against
  PyTorch's committed one. Each case passes (relative error below 1e-4), is refused (the CLI's
  last line, kept), is wrong, or crashes (a signal, or no one-line error).
- zoo: torchvision CNNs with random weights (batch-norm statistics from random images, as
  scripts/model_zoo.py makes them), exported by PyTorch's TorchScript exporter at batch 1, run by
  the CLI under the sequential and the dp schedule; the output against PyTorch's float64 result
  (beside PyTorch's own f32 GPU error), stagecraft's median latency beside PyTorch eager on the
  same GPU (f32, TF32 off, cudnn.benchmark on; CUDA events, median).

The GPU lease runs it from scripts/gpu_pass.sh (step `onnx`); `--backend cpu` rehearses it on a
machine without a GPU (the PyTorch column is then PyTorch on the CPU).

  bench/gpu_onnx_check.py --stagecraft build/cli/stagecraft --out DIR [--backend cuda|cpu]
      [--patterns tests/onnx/patterns] [--models resnet50,googlenet] [--budget SECONDS]
      [--iters 30] [--search-budget 10] [--jobs 8]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

DEFAULT_MODELS = ("squeezenet1_0,googlenet,inception_v3,resnet50,mobilenet_v2,densenet121,"
                  "efficientnet_b0,shufflenet_v2_x1_0,regnet_y_400mf,convnext_tiny")
PATTERN_TOLERANCE = 1e-4
# f32 on the GPU against PyTorch's float64 result: no farther than this many times PyTorch's own
# f32 GPU error, or within 1e-4 (two f32 engines round differently; deep networks amplify it).
SPREAD = 4.0


def relative_error(got, want) -> float:
    """max |got - want| / max |want| (executor::relative_error's rule); inf for NaN or a shape
    mismatch."""
    import numpy as np
    if got.shape != want.shape:
        return float("inf")
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    if np.isnan(diff).any():
        return float("inf")
    return float(diff.max() / max(np.abs(want).max(), 1e-30))


def run_cli(cmd: list[str], timeout: float) -> tuple[int, str, str]:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired:
        return -999, "", f"timed out after {timeout:.0f} s"


def classify(rc: int, stdout: str, stderr: str) -> tuple[str, str]:
    """("ran", "") or (status, the line that says why) for a CLI run that wrote no output."""
    if rc == 0:
        return "ran", ""
    lines = (stderr.strip() or stdout.strip()).splitlines()
    last = lines[-1] if lines else f"exit {rc}"
    crashed = rc < 0 or rc > 128 or any(w in stderr for w in ("terminate called", "Segmentation", "Aborted"))
    return ("crash" if crashed else "refused"), last[:300]


def check_patterns(args, work: Path) -> list[dict]:
    import numpy as np
    folder = Path(args.patterns)
    cases = []
    for f in sorted(folder.glob("*.onnx")):
        name = f.stem[: f.stem.rfind("_")]
        for layout in ("default", "nhwc"):
            cases.append((f, name, layout))

    def one(case) -> dict:
        f, name, layout = case
        y = work / f"{f.stem}.{layout}.out.npy"
        cmd = [args.stagecraft, "run", str(f), "--backend", args.backend, "--schedule", "sequential",
               "--input", str(folder / f"{name}.input.npy"), "--output", str(y), "--iters", "1",
               "--warmup", "0", "--cache-dir", str(work / "cache")]
        if layout != "default":
            cmd += ["--layout", layout]
        rc, out, err = run_cli(cmd, 120)
        status, why = classify(rc, out, err)
        row = {"model": f.name, "layout": layout, "status": status, "why": why}
        if status == "ran":
            e = relative_error(np.load(y), np.load(folder / f"{name}.expected.npy"))
            row["rel_err"] = e
            row["status"] = "pass" if e < PATTERN_TOLERANCE else "wrong"
        return row

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        return list(pool.map(one, cases))


def time_torch(model, x, device: str, iters: int) -> list[float]:
    import torch
    samples = []
    with torch.no_grad():
        for _ in range(10):
            model(x)
        for _ in range(iters):
            if device == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                model(x)
                end.record()
                torch.cuda.synchronize()
                samples.append(start.elapsed_time(end))
            else:
                t0 = time.perf_counter()
                model(x)
                samples.append((time.perf_counter() - t0) * 1e3)
    return samples


LATENCY = re.compile(r"latency: median ([0-9.]+) ms")
READY = re.compile(r"ready to run ([0-9.]+) s")


def check_model(args, name: str, work: Path) -> dict:
    import numpy as np
    import torch
    from model_zoo import calibrated_model, export, float64_output, input_size

    size = input_size(name)
    row: dict = {"model": name, "size": size}
    t0 = time.perf_counter()
    model = calibrated_model(name, size)
    path = export(model, name, size, "ts", work)
    row["export_s"] = round(time.perf_counter() - t0, 1)
    x = np.random.default_rng(0).standard_normal((1, 3, size, size)).astype(np.float32)
    x_file = work / f"{name}.input.npy"
    np.save(x_file, x)
    ref = float64_output(model, x)

    device = "cuda" if args.backend == "cuda" else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    m = model.to(device)
    xt = torch.from_numpy(x).to(device)
    with torch.no_grad():
        torch_out = m(xt).float().cpu().numpy()
    row["torch_ms"] = statistics.median(time_torch(m, xt, device, args.iters))
    if ref is not None:
        row["torch_err64"] = relative_error(torch_out, ref)
    row["status"] = "pass"
    for schedule in ("sequential", "dp"):
        y = work / f"{name}.{schedule}.out.npy"
        cmd = [args.stagecraft, "run", str(path), "--backend", args.backend, "--schedule", schedule,
               "--input", str(x_file), "--output", str(y), "--iters", str(args.iters), "--warmup", "10",
               "--cache-dir", str(work / "cache"), "--search-budget", str(args.search_budget)]
        rc, out, err = run_cli(cmd, 300)
        status, why = classify(rc, out, err)
        if status != "ran":
            row["status"], row["why"] = status, why
            break
        lat, ready = LATENCY.search(out), READY.search(out)
        row[f"{schedule}_ms"] = float(lat.group(1)) if lat else None
        row[f"{schedule}_ready_s"] = float(ready.group(1)) if ready else None
        got = np.load(y)
        e_torch = relative_error(got, torch_out)
        row[f"{schedule}_err_torch"] = e_torch
        if ref is not None:
            e = relative_error(got, ref)
            row[f"{schedule}_err64"] = e
            ok = e <= 1e-4 or e <= SPREAD * row["torch_err64"]
        else:
            ok = e_torch <= 1e-3
        if not ok:
            row["status"] = "wrong"
    return row


def fmt(v, digits=3) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.1e}" if (v != 0 and (abs(v) < 1e-2 or abs(v) >= 1e4)) else f"{v:.{digits}f}"
    return str(v)


def write_report(out: Path, args, patterns: list[dict], zoo: list[dict], notes: list[str]) -> None:
    (out / "onnx.json").write_text(json.dumps({"backend": args.backend, "patterns": patterns, "zoo": zoo,
                                                "notes": notes}, indent=1))
    lines = []
    if patterns:
        counts = {s: sum(r["status"] == s for r in patterns) for s in ("pass", "refused", "wrong", "crash")}
        bad = counts["wrong"] + counts["crash"]
        lines.append(f"status: {'FAIL' if bad else 'ok'}: patterns on {args.backend}: "
                     + ", ".join(f"{v} {k}" for k, v in counts.items()) + f" of {len(patterns)}")
    if zoo:
        bad = sum(r["status"] in ("wrong", "crash") for r in zoo)
        passed = sum(r["status"] == "pass" for r in zoo)
        lines.append(f"status: {'FAIL' if bad else 'ok'}: zoo on {args.backend}: {passed} of {len(zoo)} pass")
    lines += notes
    if patterns:
        lines += ["", "## Pattern models", "", "| model | layout | status | rel. error / why |", "|---|---|---|---|"]
        for r in patterns:
            lines.append(f"| {r['model']} | {r['layout']} | {r['status']} | "
                         f"{fmt(r.get('rel_err')) if 'rel_err' in r else r['why']} |")
    if zoo:
        lines += ["", "## torchvision models (batch 1, f32, ms)", "",
                  "| model | status | sequential | dp | PyTorch eager | dp err vs f64 | PyTorch err vs f64 | why |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in zoo:
            lines.append(f"| {r['model']} | {r['status']} | {fmt(r.get('sequential_ms'))} | {fmt(r.get('dp_ms'))} "
                         f"| {fmt(r.get('torch_ms'))} | {fmt(r.get('dp_err64'))} | {fmt(r.get('torch_err64'))} "
                         f"| {r.get('why', '')} |")
    (out / "onnx.md").write_text("\n".join(lines) + "\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stagecraft", required=True)
    p.add_argument("--backend", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--patterns", default=str(ROOT / "tests" / "onnx" / "patterns"),
                   help="folder of pattern models ('' to skip)")
    p.add_argument("--models", default=DEFAULT_MODELS, help="comma-separated torchvision names ('' to skip)")
    p.add_argument("--out", required=True)
    p.add_argument("--budget", type=float, default=300, help="seconds; no new model starts after it")
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--search-budget", type=float, default=10)
    p.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1))
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.budget
    patterns, zoo, notes = [], [], []
    with tempfile.TemporaryDirectory(prefix="onnx-check-") as tmp:
        work = Path(tmp)
        if args.patterns:
            patterns = check_patterns(args, work)
            print(f"gpu_onnx_check: {len(patterns)} pattern cases done", flush=True)
            write_report(out, args, patterns, zoo, notes)
        for name in [m for m in args.models.split(",") if m]:
            if time.monotonic() > deadline:
                notes.append(f"not run (budget): {name}")
                continue
            try:
                row = check_model(args, name, work)
            except Exception as e:  # noqa: BLE001 - one model's failure must not lose the others
                row = {"model": name, "status": "error", "why": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
            print(f"gpu_onnx_check: {json.dumps(row)}", flush=True)
            zoo.append(row)
            write_report(out, args, patterns, zoo, notes)
    write_report(out, args, patterns, zoo, notes)
    print((out / "onnx.md").read_text())
    bad = [r for r in patterns + zoo if r["status"] in ("wrong", "crash", "error")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
