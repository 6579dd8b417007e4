"""Recurrences over a sequence and the constants they start from, through stagecraft against ONNX
Runtime (or ONNX's reference evaluator where ONNX Runtime lacks the op) on random data: Scan
unrolled in both directions along any axis with a body reading values around it, LinearAttention
by its definition, a constant broadcast by a tensor, a product with a constant first or batched,
Scan-8 with its batch axis, and Upsample from the opsets before Resize."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed (scripts/test.sh installs it)")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (scripts/test.sh installs it)")
from onnx import TensorProto, helper  # noqa: E402
from onnx_cases import agrees, model_of  # noqa: E402

from stagecraft.onnx_backend import Backend  # noqa: E402


@pytest.mark.parametrize("in_axis,in_reversed,out_axis,out_reversed", [
    (0, 0, 0, 0), (1, 1, 0, 0), (1, 0, -1, 1), (-1, 1, 1, 1)])
def test_scan_in_either_direction_along_any_axis_agrees_with_onnx_runtime(in_axis, in_reversed, out_axis, out_reversed):
    """A running state s' = tanh(s·W + x_t) + bias (W, bias read from the graph around the body),
    with its per-step outputs stacked."""
    rng = np.random.default_rng(21)
    x_shape = {0: [5, 3, 4], 1: [3, 5, 4], -1: [3, 4, 5]}[in_axis]
    w = rng.standard_normal([4, 4]).astype(np.float32) * 0.5
    bias = rng.standard_normal([4]).astype(np.float32)
    body = helper.make_graph(
        [helper.make_node("MatMul", ["s_in", "W"], ["p"]),
         helper.make_node("Add", ["p", "x_t"], ["q"]),
         helper.make_node("Tanh", ["q"], ["r"]),
         helper.make_node("Add", ["r", "bias"], ["s_out"]),
         helper.make_node("Mul", ["s_out", "s_out"], ["y_t"])],
        "body",
        [helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [3, 4]),
         helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [3, 4]),
         helper.make_tensor_value_info("y_t", TensorProto.FLOAT, [3, 4])])
    scan = helper.make_node("Scan", ["s0", "x"], ["s_final", "ys"], num_scan_inputs=1, body=body,
                            scan_input_axes=[in_axis], scan_input_directions=[in_reversed],
                            scan_output_axes=[out_axis], scan_output_directions=[out_reversed])
    model = model_of([scan], {"s0": [3, 4], "x": x_shape}, ["s_final", "ys"], {"W": w, "bias": bias})
    agrees(model, {"s0": rng.standard_normal([3, 4]).astype(np.float32),
                     "x": rng.standard_normal(x_shape).astype(np.float32)})


def test_a_scan_of_a_constant_initial_state_agrees_with_onnx_runtime():
    """The state starts as a constant: products with it and broadcasts of it need it as a tensor."""
    rng = np.random.default_rng(22)
    body = helper.make_graph(
        [helper.make_node("MatMul", ["s_in", "x_t"], ["m"]),       # constant [2, 3, 3] first, batched
         helper.make_node("Mul", ["s_in", "g_t"], ["d"]),          # constant broadcast by [2, 3, 1]
         helper.make_node("Add", ["d", "m"], ["s_out"])],
        "body",
        [helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [2, 3, 3]),
         helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [2, 3, 3]),
         helper.make_tensor_value_info("g_t", TensorProto.FLOAT, [2, 3, 1])],
        [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [2, 3, 3])])
    scan = helper.make_node("Scan", ["s0", "x", "g"], ["y"], num_scan_inputs=2, body=body)
    s0 = (np.eye(3, dtype=np.float32) + rng.standard_normal([2, 3, 3]).astype(np.float32) * 0.1)
    model = model_of([scan], {"x": [4, 2, 3, 3], "g": [4, 2, 3, 1]}, ["y"], {"s0": s0})
    agrees(model, {"x": rng.standard_normal([4, 2, 3, 3]).astype(np.float32) * 0.5,
                     "g": rng.standard_normal([4, 2, 3, 1]).astype(np.float32)})


@pytest.mark.parametrize("rule,hq,hkv,decay_last,beta_last,past", [
    ("linear", 2, 2, None, None, False),
    ("gated", 4, 2, "dk", None, True),
    ("delta", 2, 1, None, "h", True),
    ("gated_delta", 4, 2, "h", 1, False),
    ("gated_delta", 4, 4, "dk", "h", True),
])
def test_linear_attention_follows_its_definition(rule, hq, hkv, decay_last, beta_last, past):
    """Against ONNX's reference evaluator (ONNX Runtime has no LinearAttention kernel)."""
    rng = np.random.default_rng(23)
    b, t, dk, dv = 2, 5, 3, 4
    feeds = {"q": rng.standard_normal([b, t, hq * dk]).astype(np.float32),
             "k": rng.standard_normal([b, t, hkv * dk]).astype(np.float32) * 0.5,
             "v": rng.standard_normal([b, t, hkv * dv]).astype(np.float32)}
    names = ["q", "k", "v", "", "", ""]
    if past:
        feeds["past"] = rng.standard_normal([b, hkv, dk, dv]).astype(np.float32)
        names[3] = "past"
    if decay_last:
        last = hkv * dk if decay_last == "dk" else hkv
        feeds["decay"] = -rng.uniform(0.01, 0.5, [b, t, last]).astype(np.float32)
        names[4] = "decay"
    if beta_last:
        last = hkv if beta_last == "h" else 1
        feeds["beta"] = rng.uniform(0.1, 0.9, [b, t, last]).astype(np.float32)
        names[5] = "beta"
    while names[-1] == "":
        names.pop()
    node = helper.make_node("LinearAttention", names, ["y", "state"], q_num_heads=hq, kv_num_heads=hkv,
                            update_rule=rule)
    model = model_of([node], {n: list(a.shape) for n, a in feeds.items()}, ["y", "state"], opset=27)
    agrees(model, feeds, reference=True)


def test_linear_attention_refuses_a_rule_without_its_inputs_in_one_line():
    node = helper.make_node("LinearAttention", ["q", "k", "v"], ["y"], q_num_heads=2, kv_num_heads=2,
                            update_rule="gated")
    model = model_of([node], {"q": [1, 2, 4], "k": [1, 2, 4], "v": [1, 2, 4]}, ["y"], opset=27)
    with pytest.raises(Exception, match=r"\(LinearAttention\): update_rule 'gated' needs decay \(input 4\)"):
        Backend.prepare(model)


@pytest.mark.parametrize("opset,mode", [(9, "nearest"), (9, "linear"), (7, "nearest")])
def test_upsample_of_the_old_opsets_agrees_with_onnx_runtime(opset, mode):
    rng = np.random.default_rng(24)
    scales = [1.0, 1.0, 2.0, 3.0]
    if opset >= 9:
        node = helper.make_node("Upsample", ["x", "scales"], ["y"], mode=mode)
        inits = {"scales": np.array(scales, np.float32)}
    else:
        node = helper.make_node("Upsample", ["x"], ["y"], mode=mode, scales=scales)
        inits = {}
    model = model_of([node], {"x": [1, 2, 3, 4]}, ["y"], inits, opset=opset)
    agrees(model, {"x": rng.standard_normal([1, 2, 3, 4]).astype(np.float32)})


def test_an_old_version_the_importer_does_not_translate_is_refused_by_name():
    """Slice-1 (opset 9) takes its bounds as attributes; the importer translates Slice from 11."""
    node = helper.make_node("Slice", ["x"], ["y"], starts=[0], ends=[2], axes=[1])
    model = model_of([node], {"x": [2, 4]}, ["y"], opset=9)
    with pytest.raises(Exception, match=r"\(Slice\): version 1 of Slice \(opset 9\) is not supported: this build "
                                        r"translates Slice from version 11"):
        Backend.prepare(model)


@pytest.mark.parametrize("lengths", [False, True])
def test_scan_8_with_a_batch_axis_agrees_with_onnx_runtime(lengths):
    """Scan of opset 8: the batch first, each element scanned alone (a running sum and a running
    maximum over two inputs, the second read backwards), the sequence lengths all full."""
    rng = np.random.default_rng(25)
    body = helper.make_graph(
        [helper.make_node("Add", ["sum_in", "a_t"], ["sum_out"]),
         helper.make_node("Max", ["max_in", "b_t"], ["max_out"]),
         helper.make_node("Mul", ["sum_out", "max_out"], ["step"])],
        "body", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("sum_in", "max_in", "a_t", "b_t")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("sum_out", "max_out", "step")])
    node = helper.make_node("Scan", ["lens" if lengths else "", "s0", "m0", "a", "b"], ["s", "m", "steps"],
                            num_scan_inputs=2, directions=[0, 1], body=body)
    inits = {"lens": np.full([3], 4, np.int64)} if lengths else {}
    model = model_of([node], {"s0": [3, 2], "m0": [3, 2], "a": [3, 4, 2], "b": [3, 4, 2]}, ["s", "m", "steps"], inits, opset=8)
    feeds = {n: rng.standard_normal(s).astype(np.float32) for n, s in
             {"s0": [3, 2], "m0": [3, 2], "a": [3, 4, 2], "b": [3, 4, 2]}.items()}
    s, m, steps = agrees(model, feeds)
    np.testing.assert_allclose(s, feeds["s0"] + feeds["a"].sum(1), rtol=1e-5)
    assert steps.shape == (3, 4, 2)
