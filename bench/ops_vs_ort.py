#!/usr/bin/env python3
"""Where the milliseconds go: stagecraft's kernels against ONNX Runtime's nodes, op class by op class.

Usage:
  bench/ops_vs_ort.py MODEL.onnx [--stagecraft PATH] [--rounds R] [--ort-warmup N] [--out FILE.md]
                      [--require-all-matched]

Each round runs `stagecraft run MODEL --schedule sequential --trace` (its kernels' times in one
warm run after the timed ones) and then ONNX Runtime with profiling (CPU provider, all graph
optimisations, one intra-op thread per core; its nodes' times in the last of N+1 runs) on the
same seeded input, so that both engines see the same phase of a noisy machine and give one
sample per kernel and round; a kernel's time is its minimum over the rounds. Each stagecraft convolution kernel (named after the model's Conv node) is matched with
the ORT node that computes the same fused chain: ORT names a fused node after the chain's last
output (Conv -> Relu/Clip/Add ...), with "_nchwc" when it runs in its blocked layout. Matched
kernels are summed per class (kernel size, stride, depthwise or grouped, output size); what does
not match (our other ops, ORT's reorders, ...) is summed apart, per op type. The table shows where
one engine's kernels are faster, not the end-to-end latency (use side_by_side.py for that).

--require-all-matched: exit 1 when a convolution kernel of ours has no ORT node (for the tests).
Needs numpy, onnx and onnxruntime.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import compare_ort  # noqa: E402  (model input, core count, commit)
from pyenv import machine  # noqa: E402

CHAIN_OPS = {"Relu", "Clip", "Add", "Sum", "BatchNormalization", "Mul", "Div", "LeakyRelu",
             "HardSigmoid", "HardSwish", "Sigmoid"}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model")
    p.add_argument("--stagecraft", default=str(REPO / "build" / "cli" / "stagecraft"))
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--ort-warmup", type=int, default=5, help="ORT runs before the profiled one")
    p.add_argument("--out", help="also write the table (Markdown) here")
    p.add_argument("--require-all-matched", action="store_true")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.ort_warmup < 0:
        p.error("--rounds must be at least 1 and --ort-warmup not negative")
    if not os.path.isfile(args.model):
        p.error(f"no model file {args.model}")
    if not os.access(args.stagecraft, os.X_OK):
        p.error(f"no stagecraft binary at {args.stagecraft} (build it, or pass --stagecraft)")
    return args


def our_kernels(args, x_path: str, trace: str) -> dict[str, float]:
    """{kernel name: µs} of one traced sequential run."""
    cmd = [args.stagecraft, "run", os.path.abspath(args.model), "--backend", "cpu", "--schedule",
           "sequential", "--iters", "5", "--input", x_path, "--trace", trace]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"ops_vs_ort: {' '.join(cmd)} exited {proc.returncode}:\n"
                         f"{(proc.stderr or proc.stdout)[-1500:]}")
    out = {}
    for e in json.load(open(trace))["traceEvents"]:
        if e.get("cat") == "kernel":
            out[e["name"]] = min(out.get(e["name"], float("inf")), float(e["dur"]))
    return out


def ort_nodes(model: str, x, input_name: str, warmup: int, folder: str) -> tuple[dict, dict]:
    """({node name: µs in the last run}, {node name: op type}) of one profiled session: `warmup`
    runs, then the one whose times count (one sample per node, as the trace gives per kernel)."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(folder, "ort")
    so.intra_op_num_threads = compare_ort.core_count()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    for _ in range(warmup + 1):
        session.run(None, {input_name: x})
    events = json.load(open(session.end_profiling()))
    last, kinds = {}, {}
    for e in events:  # in time order: the last event of a node is from the last run
        if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
            name = e["name"][: -len("_kernel_time")]
            last[name] = float(e["dur"])
            kinds[name] = e.get("args", {}).get("op_name", "?")
    return last, kinds


def conv_classes(model_path: str):
    """({Conv node name: (class, [ORT names that would compute its chain, first choice first])},
    {node name: op type})."""
    import onnx
    from onnx import shape_inference
    model = onnx.load(model_path)
    try:
        model = shape_inference.infer_shapes(model)
    except Exception:  # shapes are only for the class label
        pass
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(model.graph.value_info) + list(model.graph.output)}
    weights = {t.name: list(t.dims) for t in model.graph.initializer}
    consumers = collections.defaultdict(list)
    for n in model.graph.node:
        for i in n.input:
            consumers[i].append(n)
    out = {}
    for n in model.graph.node:
        if n.op_type != "Conv":
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        w = weights.get(n.input[1], [0, 0, 0, 0])
        group = attrs.get("group", 1)
        stride = attrs.get("strides", [1, 1])
        kind = "depthwise" if group > 1 and w[1] == 1 else ("grouped" if group > 1 else "")
        shape = shapes.get(n.output[0], [])
        size = f"{shape[2]}x{shape[3]}" if len(shape) == 4 and shape[2] else "?"
        label = f"Conv {w[2]}x{w[3]} s{stride[0]} {kind}".rstrip() + f" @{size}"
        names, tensor, node = [n.name], n.output[0], n
        for _ in range(4):  # the chain ORT may have fused: single consumers of the fusable kinds
            names += [tensor + "_nchwc", tensor]
            nxt = consumers.get(tensor, [])
            if len(nxt) != 1 or nxt[0].op_type not in CHAIN_OPS:
                break
            node = nxt[0]
            tensor = node.output[0]
        out[n.name] = (label, list(reversed(names)))  # the longest chain first
    return out, {n.name: n.op_type for n in model.graph.node}


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        import numpy as np
        import onnxruntime
    except ImportError as e:
        print(f"ops_vs_ort: cannot import {e.name} (pip install numpy onnx onnxruntime)", file=sys.stderr)
        return 3
    input_name, shape, _ = compare_ort.model_input(args.model, 1)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    ours, ort_min, ort_kind = {}, {}, {}
    with tempfile.TemporaryDirectory() as folder:
        x_path = os.path.join(folder, "x.npy")
        np.save(x_path, x)
        for r in range(args.rounds):
            for k, v in our_kernels(args, x_path, os.path.join(folder, f"trace{r}.json")).items():
                ours[k] = min(ours.get(k, float("inf")), v)
            times, kinds = ort_nodes(args.model, x, input_name, args.ort_warmup, folder)
            for k, v in times.items():
                ort_min[k] = min(ort_min.get(k, float("inf")), v)
            ort_kind.update(kinds)
            print(f"ops_vs_ort: round {r + 1}/{args.rounds}", file=sys.stderr, flush=True)

    convs, op_types = conv_classes(args.model)
    rows = collections.defaultdict(lambda: [0, 0.0, 0.0])  # class: count, ours µs, ORT µs
    used, unmatched = set(), []
    for name, t in ours.items():
        if name not in convs:
            continue
        label, candidates = convs[name]
        match = next((c for c in candidates if c in ort_min and c not in used), None)
        if match is None:
            unmatched.append(name)
            continue
        used.add(match)
        row = rows[label]
        row[0] += 1
        row[1] += t
        row[2] += ort_min[match]
    rest_ours = collections.defaultdict(float)
    for name, t in ours.items():
        if name not in convs or name in unmatched:
            # our other kernels are named after their node (or say what they are: copies, reorders)
            rest_ours["Conv (unmatched)" if name in convs else op_types.get(name, name.split(" ")[0])] += t
    rest_ort = collections.defaultdict(float)
    for name, t in ort_min.items():
        if name not in used:
            rest_ort[ort_kind.get(name, "?")] += t

    lines = [f"# {Path(args.model).name}: stagecraft kernels against ONNX Runtime nodes",
             "",
             f"{machine()}; ONNX Runtime "
             f"{onnxruntime.__version__}; stagecraft {compare_ort.git_commit()}; minima over "
             f"{args.rounds} rounds (`bench/ops_vs_ort.py {Path(args.model).name} --rounds {args.rounds}`)",
             "",
             "| convolutions | n | stagecraft ms | ORT ms | stagecraft / ORT |",
             "|---|---|---|---|---|"]
    total = [0.0, 0.0]
    for label, (n, a, b) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"| {label} | {n} | {a / 1000:.3f} | {b / 1000:.3f} | {a / b:.2f}x |")
        total[0] += a
        total[1] += b
    if total[1] > 0:
        lines.append(f"| **all matched** | {sum(r[0] for r in rows.values())} | {total[0] / 1000:.3f} "
                     f"| {total[1] / 1000:.3f} | {total[0] / total[1]:.2f}x |")
    lines += ["", "| not matched | stagecraft ms | ORT ms |", "|---|---|---|"]
    for kind in sorted(set(rest_ours) | set(rest_ort), key=lambda k: -(rest_ours[k] + rest_ort[k])):
        lines.append(f"| {kind} | {rest_ours[kind] / 1000:.3f} | {rest_ort[kind] / 1000:.3f} |")
    lines += ["", f"sum of kernel minima: stagecraft {sum(ours.values()) / 1000:.3f} ms, "
                  f"ORT {sum(ort_min.values()) / 1000:.3f} ms"]
    if unmatched:
        lines.append(f"unmatched convolutions ({len(unmatched)}): {', '.join(unmatched[:8])}"
                     + (" ..." if len(unmatched) > 8 else ""))
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    if args.require_all_matched and (unmatched or not rows):
        print(f"ops_vs_ort: {len(unmatched)} convolution kernels without an ORT node", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
