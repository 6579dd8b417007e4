#!/usr/bin/env python3
"""A model with a data-dependent tail (NonZero, NonMaxSuppression: frontend/onnx/onnx_tail.h)
against ONNX Runtime, in two ways, on random inputs.

1. End to end: stagecraft's outputs against ONNX Runtime's (max |difference| / max |ORT|, and the
   rows of a detection output that either engine has and the other has not).
2. The tail alone: the model cut where the tail begins (onnx.utils.extract_model): stagecraft runs
   the part before it, ONNX Runtime the tail on exactly those values, and stagecraft's end-to-end
   outputs must equal that. This separates the tail's semantics (exact) from the discontinuity of
   detection: two boxes of scores 1e-7 apart, or an IoU at the threshold, are decided by the last
   bits of the convolutions, which differ between any two engines.

Usage: PYTHONPATH=build/python:python .venv/bin/python bench/tail_check.py MODEL.onnx [--seeds 3]
"""
from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np
import onnx
import onnx.utils
import onnxruntime as ort

import stagecraft

ort.set_default_logger_severity(3)  # not the warnings about initializers the cut models leave unused
DATA_DEPENDENT = {"NonZero", "NonMaxSuppression"}


def split_tail(model: onnx.ModelProto):
    """The values the tail reads from the rest of the graph (the importer's rule: a NonZero or
    NonMaxSuppression of non-constant inputs, and every node reading a value of the tail), and the
    tail as a model of those values (with the constants it reads; empty tensors as initializers)."""
    g = model.graph
    constant = {t.name for t in g.initializer}
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True).graph.value_info
    empty = {v.name: v for v in inferred
             if all(d.HasField("dim_value") for d in v.type.tensor_type.shape.dim)
             and any(d.dim_value == 0 for d in v.type.tensor_type.shape.dim)}
    tail, boundary, nodes = set(), [], []
    initializers = list(g.initializer)
    for node in g.node:
        if node.output and all(o in empty for o in node.output):
            constant.update(node.output)  # an empty tensor is a constant too
            for o in node.output:
                t = empty[o].type.tensor_type
                dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
                initializers.append(onnx.numpy_helper.from_array(
                    np.zeros([d.dim_value for d in t.shape.dim], dtype), o))
            continue
        reads_tail = any(i in tail for i in node.input)
        if node.op_type == "Constant" or (not reads_tail and all(i in constant or not i for i in node.input)):
            constant.update(node.output)  # folded at load
            nodes.append(node)
            continue
        if reads_tail or node.op_type in DATA_DEPENDENT:
            for i in node.input:
                if i and i not in tail and i not in constant and i not in boundary:
                    boundary.append(i)
            tail.update(node.output)
            nodes.append(node)
    types = {v.name: v for v in list(inferred) + list(g.input)}
    tail_graph = onnx.helper.make_graph(nodes, "tail", [types[b] for b in boundary],
                                        [o for o in g.output if o.name in tail], initializer=initializers)
    tail_model = onnx.helper.make_model(tail_graph, opset_imports=model.opset_import)
    tail_model.ir_version = model.ir_version
    return boundary, tail_model


def value_types(model: onnx.ModelProto) -> dict:
    inferred = onnx.shape_inference.infer_shapes(model)
    g = inferred.graph
    return {v.name: v.type.tensor_type.elem_type for v in list(g.value_info) + list(g.output) + list(g.input)}


def detection_rows(y: np.ndarray) -> set:
    rows = y.reshape(-1, y.shape[-1])
    return {tuple(np.round(r, 3)) for r in rows if np.abs(r).sum() > 0}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--shape", default="1x3x640x640",
                   help="the input's shape where the model leaves dimensions symbolic (default 1x3x640x640)")
    a = p.parse_args()
    fallback = [int(d) for d in a.shape.split("x")]
    model = onnx.load(a.model)
    inputs = [i for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    outputs = [o.name for o in model.graph.output]
    shapes = [[d.dim_value if d.HasField("dim_value") else fallback[k]
               for k, d in enumerate(i.type.tensor_type.shape.dim)] for i in inputs]
    for i, shape in zip(inputs, shapes):  # symbolic dimensions fixed: shape inference sees the sizes
        for d, n in zip(i.type.tensor_type.shape.dim, shape):
            d.dim_value = n
    boundary, tail_model = split_tail(model)
    types = value_types(model)
    print(f"{os.path.basename(a.model)}: the tail reads {len(boundary)} values ({', '.join(boundary)})")
    with tempfile.TemporaryDirectory() as tmp:
        head_path, tail_path = os.path.join(tmp, "head.onnx"), os.path.join(tmp, "tail.onnx")
        fixed_path = os.path.join(tmp, "model.onnx")
        onnx.save(model, fixed_path)
        onnx.utils.extract_model(fixed_path, head_path, [i.name for i in inputs], boundary)
        onnx.save(tail_model, tail_path)
        ours = stagecraft.Session(stagecraft.Model(a.model, input_shapes=shapes), schedule="sequential")
        head = stagecraft.Session(stagecraft.Model(head_path, input_shapes=shapes), schedule="sequential")
        ref = ort.InferenceSession(a.model, providers=["CPUExecutionProvider"])
        tail = ort.InferenceSession(tail_path, providers=["CPUExecutionProvider"])
        ref_head = ort.InferenceSession(head_path, providers=["CPUExecutionProvider"])
        print(f"  stagecraft: {ours.model.tail}")
        for seed in range(a.seeds):
            feeds = {i.name: np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
                     for i, shape in zip(inputs, shapes)}
            got = ours.run(list(feeds.values()))
            want = ref.run(None, feeds)
            cut = head.run(list(feeds.values()))
            ref_cut = ref_head.run(None, feeds)
            floats = [float(np.abs(c - r).max() / max(1e-6, float(np.abs(r).max())))
                      for c, r in zip(cut, ref_cut) if r.size and r.dtype == np.float32]
            indices = [(int((c != r.astype(np.float32)).sum()), r.size)
                       for c, r in zip(cut, ref_cut) if r.size and r.dtype != np.float32]
            print(f"  seed {seed}: the float values the tail reads differ from ORT's by {max(floats, default=0):.1e} "
                  f"(relative); integer and boolean ones in {sum(n for n, _ in indices)} of "
                  f"{sum(m for _, m in indices)} elements (an ArgMax between near-equal scores)")
            np_types = {onnx.TensorProto.INT64: np.int64, onnx.TensorProto.BOOL: np.bool_}
            tail_feeds = {n: v.astype(np_types.get(types.get(n), np.float32)) for n, v in zip(boundary, cut)}
            on_ours = dict(zip([o.name for o in tail.get_outputs()], tail.run(None, tail_feeds)))
            for name, g, w in zip(outputs, got, want):
                err = float(np.abs(g - w).max() / max(1e-6, float(np.abs(w).max()))) if g.shape == w.shape and g.size else 0.0
                line = f"  seed {seed} {name}: shape {tuple(g.shape)} (ORT {tuple(w.shape)}), relative difference {err:.1e}"
                if name in on_ours:
                    t = on_ours[name]
                    exact = g.shape == t.shape and np.array_equal(g, t.astype(np.float32))
                    line += f"; the tail on stagecraft's values: {'identical' if exact else 'DIFFERENT'}"
                else:
                    line += " (not from the tail)"
                if g.ndim == 3 and g.shape[-1] >= 6:
                    rg, rw = detection_rows(g), detection_rows(w)
                    line += f"; detections {len(rg)} (ORT {len(rw)}), in one only: {len(rg ^ rw)}"
                print(line)


if __name__ == "__main__":
    main()
