#!/usr/bin/env python3
"""PyTorch baseline for stagecraft's networks: the same graph, the same weights, one run.

For each network, `stagecraft graph NETWORK -o net.yaml --onnx net.onnx` writes the inference graph
stagecraft runs (batch norms folded, activations fused) and the weights it runs with (ONNX
initializers, seeded as in stagecraft). This script builds a torch.nn model op by op from that YAML
(conv2d -> nn.Conv2d, batch_norm -> nn.BatchNorm2d, max_pool -> nn.MaxPool2d, ...) and loads the
weights from the ONNX file with a small protobuf reader (the onnx package is not needed). So both
engines run the same network with the same weights on the same input.

Two modes:

  --check            (CPU) f32 eager PyTorch against `stagecraft run NETWORK --backend cpu
                     --schedule sequential --input x.npy --output y.npy` on the same seeded input;
                     prints the max absolute and relative error (max |difference| / max |stagecraft
                     output|) per network; exit 1 when one exceeds --tolerance (default 1e-4).
  (default)          timing on --device (cuda): PyTorch eager, torch.compile (default mode) and
                     torch.compile(mode="reduce-overhead", i.e. CUDA Graphs), each in f32 with TF32
                     off, f32 with TF32 on (cuDNN and matmul), and f16 (channels_last); beside them
                     `stagecraft run` with the sequential and the dp schedule in the same precisions
                     (--tf32; --dtype f16 --layout nhwc). Median / p10 / p90 of --iters timed runs
                     after --warmup (wall time with a device synchronisation per run), the time of
                     the first call (compilation), and each output's relative error against PyTorch
                     f32 eager on the same device.

Outputs with --out-prefix P: P.json, P.csv and P.md (a Markdown table). With --state DIR every
finished entry is also kept in DIR and not redone by a later run (a GPU lease runs commands of at
most 10 minutes: the next command continues); --time-budget S stops starting entries after S
seconds (exit 2: run again to continue).

Exit status: 0 done, 1 an error too large or a failed entry, 2 incomplete (time budget),
3 missing dependencies (torch, numpy, PyYAML).

Examples:
  bench/pytorch_baseline.py --check --networks squeezenet1_1:64,inception_v3:75
  bench/pytorch_baseline.py --device cuda --stagecraft gpu-bundle/bin/stagecraft --out-prefix out/baseline
"""

from __future__ import annotations

import argparse
import json
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

EXIT_OK, EXIT_ACCURACY, EXIT_INCOMPLETE, EXIT_DEPENDENCIES = 0, 1, 2, 3
NETWORKS = ["inception_v3", "googlenet", "squeezenet1_0", "squeezenet1_1", "resnet50",
            "nasnet_a_mobile", "nasnet_a_large", "randwire", "randwire_small", "randwire_regular"]
ENGINES = ["pytorch-eager", "pytorch-compile", "pytorch-compile-ro", "stagecraft-sequential",
           "stagecraft-dp"]
PRECISIONS = ["f32", "tf32", "f16"]
HERE = Path(__file__).resolve().parent
LATENCY = re.compile(r"latency: median ([0-9.]+) ms, p10 ([0-9.]+) ms, p90 ([0-9.]+) ms")

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    import yaml
    from torch import nn
except ImportError as e:  # the ctest skips with this reason
    print(f"pytorch_baseline: missing dependency: {e}", file=sys.stderr)
    sys.exit(EXIT_DEPENDENCIES)


# ---- ONNX initializers without the onnx package ---------------------------------------------------

def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _fields(buf: memoryview):
    """(field number, wire type, value) of a protobuf message; length-delimited values as views."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield number, wire, value


def _packed_varints(view: memoryview) -> list[int]:
    out, pos = [], 0
    while pos < len(view):
        v, pos = _varint(view, pos)
        out.append(v)
    return out


def read_onnx_initializers(path: Path) -> dict[str, np.ndarray]:
    """Float32 initializers of an ONNX model by name (ModelProto.graph.initializer)."""
    FLOAT, INT64 = 1, 7
    data = memoryview(path.read_bytes())
    tensors = {}
    for number, _, graph in _fields(data):
        if number != 7:  # ModelProto.graph
            continue
        for gnum, _, t in _fields(graph):
            if gnum != 5:  # GraphProto.initializer
                continue
            dims, dtype, name, raw, floats = [], FLOAT, "", None, []
            for tnum, wire, v in _fields(t):
                if tnum == 1:
                    dims += _packed_varints(v) if wire == 2 else [v]
                elif tnum == 2:
                    dtype = v
                elif tnum == 4:
                    floats += list(np.frombuffer(bytes(v), dtype="<f4"))
                elif tnum == 8:
                    name = bytes(v).decode()
                elif tnum == 9:
                    raw = bytes(v)
            if dtype != FLOAT:
                continue  # int64 attributes (split sizes, slice bounds) are in the YAML too
            array = np.frombuffer(raw, dtype="<f4") if raw is not None else np.array(floats, dtype="<f4")
            tensors[name] = array.reshape(dims).astype(np.float32)
    return tensors


# ---- The model, op by op from stagecraft's graph YAML ---------------------------------------------

def _hw(v, default=(1, 1)) -> tuple[int, int]:
    if v is None:
        return default
    return (v, v) if isinstance(v, int) else (v[0], v[1])


def _pads(v) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) from stagecraft's forms: p, [t, l], [t, l, b, r]."""
    if v is None:
        return (0, 0, 0, 0)
    if isinstance(v, int):
        return (v, v, v, v)
    if len(v) == 2:
        return (v[0], v[1], v[0], v[1])
    return tuple(v)


def _activate(x, activation: str | None):
    if activation in (None, "none"):
        return x
    if activation == "relu":
        return F.relu(x)
    if activation == "relu6":
        return F.relu6(x)
    if activation == "sigmoid":
        return torch.sigmoid(x)
    raise ValueError(f"unknown activation {activation}")


class GraphModel(nn.Module):
    """A stagecraft graph (YAML, inference form) as torch modules run in the file's op order."""

    def __init__(self, graph: dict, weights: dict[str, np.ndarray]):
        super().__init__()
        self.inputs = [i["name"] for i in graph["inputs"]]
        self.outputs = list(graph["outputs"])
        self.layers = nn.ModuleList()
        self.steps = []  # (function(modules, inputs) -> tensor or tuple, input names, output names)
        for op in graph["ops"]:
            self._add(op, weights)

    def _param(self, weights, name):
        if name not in weights:
            raise KeyError(f"weight '{name}' missing from the ONNX file")
        return torch.from_numpy(weights[name].copy())

    def _module(self, module: nn.Module) -> int:
        self.layers.append(module)
        return len(self.layers) - 1

    def _add(self, op: dict, weights):
        kind, name = op["kind"], op["name"]
        outs = [name] if "shapes" not in op else [f"{name}:{i}" for i in range(len(op["shapes"]))]
        act = op.get("activation")
        fn = None
        if kind == "conv2d":
            t, l, b, r = _pads(op.get("padding"))
            symmetric = t == b and l == r
            conv = nn.Conv2d(op["in_channels"], op["out_channels"], _hw(op["kernel"]), _hw(op.get("stride")),
                             (t, l) if symmetric else 0, _hw(op.get("dilation")), op.get("groups", 1),
                             bias=op.get("bias", False))
            with torch.no_grad():
                conv.weight.copy_(self._param(weights, f"{name}/W"))
                if op.get("bias", False):
                    conv.bias.copy_(self._param(weights, f"{name}/B"))
            k = self._module(conv)
            pre = None if symmetric else (l, r, t, b)
            residual = op.get("residual", False)  # a fused shortcut: act(conv(x) + r)

            def fn(m, x, k=k, pre=pre, act=act, residual=residual):
                y = m[k](x[0] if pre is None else F.pad(x[0], pre))
                return _activate(y + x[1] if residual else y, act)
        elif kind == "batch_norm":
            c = weights[f"{name}/scale"].shape[0]
            bn = nn.BatchNorm2d(c, eps=op.get("eps", 1e-5))
            with torch.no_grad():
                bn.weight.copy_(self._param(weights, f"{name}/scale"))
                bn.bias.copy_(self._param(weights, f"{name}/B"))
                bn.running_mean.copy_(self._param(weights, f"{name}/mean"))
                bn.running_var.copy_(self._param(weights, f"{name}/var"))
            k = self._module(bn)
            fn = lambda m, x, k=k, act=act: _activate(m[k](x[0]), act)  # a fused activation after it
        elif kind in ("relu", "relu6", "sigmoid"):
            fn = lambda m, x, a=kind: _activate(x[0], a)
        elif kind in ("max_pool", "avg_pool"):
            t, l, b, r = _pads(op.get("padding"))
            kernel, stride, ceil = _hw(op["kernel"]), _hw(op.get("stride")), op.get("ceil_mode", False)
            include = op.get("count_include_pad", True)
            symmetric = t == b and l == r
            if kind == "max_pool":
                pool = nn.MaxPool2d(kernel, stride, (t, l) if symmetric else 0, ceil_mode=ceil)
                fill = float("-inf")
            else:
                if not symmetric and not include:
                    raise NotImplementedError(f"{name}: asymmetric padding that is not counted")
                pool = nn.AvgPool2d(kernel, stride, (t, l) if symmetric else 0, ceil_mode=ceil,
                                    count_include_pad=include)
                fill = 0.0
            k = self._module(pool)
            pre = None if symmetric else (l, r, t, b)
            fn = lambda m, x, k=k, pre=pre, fill=fill: m[k](x[0] if pre is None else F.pad(x[0], pre, value=fill))
        elif kind == "global_avg_pool":
            fn = lambda m, x: x[0].mean((2, 3), keepdim=True)
        elif kind == "add":
            def fn(m, x, act=act):
                s = x[0]
                for y in x[1:]:
                    s = s + y
                return _activate(s, act)
        elif kind == "concat":
            fn = lambda m, x: torch.cat(x, 1)
        elif kind == "split":
            fn = lambda m, x, sizes=list(op["sizes"]): torch.split(x[0], sizes, 1)
        elif kind == "slice":
            fn = lambda m, x, b0=op["begin"], e0=op["end"]: x[0][:, b0:e0]
        elif kind == "identity":
            fn = lambda m, x: x[0]
        elif kind == "pad":
            t, l, b, r = _pads(op["pads"])
            fn = lambda m, x, p=(l, r, t, b), v=float(op.get("value", 0.0)): F.pad(x[0], p, value=v)
        elif kind == "flatten":
            fn = lambda m, x: torch.flatten(x[0], 1)
        elif kind == "linear":
            lin = nn.Linear(op["in_features"], op["out_features"], bias=op.get("bias", True))
            with torch.no_grad():
                lin.weight.copy_(self._param(weights, f"{name}/W"))
                if op.get("bias", True):
                    lin.bias.copy_(self._param(weights, f"{name}/B"))
            k = self._module(lin)
            fn = lambda m, x, k=k, act=act: _activate(m[k](x[0]), act)
        elif kind == "softmax":
            fn = lambda m, x: F.softmax(x[0], 1)
        elif kind == "scale":
            fn = lambda m, x, f=float(op["factor"]): x[0] * f
        else:
            raise NotImplementedError(f"op kind {kind} ({name})")
        self.steps.append((fn, list(op["inputs"]), outs))

    def forward(self, *xs):
        env = dict(zip(self.inputs, xs))
        for fn, ins, outs in self.steps:
            y = fn(self.layers, [env[n] for n in ins])
            if len(outs) == 1:
                env[outs[0]] = y
            else:
                env.update(zip(outs, y))
        result = tuple(env[n] for n in self.outputs)
        return result[0] if len(result) == 1 else result


# ---- stagecraft ---------------------------------------------------------------------------------

def default_stagecraft() -> Path:
    for candidate in (HERE / "bin" / "stagecraft", HERE.parent / "build" / "cli" / "stagecraft"):
        if candidate.exists():
            return candidate
    return Path("stagecraft")


def size_flags(size: int | None) -> list[str]:
    return ["--input-size", str(size)] if size else []


def export(stagecraft: Path, network: str, batch: int, size: int | None, work: Path):
    yaml_path, onnx_path = work / f"{network}.yaml", work / f"{network}.onnx"
    subprocess.run([str(stagecraft), "graph", network, "--batch", str(batch), *size_flags(size),
                    "-o", str(yaml_path), "--onnx", str(onnx_path)],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    graph = yaml.safe_load(yaml_path.read_text())
    return graph, read_onnx_initializers(onnx_path)


def run_stagecraft(stagecraft: Path, network: str, batch: int, size: int | None, backend: str,
                   flags: list[str], x_path: Path, y_path: Path, iters: int, warmup: int,
                   cache_dir: str | None) -> dict:
    cmd = [str(stagecraft), "run", network, "--batch", str(batch), *size_flags(size), "--backend", backend,
           "--input", str(x_path), "--output", str(y_path), "--iters", str(iters), "--warmup", str(warmup),
           *flags]
    if cache_dir:
        cmd += ["--cache-dir", cache_dir]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` exited {proc.returncode}:\n{proc.stdout[-2000:]}")
    m = LATENCY.search(proc.stdout)
    if not m:
        raise RuntimeError(f"no latency line in the output of `{' '.join(cmd)}`:\n{proc.stdout[-2000:]}")
    return {"median_ms": float(m.group(1)), "p10_ms": float(m.group(2)), "p90_ms": float(m.group(3)),
            "output": np.load(y_path)}


def errors(got: np.ndarray, want: np.ndarray) -> tuple[float, float]:
    """Max absolute error and max |difference| / max |want|."""
    got = np.asarray(got, dtype=np.float64).reshape(want.shape)
    diff = np.abs(got - want)
    if not np.all(np.isfinite(got)):
        return float("inf"), float("inf")
    scale = float(np.max(np.abs(want))) or 1.0
    return float(diff.max()), float(diff.max() / scale)


def parse_networks(spec: str, default_size: int | None) -> list[tuple[str, int | None]]:
    if spec == "all":
        return [(n, default_size) for n in NETWORKS]
    out = []
    for item in spec.split(","):
        name, _, size = item.partition(":")
        out.append((name, int(size) if size else default_size))
    return out


# ---- --check: PyTorch (CPU) against stagecraft's CPU backend --------------------------------------

def check(args) -> int:
    torch.set_num_threads(os.cpu_count() or 1)
    rows, worst = [], 0.0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for network, size in parse_networks(args.networks, args.input_size):
            graph, weights = export(args.stagecraft, network, args.batch, size, work)
            shape = graph["inputs"][0]["shape"]
            x = np.random.default_rng(args.seed).standard_normal(shape).astype(np.float32)
            np.save(work / "x.npy", x)
            sc = run_stagecraft(args.stagecraft, network, args.batch, size, "cpu",
                                ["--schedule", "sequential", "--cost-model", "analytic:v100"],
                                work / "x.npy", work / "y.npy", 1, 0, args.cache_dir)
            model = GraphModel(graph, weights).eval()
            with torch.no_grad():
                y = model(torch.from_numpy(x)).numpy()
            abs_err, rel_err = errors(y, sc["output"].astype(np.float64))
            worst = max(worst, rel_err)
            rows.append((network, "x".join(map(str, shape)), len(graph["ops"]), abs_err, rel_err,
                         float(np.max(np.abs(sc["output"])))))
            print(f"{network}: {rows[-1][1]}, {rows[-1][2]} ops: max abs error {abs_err:.3g}, "
                  f"max rel error {rel_err:.3g}", flush=True)
    lines = [f"PyTorch {torch.__version__} (CPU, f32 eager) against stagecraft's CPU backend (sequential "
             f"schedule), same graph and weights (stagecraft graph -o / --onnx), input seed {args.seed}; "
             f"{platform.processor() or platform.machine()}.", "",
             "| network | input | ops | max abs error | max rel error | max abs output |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {n} | {s} | {o} | {a:.3g} | {r:.3g} | {m:.3g} |" for n, s, o, a, r, m in rows]
    table = "\n".join(lines)
    print(table)
    if args.out_prefix:
        Path(args.out_prefix + ".md").write_text(table + "\n")
    ok = worst <= args.tolerance
    print(f"pytorch_baseline: {'agreement' if ok else 'DISAGREEMENT'}: worst relative error {worst:.3g} "
          f"(tolerance {args.tolerance:g})")
    return EXIT_OK if ok else EXIT_ACCURACY


# ---- Timing on the GPU --------------------------------------------------------------------------

def set_tf32(on: bool):
    torch.backends.cudnn.allow_tf32 = on
    torch.backends.cuda.matmul.allow_tf32 = on


def time_torch(fn, x, iters: int, warmup: int, device: str) -> dict:
    def sync():
        if device == "cuda":
            torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn(x)
    sync()
    first = time.perf_counter() - t0
    for _ in range(warmup):
        out = fn(x)
    sync()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        out = fn(x)
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    q = lambda p: times[min(len(times) - 1, int(p * len(times)))]
    return {"median_ms": statistics.median(times), "p10_ms": q(0.1), "p90_ms": q(0.9),
            "first_call_s": first, "output": out}


def bench(args) -> int:
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        print("pytorch_baseline: torch.cuda is not available", file=sys.stderr)
        return EXIT_ACCURACY
    torch.backends.cudnn.benchmark = True  # PyTorch's algorithm search, as stagecraft's
    state = Path(args.state) if args.state else None
    if state:
        state.mkdir(parents=True, exist_ok=True)
    engines = args.engines.split(",")
    precisions = args.precisions.split(",")
    start = time.monotonic()
    failed = incomplete = False
    entries = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for network, size in parse_networks(args.networks, args.input_size):
            keys = [(e, p) for p in precisions for e in engines]
            state_of = lambda e, p: state / f"{network}-b{args.batch}-s{size or 0}-{e}-{p}.json" if state else None
            todo = [(e, p) for e, p in keys if not (state and state_of(e, p).exists())]
            if todo and time.monotonic() - start > args.time_budget:
                incomplete = True
                continue
            if todo:
                graph, weights = export(args.stagecraft, network, args.batch, size, work)
                shape = graph["inputs"][0]["shape"]
                x = np.random.default_rng(args.seed).standard_normal(shape).astype(np.float32)
                np.save(work / "x.npy", x)
                base = GraphModel(graph, weights).eval().to(device)
                set_tf32(False)
                with torch.no_grad():
                    reference = base(torch.from_numpy(x).to(device)).float().cpu().numpy().astype(np.float64)
            for engine, precision in keys:
                path = state_of(engine, precision)
                if path and path.exists():
                    entries.append(json.loads(path.read_text()))
                    continue
                if time.monotonic() - start > args.time_budget:
                    incomplete = True
                    continue
                entry = {"network": network, "batch": args.batch, "input": "x".join(map(str, shape)),
                         "engine": engine, "precision": precision}
                print(f"pytorch_baseline: {network} {engine} {precision}", flush=True)
                try:
                    entry.update(run_entry(args, engine, precision, graph, weights, base, x, network, size, work))
                    out = entry.pop("output")
                    entry["max_abs_err"], entry["max_rel_err"] = errors(np.asarray(out, dtype=np.float64), reference)
                except Exception as e:  # one failed entry (e.g. a compiler missing) does not stop the run
                    entry["error"] = f"{type(e).__name__}: {str(e)[-1500:]}"
                    failed = True
                    print(f"pytorch_baseline: {network} {engine} {precision} failed: {entry['error']}", flush=True)
                if path and "error" not in entry:
                    path.write_text(json.dumps(entry))
                entries.append(entry)
                if device == "cuda":
                    torch.cuda.empty_cache()
    write_outputs(args, entries, incomplete)
    if incomplete:
        return EXIT_INCOMPLETE
    return EXIT_ACCURACY if failed else EXIT_OK


def run_entry(args, engine, precision, graph, weights, base, x, network, size, work) -> dict:
    device = args.device
    if engine.startswith("stagecraft"):
        flags = {"f32": [], "tf32": ["--tf32"], "f16": ["--dtype", "f16", "--layout", "nhwc"]}[precision]
        schedule = engine.split("-", 1)[1]
        if schedule == "sequential":  # its prediction is not used: no need to measure stages
            flags += ["--cost-model", "analytic:h100"]
        r = run_stagecraft(args.stagecraft, network, args.batch, size, "cuda" if device == "cuda" else "cpu",
                           ["--schedule", schedule, *flags], work / "x.npy", work / "y.npy", args.iters,
                           args.warmup, args.cache_dir)
        return {"median_ms": r["median_ms"], "p10_ms": r["p10_ms"], "p90_ms": r["p90_ms"],
                "first_call_s": None, "output": r["output"]}
    set_tf32(precision == "tf32")
    model, xt = base, torch.from_numpy(x).to(device)
    if precision == "f16":
        model = GraphModel(graph, weights).eval().to(device).half().to(memory_format=torch.channels_last)
        xt = xt.half().contiguous(memory_format=torch.channels_last)
    if engine == "pytorch-compile":
        model = torch.compile(model)
    elif engine == "pytorch-compile-ro":
        model = torch.compile(model, mode="reduce-overhead")
    with torch.no_grad():
        r = time_torch(model, xt, args.iters, args.warmup, device)
    r["output"] = r["output"].float().cpu().numpy()
    if engine != "pytorch-eager":
        torch._dynamo.reset()
    return r


def write_outputs(args, entries, incomplete: bool):
    meta = {"device": torch.cuda.get_device_name() if args.device == "cuda" else f"CPU ({platform.machine()}, {os.cpu_count()} threads)",
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
            "stagecraft": str(args.stagecraft), "batch": args.batch, "iters": args.iters,
            "warmup": args.warmup, "incomplete": incomplete,
            "notes": "f32: TF32 off (cuDNN and matmul); tf32: TF32 on; f16: half, channels_last for "
                     "PyTorch, --dtype f16 --layout nhwc for stagecraft; cudnn.benchmark on; "
                     "errors against PyTorch f32 eager on the same device"}
    print(json.dumps(meta))
    if not args.out_prefix:
        return
    prefix = Path(args.out_prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    Path(str(prefix) + ".json").write_text(json.dumps({"meta": meta, "entries": entries}, indent=1))
    cols = ["network", "batch", "input", "engine", "precision", "median_ms", "p10_ms", "p90_ms",
            "first_call_s", "max_abs_err", "max_rel_err", "error"]
    lines = [",".join(cols)]
    for e in entries:
        lines.append(",".join("" if e.get(c) is None else str(e.get(c)).replace(",", ";").replace("\n", " ")
                              for c in cols))
    Path(str(prefix) + ".csv").write_text("\n".join(lines) + "\n")
    md = [f"{meta['device']}, torch {meta['torch']} (CUDA {meta['cuda']}, cuDNN {meta['cudnn']}), batch "
          f"{args.batch}, median of {args.iters} runs (ms); {meta['notes']}.", "",
          "| network | precision | " + " | ".join(ENGINES) + " |", "|---|---|" + "---|" * len(ENGINES)]
    by = {}
    for e in entries:
        by.setdefault((e["network"], e["precision"]), {})[e["engine"]] = e
    for (network, precision), row in by.items():
        cells = []
        for engine in ENGINES:
            e = row.get(engine)
            cells.append("" if e is None else ("error" if "error" in e else f"{e['median_ms']:.3f}"))
        md.append(f"| {network} | {precision} | " + " | ".join(cells) + " |")
    if incomplete:
        md += ["", "Incomplete: the time budget ran out; run again with the same --state to continue."]
    Path(str(prefix) + ".md").write_text("\n".join(md) + "\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="compare with stagecraft's CPU output (CPU)")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--networks", default="all", help="all, or NAME[:INPUT_SIZE],... (default all)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--input-size", type=int, default=None, help="input size of every network")
    p.add_argument("--stagecraft", type=Path, default=default_stagecraft())
    p.add_argument("--cache-dir", default=None, help="stagecraft's --cache-dir")
    p.add_argument("--engines", default=",".join(ENGINES))
    p.add_argument("--precisions", default=",".join(PRECISIONS))
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tolerance", type=float, default=1e-4)
    p.add_argument("--state", default=None, help="directory of finished entries (resumable runs)")
    p.add_argument("--time-budget", type=float, default=float("inf"), help="seconds")
    p.add_argument("--out-prefix", default=None)
    args = p.parse_args()
    if not args.stagecraft.exists() and not shutil.which(str(args.stagecraft)):
        p.error(f"no stagecraft binary at {args.stagecraft} (use --stagecraft)")
    if args.check:
        return check(args)
    return bench(args)


if __name__ == "__main__":
    sys.exit(main())
