"""FlexAttention (ai.onnx.preview, the op of PyTorch's flex_attention) through stagecraft against
ONNX's reference evaluator: grouped queries, a score modifier that reads a tensor the model
computes around the node (a learned bias) and one written with Shape / Range / Where (a causal
mask, folded at load), a probability modifier; a softmax precision it cannot honour is one line."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed (scripts/test.sh installs it)")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx_cases import agrees  # noqa: E402

import stagecraft  # noqa: E402
from stagecraft.onnx_backend import Backend  # noqa: E402


def flex_model(node, extra_nodes=(), inputs=None):
    shapes = inputs or {"Q": [2, 4, 5, 8], "K": [2, 2, 6, 8], "V": [2, 2, 6, 3], "bias_in": [1, 1, 5, 6]}
    graph = helper.make_graph(
        [*extra_nodes, node], "flex", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in shapes.items()],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26), helper.make_opsetid("ai.onnx.preview", 1)])


def feeds(rng, model):
    return {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
            for i in model.graph.input}


def test_grouped_queries_a_bias_from_the_model_and_a_probability_modifier():
    rng = np.random.default_rng(80)
    score_mod = helper.make_graph([helper.make_node("Add", ["scores", "bias"], ["out"])], "score_mod",
                                  [helper.make_tensor_value_info("scores", TensorProto.FLOAT, None)],
                                  [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)])
    prob_mod = helper.make_graph([helper.make_node("Mul", ["probs", "half"], ["out"])], "prob_mod",
                                 [helper.make_tensor_value_info("probs", TensorProto.FLOAT, None)],
                                 [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                                 initializer=[numpy_helper.from_array(np.float32(0.5).reshape(()), "half")])
    node = helper.make_node("FlexAttention", ["Q", "K", "V"], ["Y"], domain="ai.onnx.preview", scale=0.3,
                            score_mod=score_mod, prob_mod=prob_mod)
    model = flex_model(node, [helper.make_node("Tanh", ["bias_in"], ["bias"])])  # read by score_mod from outside
    x = feeds(rng, model)
    (y,) = Backend.prepare(model).run(list(x.values()))
    # ONNX's reference evaluator does not give a modifier the values around the node: numpy.
    k, v = (np.repeat(x[n].astype(np.float64), 2, axis=1) for n in ("K", "V"))  # query heads 2h, 2h+1 read head h
    scores = x["Q"].astype(np.float64) @ k.transpose(0, 1, 3, 2) * 0.3 + np.tanh(x["bias_in"].astype(np.float64))
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    want = 0.5 * probs / probs.sum(-1, keepdims=True) @ v
    assert y.shape == (2, 4, 5, 3)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_a_causal_mask_written_in_its_modifier():
    rng = np.random.default_rng(81)
    ints = {n: numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
            {"two": 2, "three": 3, "zero": 0, "one": 1, "col": [-1, 1], "row": [1, -1]}.items()}
    nodes = [helper.make_node("Shape", ["scores"], ["shape"]),
             helper.make_node("Gather", ["shape", "two"], ["lq"]), helper.make_node("Gather", ["shape", "three"], ["lk"]),
             helper.make_node("Range", ["zero", "lq", "one"], ["qi"]), helper.make_node("Reshape", ["qi", "col"], ["qc"]),
             helper.make_node("Range", ["zero", "lk", "one"], ["ki"]), helper.make_node("Reshape", ["ki", "row"], ["kr"]),
             helper.make_node("GreaterOrEqual", ["qc", "kr"], ["keep"]),
             helper.make_node("Where", ["keep", "scores", "ninf"], ["out"])]
    score_mod = helper.make_graph(nodes, "causal", [helper.make_tensor_value_info("scores", TensorProto.FLOAT, None)],
                                  [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                                  initializer=[*ints.values(), numpy_helper.from_array(np.float32(-np.inf).reshape(()), "ninf")])
    node = helper.make_node("FlexAttention", ["Q", "K", "V"], ["Y"], domain="ai.onnx.preview", score_mod=score_mod)
    model = flex_model(node, inputs={"Q": [1, 2, 6, 4], "K": [1, 2, 6, 4], "V": [1, 2, 6, 4]})
    x = feeds(rng, model)
    (y,) = agrees(model, x, reference=True, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y[:, :, 0], x["V"][:, :, 0], rtol=1e-6)  # the first query sees the first key only


def test_a_softmax_precision_other_than_float_is_one_line():
    node = helper.make_node("FlexAttention", ["Q", "K", "V"], ["Y"], domain="ai.onnx.preview",
                            softmax_precision=TensorProto.DOUBLE)
    with pytest.raises(stagecraft.Error) as e:
        Backend.prepare(flex_model(node, inputs={"Q": [1, 2, 3, 4], "K": [1, 2, 3, 4], "V": [1, 2, 3, 4]}))
    assert "FlexAttention" in str(e.value) and "softmax_precision" in str(e.value) and "\n" not in str(e.value)
