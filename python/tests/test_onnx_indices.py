"""Index tensors through stagecraft against ONNX Runtime on random data: TopK (largest and
smallest, any axis), ArgMax / ArgMin, GatherElements of runtime indices, the integer arithmetic
on indices (a Div of integers truncates, a Cast to int64 truncates), and the end-to-end head of
YOLOv10 / YOLO26 (the best boxes picked by two TopKs and three GatherElements), Gather by indices
the model computes, GatherND (constant or computed indices), Trilu, Tile and Expand of the first
axis."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed (scripts/test.sh installs it)")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (scripts/test.sh installs it)")
from onnx import TensorProto, helper  # noqa: E402
from onnx_cases import agrees as agrees_with  # noqa: E402
from onnx_cases import model_of  # noqa: E402


def agrees(model, feeds):
    agrees_with(model, feeds, exact=True)


@pytest.mark.parametrize("shape,axis,k,largest", [([2, 50], 1, 7, 1), ([3, 6, 4], 1, 6, 0), ([2, 3, 9], -1, 2, 1),
                                                  ([5, 4], 0, 3, 0)])
def test_top_k_agrees_with_onnx_runtime(shape, axis, k, largest):
    rng = np.random.default_rng(31)
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)
    model = model_of([node], {"x": shape}, {"v": TensorProto.FLOAT, "i": TensorProto.INT64},
                     {"k": np.array([k], np.int64)})
    x = rng.standard_normal(shape).astype(np.float32)
    x.flat[3] = x.flat[5]  # a tie
    agrees(model, {"x": x})


@pytest.mark.parametrize("op,keepdims,axis", [("ArgMax", 1, 1), ("ArgMin", 0, -1), ("ArgMax", 0, 0)])
def test_arg_max_and_min_agree_with_onnx_runtime(op, keepdims, axis):
    rng = np.random.default_rng(32)
    node = helper.make_node(op, ["x"], ["y"], axis=axis, keepdims=keepdims)
    model = model_of([node], {"x": [3, 7, 5]}, {"y": TensorProto.INT64})
    agrees(model, {"x": rng.standard_normal([3, 7, 5]).astype(np.float32)})


def test_gather_elements_of_constant_indices_and_of_a_constant_table():
    rng = np.random.default_rng(33)
    idx = rng.integers(-4, 4, [2, 3, 5]).astype(np.int64)
    table = rng.standard_normal([2, 4, 5]).astype(np.float32)
    nodes = [helper.make_node("GatherElements", ["x", "idx"], ["a"], axis=1),
             helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1),
             helper.make_node("GatherElements", ["table", "i"], ["b"], axis=1)]
    model = model_of(nodes, {"x": [2, 4, 5]}, {"a": TensorProto.FLOAT, "b": TensorProto.FLOAT},
                     {"idx": idx, "table": table, "k": np.array([3], np.int64)})
    agrees(model, {"x": rng.standard_normal([2, 4, 5]).astype(np.float32)})


def test_integer_division_and_casts_of_indices_truncate():
    """i // 7 and i % 7 of TopK's indices, and a Cast of float values to int64, as ONNX Runtime
    computes them in integers."""
    rng = np.random.default_rng(34)
    nodes = [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1),
             helper.make_node("Div", ["i", "seven"], ["q"]),
             helper.make_node("Mod", ["i", "seven"], ["r"]),
             helper.make_node("Cast", ["q"], ["qf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["x", "ten"], ["xt"]),
             helper.make_node("Cast", ["xt"], ["xi"], to=TensorProto.INT64)]
    model = model_of(nodes, {"x": [2, 60]}, {"qf": TensorProto.FLOAT, "r": TensorProto.INT64, "xi": TensorProto.INT64},
                     {"k": np.array([20], np.int64), "seven": np.array(7, np.int64), "ten": np.array(10, np.float32)})
    agrees(model, {"x": rng.standard_normal([2, 60]).astype(np.float32)})


def test_a_yolo_end_to_end_head_agrees_with_onnx_runtime():
    """YOLOv10's one-to-one head as Ultralytics exports it: per anchor the best class score, the
    top anchors, their class scores gathered, the top (anchor, class) pairs of those, and their
    boxes; output [1, top, 6] = box, score, class."""
    rng = np.random.default_rng(35)
    anchors, classes, top = 400, 8, 30
    i64 = lambda *v: np.array(v, np.int64)  # noqa: E731
    nodes = [
        helper.make_node("ReduceMax", ["scores", "last"], ["best"], keepdims=0),
        helper.make_node("TopK", ["best", "top"], ["_", "anchor"], axis=1),
        helper.make_node("Unsqueeze", ["anchor", "last"], ["anchor3"]),
        helper.make_node("Expand", ["anchor3", "wide"], ["anchor_c"]),
        helper.make_node("GatherElements", ["scores", "anchor_c"], ["picked"], axis=1),
        helper.make_node("Flatten", ["picked"], ["flat"], axis=1),
        helper.make_node("TopK", ["flat", "top"], ["score", "pair"], axis=1),
        helper.make_node("Mod", ["pair", "nc"], ["cls"], fmod=0),
        helper.make_node("Div", ["pair", "nc"], ["row"]),
        helper.make_node("GatherElements", ["anchor", "row"], ["which"], axis=1),
        helper.make_node("Unsqueeze", ["which", "last"], ["which3"]),
        helper.make_node("Expand", ["which3", "four"], ["which4"]),
        helper.make_node("GatherElements", ["boxes", "which4"], ["box"], axis=1),
        helper.make_node("Unsqueeze", ["score", "last"], ["score3"]),
        helper.make_node("Unsqueeze", ["cls", "last"], ["cls3"]),
        helper.make_node("Cast", ["cls3"], ["clsf"], to=TensorProto.FLOAT),
        helper.make_node("Concat", ["box", "score3", "clsf"], ["y"], axis=-1),
    ]
    model = model_of(nodes, {"scores": [1, anchors, classes], "boxes": [1, anchors, 4]}, {"y": TensorProto.FLOAT},
                     {"last": i64(-1), "top": i64(top), "wide": i64(1, top, classes), "four": i64(1, top, 4),
                      "nc": i64(classes)}, opset=18)
    agrees(model, {"scores": rng.random([1, anchors, classes], np.float32),
                   "boxes": rng.standard_normal([1, anchors, 4]).astype(np.float32) * 100})


@pytest.mark.parametrize("shape,axis,table", [([12, 5], 0, False), ([2, 9, 4], 1, False), ([3, 8], 1, False),
                                              ([12, 5], 0, True)])
def test_gather_of_indices_the_model_computes(shape, axis, table):
    # RT-DETR's top-k queries and an oriented-box NMS head: Gather by TopK's indices (of any rank:
    # ONNX puts the indices' dimensions in place of the axis), from a tensor or a constant table.
    rng = np.random.default_rng(5)
    scores_shape = [shape[axis]] if axis == 0 else shape[:axis + 1]
    nodes = [helper.make_node("Relu", ["s"], ["r"]),
             helper.make_node("TopK", ["r", "k"], ["v", "i"], axis=-1),
             helper.make_node("Gather", ["t" if table else "x", "i"], ["g"], axis=axis),
             helper.make_node("Mul", ["g", "two"], ["y"])]
    inits = {"k": np.array([3], np.int64), "two": np.float32(2)}
    inputs = {"s": scores_shape}
    if table:
        inits["t"] = rng.standard_normal(shape).astype(np.float32)
    else:
        inputs["x"] = shape
    model = model_of(nodes, inputs, ("y",), inits)
    feeds = {"s": rng.standard_normal(scores_shape).astype(np.float32)}
    if not table:
        feeds["x"] = rng.standard_normal(shape).astype(np.float32)
    agrees(model, feeds)


@pytest.mark.parametrize("upper,k", [(1, 0), (0, 0), (1, 1), (0, -1)])
def test_trilu_agrees_with_onnx_runtime(upper, k):
    # The upper triangle of an IoU matrix (Ultralytics' oriented-box NMS).
    node = helper.make_node("Trilu", ["x", "k"], ["y"], upper=upper)
    model = model_of([helper.make_node("Relu", ["a"], ["x"]), node], {"a": [2, 5, 6]},
                     initializers={"k": np.array(k, np.int64)})
    agrees(model, {"a": np.random.default_rng(2).standard_normal((2, 5, 6)).astype(np.float32)})


@pytest.mark.parametrize("op,arg,shape", [("Tile", [3, 1, 2], [2, 3, 4]), ("Expand", [4, 2, 3, 5], [1, 3, 1]),
                                          ("Tile", [2, 2], [3, 5])])
def test_tile_and_expand_repeat_any_axis(op, arg, shape):
    # The first axis too (Gather's broadcast indices over a batch of queries).
    model = model_of([helper.make_node("Relu", ["x"], ["r"]), helper.make_node(op, ["r", "a"], ["y"])],
                     {"x": shape}, initializers={"a": np.array(arg, np.int64)})
    agrees(model, {"x": np.random.default_rng(0).standard_normal(shape).astype(np.float32)})


@pytest.mark.parametrize("indices", [np.array([[[0, 1], [1, 3]], [[1, 0], [-1, -2]]], np.int64),  # k = 2, negative
                                     np.array([[1], [0], [1]], np.int64),                         # k = 1
                                     np.array([[1, 2, 2, 4]], np.int64)])                         # every axis
def test_gather_nd_of_constant_indices(indices):
    # UperNet's adaptive pooling (the dynamo exporter's aten.index).
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("GatherND", ["r", "i"], ["y"])]
    model = model_of(nodes, {"x": [2, 4, 3, 5]}, initializers={"i": indices})
    agrees(model, {"x": np.random.default_rng(3).standard_normal((2, 4, 3, 5)).astype(np.float32)})


def test_gather_nd_of_indices_the_model_computes():
    nodes = [helper.make_node("ReduceMax", ["x", "ax"], ["m"], keepdims=0),
             helper.make_node("TopK", ["m", "k"], ["v", "t"], axis=-1),
             helper.make_node("Unsqueeze", ["t", "ax"], ["i"]),
             helper.make_node("GatherND", ["x", "i"], ["y"])]
    model = model_of(nodes, {"x": [7, 5]}, initializers={"ax": np.array([-1], np.int64), "k": np.array([3], np.int64)},
                     opset=18)
    agrees(model, {"x": np.random.default_rng(4).standard_normal((7, 5)).astype(np.float32)})


@pytest.mark.parametrize("op,axis,largest", [("ArgMax", 1, 1), ("ArgMin", 1, 0), ("TopK", 1, 1), ("TopK", 0, 0),
                                             ("ArgMax", -1, 1)])
def test_the_best_of_an_axis_with_ties_and_nans(op, axis, largest):
    """k = 1 (its own loop): a segmenter's class map, the best channel per pixel; ties go to the
    lower index, NaN is the largest (and ranks after every number when smallest), as ONNX Runtime
    orders them."""
    rng = np.random.default_rng(35)
    shape = [2, 5, 3, 2100]  # more pixels than one chunk of the loop
    x = rng.standard_normal(shape).astype(np.float32)
    x[0, 3, 1, :50] = x[0, 1, 1, :50]  # ties
    x[1, 2, 0, 7:9] = np.nan
    x[1, 0, 2, 5:300] = np.nan  # a NaN first
    x[1, :, 2, 400] = np.nan  # every element NaN
    if op == "TopK":
        node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)
        model = model_of([node], {"x": shape}, {"v": TensorProto.FLOAT, "i": TensorProto.INT64},
                         {"k": np.array([1], np.int64)})
    else:
        node = helper.make_node(op, ["x"], ["i"], axis=axis, keepdims=1)
        model = model_of([node], {"x": shape}, {"i": TensorProto.INT64})
    agrees(model, {"x": x})
