#!/usr/bin/env python3
"""Compare stagecraft against ONNX Runtime (CPU) on ONNX models: outputs and latency.

Usage:
  scripts/compare_ort.py MODEL.onnx [MODEL.onnx ...] [--iters N] [--warmup W]
                         [--stagecraft PATH] [--schedules sequential,dp] [--out FILE.md]
                         [--batch N] [--seed S] [--quick]

For each model: one seeded random float32 input (the model's input shape; a symbolic batch
dimension becomes --batch) is run by
  - ONNX Runtime, CPU provider, sequential execution mode,
  - ONNX Runtime, CPU provider, parallel execution mode (ORT_PARALLEL),
    both with all graph optimizations and intra-op threads = number of cores,
  - `stagecraft run MODEL --schedule S --input x.npy --output y.npy` for each schedule S.
ORT is timed in this process (warm-up runs, then N timed runs, median); stagecraft's median is
parsed from its `latency: median X ms` line. Every output is compared with ORT's sequential
output: max absolute error and max relative error (max |difference| / max |ORT output|).
A Markdown table is printed; --out writes it to a file, with the machine and versions above it.

--quick (for tests): 3 timed runs after 1 warm-up, schedules `sequential` unless --schedules is
given, and every search (greedy, dp) uses `--cost-model analytic:v100` instead of measuring.

Exit code: 0 when every relative error is at most 1e-4 (fp32), 1 when one is larger (or an
output is not finite or has the wrong shape), 2 when a run fails (stagecraft exits non-zero,
prints no latency, writes no output) and no error is too large, or on bad arguments, 3 when
numpy/onnx/onnxruntime can be neither imported nor installed with pip.

numpy, onnx and onnxruntime are installed with `python3 -m pip install --quiet` when they
cannot be imported.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REL_TOLERANCE = 1e-4
REPO = Path(__file__).resolve().parent.parent
DEFAULT_STAGECRAFT = REPO / "build" / "cli" / "stagecraft"
QUICK_COST_MODEL = "analytic:v100"
# Import name -> pip package name.
DEPENDENCIES = {"numpy": "numpy", "onnx": "onnx", "onnxruntime": "onnxruntime"}

EXIT_OK, EXIT_ACCURACY, EXIT_RUN_FAILED, EXIT_DEPENDENCIES = 0, 1, 2, 3


def ensure_dependencies() -> None:
    """Imports numpy, onnx and onnxruntime, pip-installing the missing ones first."""
    missing = []
    for module, package in DEPENDENCIES.items():
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(package)
    if not missing:
        return
    print(f"compare_ort: installing {' '.join(missing)} with pip", file=sys.stderr)
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", *missing]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.strip().splitlines()[-15:])
        print(f"compare_ort: error: `{' '.join(cmd)}` failed (exit {proc.returncode}):\n{tail}",
              file=sys.stderr)
        sys.exit(EXIT_DEPENDENCIES)
    importlib.invalidate_caches()
    for module in DEPENDENCIES:
        try:
            importlib.import_module(module)
        except ImportError as e:
            print(f"compare_ort: error: {module} installed but cannot be imported: {e}",
                  file=sys.stderr)
            sys.exit(EXIT_DEPENDENCIES)


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Compare stagecraft with ONNX Runtime (CPU): max errors and median latency.")
    p.add_argument("models", nargs="+", metavar="MODEL.onnx")
    p.add_argument("--iters", type=int, default=None, help="timed runs (default 20; --quick 3)")
    p.add_argument("--warmup", type=int, default=None,
                   help="untimed runs first (default 5; --quick 1)")
    p.add_argument("--stagecraft", default=None,
                   help=f"the stagecraft binary (default {DEFAULT_STAGECRAFT}, else on PATH)")
    p.add_argument("--schedules", default=None,
                   help="comma-separated stagecraft schedules (default sequential,dp; "
                        "--quick: sequential)")
    p.add_argument("--cost-model", default=None,
                   help="cost model of stagecraft's searches (default measured; --quick: "
                        f"{QUICK_COST_MODEL})")
    p.add_argument("--batch", type=int, default=1,
                   help="batch size when the model's batch dimension is symbolic (default 1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random input (default 0)")
    p.add_argument("--out", default=None, help="also write the report (Markdown) to this file")
    p.add_argument("--quick", action="store_true",
                   help="few iterations, analytic cost model for searches (for tests)")
    p.add_argument("--timeout", type=float, default=3600,
                   help="seconds one stagecraft run may take (default 3600)")
    args = p.parse_args(argv)
    if args.iters is None:
        args.iters = 3 if args.quick else 20
    if args.warmup is None:
        args.warmup = 1 if args.quick else 5
    if args.schedules is None:
        args.schedules = "sequential" if args.quick else "sequential,dp"
    args.schedules = [s.strip() for s in args.schedules.split(",") if s.strip()]
    if args.cost_model is None and args.quick:
        args.cost_model = QUICK_COST_MODEL
    if args.iters < 1 or args.warmup < 0 or args.batch < 1:
        p.error("--iters and --batch must be positive, --warmup non-negative")
    if not args.schedules:
        p.error("--schedules is empty")
    for m in args.models:
        if not Path(m).is_file():
            p.error(f"no such model file: {m}")
    args.stagecraft = find_stagecraft(args.stagecraft, p)
    return args


def find_stagecraft(given, parser) -> str:
    if given:
        if not (os.path.isfile(given) and os.access(given, os.X_OK)):
            parser.error(f"--stagecraft {given}: not an executable file")
        return os.path.abspath(given)
    if DEFAULT_STAGECRAFT.is_file():
        return str(DEFAULT_STAGECRAFT)
    found = shutil.which("stagecraft")
    if not found:
        parser.error(f"stagecraft not found ({DEFAULT_STAGECRAFT} or PATH); give --stagecraft")
    return found


# ---------------------------------------------------------------------------- machine, versions

def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def core_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def git_commit() -> str:
    """The source tree's commit (read-only git commands), '+ local changes' when it differs."""
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    dirty = subprocess.run(["git", "-C", str(REPO), "diff-index", "--quiet", "HEAD", "--"],
                           capture_output=True).returncode != 0
    return head + (" + uncommitted changes" if dirty else "")


def stagecraft_version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60)
        return out.stdout.strip() or out.stderr.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


# ---------------------------------------------------------------------------- models, ORT

def model_input(path: str, batch: int):
    """(input name, concrete shape, output name) of a float32 single-input model."""
    import onnx
    model = onnx.load(path, load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    if len(inputs) != 1:
        raise ValueError(f"{path}: {len(inputs)} graph inputs; this script handles one")
    tensor = inputs[0].type.tensor_type
    if tensor.elem_type != onnx.TensorProto.FLOAT:
        raise ValueError(f"{path}: input {inputs[0].name} is "
                         f"{onnx.TensorProto.DataType.Name(tensor.elem_type)}, not FLOAT")
    shape = []
    for k, d in enumerate(tensor.shape.dim):
        if d.HasField("dim_value") and d.dim_value > 0:
            shape.append(d.dim_value)
        elif k == 0:
            shape.append(batch)
        else:
            raise ValueError(f"{path}: input dimension {k} is symbolic ({d.dim_param!r})")
    return inputs[0].name, tuple(shape), model.graph.output[0].name


def ort_run(path: str, x, parallel: bool, warmup: int, iters: int):
    """(first output, median ms) of ONNX Runtime's CPU provider in one execution mode."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = core_count()
    if parallel:
        so.execution_mode = ort.ExecutionMode.ORT_PARALLEL
        so.inter_op_num_threads = core_count()
    else:
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(path, sess_options=so, providers=["CPUExecutionProvider"])
    feed = {session.get_inputs()[0].name: x}
    output_name = session.get_outputs()[0].name
    y = session.run([output_name], feed)[0]
    for _ in range(warmup):
        session.run([output_name], feed)
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        session.run([output_name], feed)
        times.append((time.perf_counter() - t0) * 1e3)
    del session  # its thread pools end before stagecraft runs
    return y, statistics.median(times)


# ---------------------------------------------------------------------------- stagecraft

LATENCY_RE = re.compile(r"latency: median ([0-9.]+) ms")
STAGES_RE = re.compile(r"schedule \S+ with (\d+) stages")


class RunFailed(Exception):
    pass


def stagecraft_run(args, model: str, schedule: str, x_path: str, y_path: str):
    """(output, median ms, stage count or None) of one `stagecraft run`."""
    import numpy as np
    cmd = [args.stagecraft, "run", os.path.abspath(model), "--backend", "cpu",
           "--schedule", schedule, "--iters", str(args.iters), "--warmup", str(args.warmup),
           "--input", x_path, "--output", y_path]
    if args.cost_model and schedule not in ("sequential",) and not schedule.endswith(".yaml"):
        cmd += ["--cost-model", args.cost_model]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        raise RunFailed(f"timed out after {args.timeout:.0f} s: {' '.join(cmd)}")
    except OSError as e:
        raise RunFailed(f"cannot run {args.stagecraft}: {e}")
    if proc.returncode != 0:
        tail = (proc.stderr.strip() or proc.stdout.strip())[-1500:]
        raise RunFailed(f"exit {proc.returncode}: {' '.join(cmd)}\n{tail}")
    m = LATENCY_RE.search(proc.stdout)
    if not m:
        raise RunFailed(f"no 'latency: median' line in the output of {' '.join(cmd)}:\n"
                        f"{proc.stdout[-1500:]}")
    stages = STAGES_RE.search(proc.stdout)
    if not os.path.isfile(y_path):
        raise RunFailed(f"wrote no output file {y_path}: {' '.join(cmd)}")
    y = np.load(y_path)
    return y, float(m.group(1)), int(stages.group(1)) if stages else None


# ---------------------------------------------------------------------------- comparison

def errors(y, reference):
    """(max abs error, max rel error, problem or None) of y against the reference output."""
    import numpy as np
    if y.shape != reference.shape:
        return float("nan"), float("nan"), f"shape {y.shape} != {reference.shape}"
    if not np.all(np.isfinite(y)):
        return float("nan"), float("nan"), "output is not finite"
    diff = np.abs(y.astype(np.float64) - reference.astype(np.float64))
    max_abs = float(diff.max()) if diff.size else 0.0
    scale = float(np.abs(reference).max()) if reference.size else 0.0
    max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else float("inf"))
    return max_abs, max_rel, None


def fmt_err(v) -> str:
    if v is None:
        return "(reference)"
    if v != v:  # nan
        return "n/a"
    return f"{v:.2e}"


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    ensure_dependencies()
    import numpy as np
    import onnxruntime as ort

    rows = []  # (model, engine, median ms or None, abs err, rel err, note)
    accuracy_failed = []
    run_failed = []
    started = time.time()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="compare_ort.") as tmp:
        for model in args.models:
            name = Path(model).stem
            try:
                input_name, shape, _ = model_input(model, args.batch)
            except Exception as e:  # noqa: BLE001 - any unreadable model is one failed row
                print(f"compare_ort: error: {e}", file=sys.stderr)
                run_failed.append(f"{name}: {e}")
                rows.append((name, "(model)", None, None, None, f"unreadable: {e}"))
                continue
            label = f"{name} ({'x'.join(map(str, shape))})"
            rng = np.random.default_rng(args.seed)
            x = rng.standard_normal(shape, dtype=np.float32)
            x_path = os.path.join(tmp, f"{name}.input.npy")
            np.save(x_path, x)
            print(f"compare_ort: {label}: ONNX Runtime sequential", file=sys.stderr)
            reference, ms_seq = ort_run(model, x, False, args.warmup, args.iters)
            rows.append((label, "ORT sequential", ms_seq, None, None, ""))
            print(f"compare_ort: {label}: ONNX Runtime parallel", file=sys.stderr)
            y_par, ms_par = ort_run(model, x, True, args.warmup, args.iters)
            a, r, problem = errors(y_par, reference)
            rows.append((label, "ORT parallel", ms_par, a, r, problem or ""))
            if problem or not r <= REL_TOLERANCE:
                accuracy_failed.append(f"{name} ORT parallel: max rel err {r:.3g} {problem or ''}")
            for schedule in args.schedules:
                engine = f"stagecraft {schedule}"
                if args.cost_model and schedule != "sequential":
                    engine += f" ({args.cost_model})"
                print(f"compare_ort: {label}: {engine}", file=sys.stderr)
                y_path = os.path.join(tmp, f"{name}.{schedule}.output.npy")
                try:
                    y, ms, stages = stagecraft_run(args, model, schedule, x_path, y_path)
                except RunFailed as e:
                    print(f"compare_ort: error: {name}: stagecraft {schedule}: {e}",
                          file=sys.stderr)
                    run_failed.append(f"{name} {engine}: {str(e).splitlines()[0]}")
                    rows.append((label, engine, None, float("nan"), float("nan"), "run failed"))
                    continue
                if stages is not None:
                    engine += f", {stages} stages"
                a, r, problem = errors(y, reference)
                rows.append((label, engine, ms, a, r, problem or ""))
                if problem or not r <= REL_TOLERANCE:
                    accuracy_failed.append(f"{name} {engine}: max abs err {a:.3g}, "
                                           f"max rel err {r:.3g} {problem or ''}".strip())

    table = ["| model | engine / mode | median ms | max abs err | max rel err |",
             "|---|---|---:|---:|---:|"]
    for label, engine, ms, a, r, note in rows:
        median = f"{ms:.3f}" if ms is not None else "—"
        rel = fmt_err(r) + (f" ({note})" if note else "")
        table.append(f"| {label} | {engine} | {median} | {fmt_err(a)} | {rel} |")
    table_text = "\n".join(table)
    print(table_text)

    verdict = []
    if accuracy_failed:
        verdict.append(f"FAIL: relative error above {REL_TOLERANCE:g}:")
        verdict += [f"- {f}" for f in accuracy_failed]
    if run_failed:
        verdict.append("FAIL: runs that failed:")
        verdict += [f"- {f}" for f in run_failed]
    if not verdict:
        verdict.append(f"All outputs within max relative error {REL_TOLERANCE:g} of ORT "
                       "sequential.")
    print("\n".join(verdict))

    if args.out:
        load_after = os.getloadavg()
        cores = core_count()
        header = [
            "# stagecraft vs ONNX Runtime (CPU)",
            "",
            f"- date: {datetime.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M %Z')}",
            f"- machine: {cpu_model()}, {cores} cores ({platform.system()} "
            f"{platform.release()}); load average {load_before[0]:.2f} before, "
            f"{load_after[0]:.2f} after ({(time.time() - started) / 60:.1f} min)",
            f"- versions: onnxruntime {ort.__version__}, stagecraft "
            f"{stagecraft_version(args.stagecraft).removeprefix('stagecraft ')} "
            f"at commit {git_commit()}, numpy {np.__version__}, Python "
            f"{platform.python_version()}",
            f"- ORT: CPUExecutionProvider, graph optimizations ORT_ENABLE_ALL, intra-op threads "
            f"{cores} (parallel mode: inter-op threads {cores}); {args.warmup} warm-up runs, "
            f"median of {args.iters} timed runs (time.perf_counter around session.run)",
            f"- stagecraft: `stagecraft run MODEL --backend cpu --schedule S --warmup "
            f"{args.warmup} --iters {args.iters}`, its printed median; searches use the "
            f"{args.cost_model or 'measured (CPU)'} cost model",
            f"- input: one random float32 tensor per model (standard normal, seed {args.seed}); "
            f"errors are against ORT sequential's output, relative error = max |difference| / "
            f"max |ORT output|",
            "",
        ]
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text("\n".join(header) + "\n" + table_text + "\n\n"
                                  + "\n".join(verdict) + "\n")
        print(f"wrote {args.out}", file=sys.stderr)

    if accuracy_failed:
        return EXIT_ACCURACY
    return EXIT_RUN_FAILED if run_failed else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
