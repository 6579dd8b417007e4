"""What the Hugging Face vision exports need, through stagecraft against ONNX Runtime on random
data: Col2Im (MobileViT V2's folding) in every stride / pad / dilation case, a Resize of a
constant (DETR's padding mask) folded, a node of constants no fold computes run on a tensor, a
Gather along the batch axis of a 4-D tensor and of non-consecutive indices (MobileViT's
unfolding), a normalisation over a whole feature map as accurate as float64 allows, a float64 part
computed in float32 (Deformable DETR), ScatterND slice assignments, and a pool window larger than
its input (EfficientNet's pooler), a product broadcast in both operands (FocalNet), a Concat of
tensors and constants (DINOv2 with registers), a nearest upsample of infinities, and a Tile of a
global query (SwiftFormer) without a copy per repeat."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed (scripts/test.sh installs it)")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (scripts/test.sh installs it)")
from onnx import TensorProto, helper  # noqa: E402
from onnx_cases import agrees, model_of  # noqa: E402

from stagecraft.onnx_backend import Backend  # noqa: E402


@pytest.mark.parametrize("image,block,strides,pads,dilations", [
    ([6, 8], [2, 2], [2, 2], [0, 0, 0, 0], [1, 1]),      # MobileViT's non-overlapping patches
    ([5, 7], [3, 2], [1, 2], [1, 0, 1, 1], [1, 1]),      # overlapping blocks summed, pads
    ([9, 9], [2, 3], [2, 1], [0, 1, 0, 1], [2, 1]),      # dilated
    ([7, 8], [2, 2], [2, 3], [0, 0, 0, 0], [1, 1]),      # a stride leaving the last rows / columns
])
def test_col2im_agrees_with_onnx_runtime(image, block, strides, pads, dilations):
    rng = np.random.default_rng(41)
    grid = [(image[d] + pads[d] + pads[d + 2] - dilations[d] * (block[d] - 1) - 1) // strides[d] + 1 for d in range(2)]
    shape = [2, 3 * block[0] * block[1], grid[0] * grid[1]]
    node = helper.make_node("Col2Im", ["x", "image", "block"], ["y"], strides=strides, pads=pads, dilations=dilations)
    model = model_of([node], {"x": shape}, ["y"], {"image": np.array(image, np.int64), "block": np.array(block, np.int64)},
                     opset=18)
    agrees(model, {"x": rng.standard_normal(shape).astype(np.float32)}, rtol=1e-5)


def test_a_resize_of_a_constant_mask_folds():
    """DETR: a padding mask resized to a feature map's size, inverted, and applied."""
    mask = np.ones([1, 1, 8, 12], np.float32)
    mask[..., 6:, :] = 0
    nodes = [helper.make_node("Resize", ["mask", "", "", "size"], ["m"], mode="nearest"),
             helper.make_node("Cast", ["m"], ["b"], to=TensorProto.BOOL),
             helper.make_node("Not", ["b"], ["nb"]),
             helper.make_node("Cast", ["nb"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["x", "f"], ["y"])]
    model = model_of(nodes, {"x": [1, 4, 4, 3]}, ["y"], {"mask": mask, "size": np.array([1, 1, 4, 3], np.int64)})
    agrees(model, {"x": np.random.default_rng(42).standard_normal([1, 4, 4, 3]).astype(np.float32)})


def test_a_node_of_constants_no_fold_computes_runs_on_a_tensor():
    """A convolution of a constant image (no fold computes convolutions) added to the input."""
    rng = np.random.default_rng(43)
    nodes = [helper.make_node("Conv", ["c", "w"], ["k"], pads=[1, 1, 1, 1]), helper.make_node("Add", ["x", "k"], ["y"])]
    model = model_of(nodes, {"x": [1, 2, 5, 5]}, ["y"], {"c": rng.standard_normal([1, 3, 5, 5]).astype(np.float32),
                                                  "w": rng.standard_normal([2, 3, 3, 3]).astype(np.float32)})
    agrees(model, {"x": rng.standard_normal([1, 2, 5, 5]).astype(np.float32)})


@pytest.mark.parametrize("axis,indices", [(0, np.array(1, np.int64)), (2, np.array([0, 2, 4, 1], np.int64)),
                                          (-1, np.array([[5, 3], [0, 0]], np.int64))])
def test_gathers_along_any_axis_by_any_constant_indices(axis, indices):
    rng = np.random.default_rng(44)
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=axis)
    model = model_of([node], {"x": [2, 3, 5, 6]}, ["y"], {"i": indices})
    agrees(model, {"x": rng.standard_normal([2, 3, 5, 6]).astype(np.float32)})


def test_a_normalisation_over_a_whole_feature_map_keeps_float64s_accuracy():
    """GroupNorm(1, C) as exported: InstanceNormalization of [N, 1, C·H·W], 200k elements of mean
    2 and deviation 0.5 (float sums lost 1.2e-4 of the normalised values; ONNX Runtime 6e-6)."""
    rng = np.random.default_rng(45)
    n = 256 * 28 * 28
    node = helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-5)
    model = model_of([node], {"x": [1, 1, n]}, ["y"], {"s": np.ones(1, np.float32), "b": np.zeros(1, np.float32)})
    x = (2.0 + 0.5 * rng.standard_normal([1, 1, n])).astype(np.float32)
    got = Backend.prepare(model).run([x])[0]
    x64 = x.astype(np.float64)
    exact = (x64 - x64.mean()) / np.sqrt(x64.var() + 1e-5)
    assert np.abs(got - exact).max() < 2e-5


@pytest.mark.parametrize("opset", [13, 18])
def test_convnext_v2s_response_normalisation_on_a_channels_last_view(opset):
    """GRN as ConvNeXt V2 exports it: the L2 norm over H and W of a channels-last view, its mean
    over the channels, x · (norm / mean) · gamma + beta + x, back to channels first: reductions of
    the tensor itself (the axes mapped), no row-major copy."""
    rng = np.random.default_rng(46)
    c = 8
    axes_hw = [helper.make_node("ReduceL2", ["g", "hw"] if opset >= 18 else ["g"], ["n"], keepdims=1,
                                **({} if opset >= 18 else {"axes": [1, 2]}))]
    mean = [helper.make_node("ReduceMean", ["n", "last"] if opset >= 18 else ["n"], ["m"], keepdims=1,
                             **({} if opset >= 18 else {"axes": [-1]}))]
    nodes = [helper.make_node("Transpose", ["x"], ["g"], perm=[0, 2, 3, 1])] + axes_hw + mean + [
        helper.make_node("Add", ["m", "eps"], ["me"]),
        helper.make_node("Div", ["n", "me"], ["r"]),
        helper.make_node("Mul", ["g", "r"], ["gr"]),
        helper.make_node("Mul", ["gamma", "gr"], ["s"]),
        helper.make_node("Add", ["s", "beta"], ["sb"]),
        helper.make_node("Add", ["sb", "g"], ["o"]),
        helper.make_node("Transpose", ["o"], ["y"], perm=[0, 3, 1, 2])]
    inits = {"eps": np.array(1e-6, np.float32), "gamma": rng.standard_normal([1, 1, 1, c]).astype(np.float32),
             "beta": rng.standard_normal([1, 1, 1, c]).astype(np.float32)}
    if opset >= 18:
        inits.update(hw=np.array([1, 2], np.int64), last=np.array([-1], np.int64))
    model = model_of(nodes, {"x": [2, c, 6, 5]}, ["y"], inits, opset=opset)
    agrees(model, {"x": rng.standard_normal([2, c, 6, 5]).astype(np.float32)})


def test_a_float64_part_computes_in_float32():
    # Deformable DETR casts its sampling offsets to float64 and back: computed in float32 here.
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Cast", ["r"], ["d"], to=TensorProto.DOUBLE),
             helper.make_node("Mul", ["d", "half"], ["m"]), helper.make_node("Cast", ["m"], ["y"], to=TensorProto.FLOAT)]
    model = model_of(nodes, {"x": [2, 5]}, initializers={"half": np.array(0.5, np.float64)})
    agrees(model, {"x": np.random.default_rng(0).standard_normal((2, 5)).astype(np.float32)}, rtol=1e-6, atol=0)


@pytest.mark.parametrize("box", [(slice(None), slice(None), slice(0, 2)), (slice(None), slice(3, 7), slice(None)),
                                 (slice(None), slice(None), slice(None))])
def test_scatter_nd_slice_assignment(box):
    # boxes[..., :2] = ... (Deformable DETR), a middle slice, the whole tensor (MViTv2).
    shape = (1, 10, 4)
    grid = np.stack(np.meshgrid(*[np.arange(n) for n in shape], indexing="ij"), -1)
    indices = grid[box].astype(np.int64)
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["u"], ["n"]),
             helper.make_node("ScatterND", ["r", "i", "n"], ["y"])]
    model = model_of(nodes, {"x": list(shape), "u": list(indices.shape[:-1])}, initializers={"i": indices})
    rng = np.random.default_rng(1)
    agrees(model, {"x": rng.standard_normal(shape).astype(np.float32),
                   "u": rng.standard_normal(indices.shape[:-1]).astype(np.float32)}, rtol=0, atol=0)


@pytest.mark.parametrize("op", ["AveragePool", "MaxPool"])
def test_a_pool_window_larger_than_its_input_is_the_global_pool(op):
    # Hugging Face EfficientNet's pooler: AvgPool2d(2560, ceil_mode=True) on a 7x7 map.
    attrs = dict(kernel_shape=[64, 64], strides=[64, 64], ceil_mode=1)
    if op == "AveragePool":
        attrs["count_include_pad"] = 1
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node(op, ["r"], ["y"], **attrs)]
    model = model_of(nodes, {"x": [1, 8, 7, 7]})
    agrees(model, {"x": np.random.default_rng(2).standard_normal((1, 8, 7, 7)).astype(np.float32)}, rtol=1e-5)


def test_focalnets_global_context_broadcast_both_ways():
    """FocalNet's modulation: the global context (the mean over H then W of a channels-last
    projection, through an activation: GELU in the model, Erf here; [N, C, 1, 1]) times a gate
    ([N, 1, H, W]) — a product broadcast in both operands, whose context is expanded to
    [N, C, H, W] from a row-major reduction."""
    rng = np.random.default_rng(47)
    c, h, w = 6, 5, 7
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
             helper.make_node("Split", ["t", "parts"], ["ctx", "gate"], axis=1),
             helper.make_node("ReduceMean", ["ctx"], ["m2"], axes=[2], keepdims=1),
             helper.make_node("ReduceMean", ["m2"], ["m3"], axes=[3], keepdims=1),
             helper.make_node("Erf", ["m3"], ["g"]),
             helper.make_node("Mul", ["g", "gate"], ["y"])]
    model = model_of(nodes, {"x": [2, h, w, c + 1]}, ["y"], {"parts": np.array([c, 1], np.int64)}, opset=17)
    (y,) = agrees(model, {"x": rng.standard_normal([2, h, w, c + 1]).astype(np.float32)})
    assert y.shape == (2, c, h, w)


@pytest.mark.parametrize("order", ["tcTc", "ctcT", "tTcc"])
def test_concat_of_tensors_with_constants_between_them(order):
    """DINOv2 with registers: [class token, register tokens (a constant), patches] joined along
    the tokens; any order of tensors (t, T) and constants (c) along any axis."""
    rng = np.random.default_rng(48)
    shapes = {"t": [2, 1, 6], "T": [2, 5, 6], "c": [2, 3, 6]}
    names, inits, inputs = [], {}, {}
    for k, ch in enumerate(order):
        name = f"{ch}{k}"
        names.append(name)
        if ch == "c":
            inits[name] = rng.standard_normal(shapes["c"]).astype(np.float32)
        else:
            inputs[name] = shapes[ch]
    nodes = [helper.make_node("Relu", [n], [n + "r"]) for n in inputs]
    parts = [n + "r" if n in inputs else n for n in names]
    nodes.append(helper.make_node("Concat", parts, ["y"], axis=1))
    model = model_of(nodes, inputs, ["y"], inits, opset=17)
    (y,) = agrees(model, {n: rng.standard_normal(s).astype(np.float32) for n, s in inputs.items()}, exact=True)
    assert y.shape[1] == sum(shapes[ch][1] for ch in order)


@pytest.mark.parametrize("layout", [None, "nChw8c", "nchw"])
def test_nearest_upsampling_copies_infinities(layout):
    """A nearest x2 upsample (YOLO's neck, as PyTorch exports it) copies its input, infinities
    included (a lerp of weight 0 made inf - inf = NaN), in the default, a blocked and the plain
    layout."""
    rng = np.random.default_rng(49)
    x = rng.standard_normal([1, 12, 5, 6]).astype(np.float32)
    x[0, 3, 2, 1], x[0, 10, 4, 5] = np.inf, -np.inf
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Resize", ["r", "", "scales"], ["y"], mode="nearest",
                              coordinate_transformation_mode="asymmetric", nearest_mode="floor")]
    model = model_of(nodes, {"x": [1, 12, 5, 6]}, ["y"], {"scales": np.array([1, 1, 2, 2], np.float32)})
    (y,) = Backend.prepare(model, **({"layout": layout} if layout else {})).run([x])
    np.testing.assert_array_equal(y, np.maximum(x, 0).repeat(2, axis=2).repeat(2, axis=3))
    assert np.isposinf(y[0, 3, 4:6, 2:4]).all()


@pytest.mark.parametrize("reps,broadcast", [([1, 300, 1], True), ([1, 300, 1], False), ([1, 1, 7], False)])
def test_tile_of_a_global_query(reps, broadcast):
    """SwiftFormer: a global query [1, 1, C] tiled over the tokens and multiplied by them: its
    reader broadcasts, so no copies are made (there were 3136 copy kernels); a Tile whose reader
    does not broadcast repeats it by doubling (about 2 log2(repeats) copies), a few repeats (of an
    axis longer than 1) in one join."""
    rng = np.random.default_rng(50)
    c = 6
    nodes = [helper.make_node("ReduceMean", ["x"], ["q"], axes=[1], keepdims=1),
             helper.make_node("Tile", ["q", "reps"], ["t"])]
    nodes.append(helper.make_node("Mul", ["t", "x"], ["y"]) if broadcast else helper.make_node("Relu", ["t"], ["y"]))
    model = model_of(nodes, {"x": [1, 300, c]}, ["y"], {"reps": np.array(reps, np.int64)}, opset=17)
    x = rng.standard_normal([1, 300, c]).astype(np.float32)
    (y,) = agrees(model, {"x": x})
    assert y.shape == (1, 300 if reps[1] > 1 else 1, c * reps[2])
    plan = Backend.prepare(model).session.plan
    kernels = int(plan.split(" kernels")[0].split()[-1])
    assert kernels <= 30, plan  # a copy per repeat would be over 300


def test_layers_sharing_their_weights_compute_once():
    """Ultralytics' RT-DETR decoder: layers deep-copied from one keep equal weights while untrained,
    and the exporter writes one initializer read through Identity nodes: six equal projections of
    one input. They agree with ONNX Runtime and run as one kernel (ONNX Runtime computes them once
    too); a projection of other weights stays its own."""
    rng = np.random.default_rng(51)
    w = rng.standard_normal([8, 8]).astype(np.float32)
    nodes = [helper.make_node("Identity", ["w"], [f"w{k}"]) for k in range(3)]
    nodes += [helper.make_node("MatMul", ["x", f"w{k}"], [f"p{k}"]) for k in range(3)]
    nodes += [helper.make_node("MatMul", ["x", "other"], ["q"]),
              helper.make_node("Sum", ["p0", "p1", "p2", "q"], ["y"])]
    model = model_of(nodes, {"x": [1, 50, 8]}, ["y"], {"w": w, "other": w + 1}, opset=17)
    agrees(model, {"x": rng.standard_normal([1, 50, 8]).astype(np.float32)})
    plan = Backend.prepare(model).session.plan
    distinct = Backend.prepare(model_of([helper.make_node("MatMul", ["x", "w"], ["p"]),
                                         helper.make_node("MatMul", ["x", "other"], ["q"]),
                                         helper.make_node("Sum", ["p", "p", "p", "q"], ["y"])],
                                        {"x": [1, 50, 8]}, ["y"], {"w": w, "other": w + 1}, opset=17)).session.plan
    assert plan.split(" kernels")[0] == distinct.split(" kernels")[0], (plan, distinct)
