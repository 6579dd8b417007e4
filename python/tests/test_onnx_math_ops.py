"""ONNX ops beyond the vision exports, through stagecraft against ONNX's reference evaluator and
ONNX Runtime on random data: DFT (forward, inverse, one-sided both ways, any signal axis, a
dft_length that pads or truncates; opsets 17 and 20) and BatchNormalization in training mode
(batch statistics, the running mean and variance as outputs); reductions over an axis of one element;
SpaceToDepth-28 in both modes; Det of batches of small matrices."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed (scripts/test.sh installs it)")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (scripts/test.sh installs it)")
from onnx import helper  # noqa: E402
from onnx_cases import agrees, model_of  # noqa: E402

import stagecraft  # noqa: E402
from stagecraft.onnx_backend import Backend  # noqa: E402


@pytest.mark.parametrize("shape,axis,inverse,onesided,length,opset", [
    ([2, 12, 3, 1], 1, 0, 0, None, 17),    # real, forward
    ([2, 5, 8, 2], 2, 0, 0, None, 17),     # complex, another axis
    ([1, 10, 4, 2], 1, 1, 0, None, 17),    # inverse
    ([1, 10, 4, 1], 1, 0, 1, None, 17),    # rfft
    ([1, 6, 4, 2], 1, 1, 1, None, 17),     # irfft (even length 10)
    ([1, 6, 4, 2], 1, 1, 1, 9, 17),        # irfft of odd length
    ([2, 7, 3, 1], 1, 0, 0, 10, 20),       # zero-padded, opset 20 (axis an input)
    ([2, 3, 9, 2], -2, 0, 0, 6, 20),       # truncated, the default axis
])
def test_dft_follows_onnxs_reference(shape, axis, inverse, onesided, length, opset):
    rng = np.random.default_rng(51)
    inputs = ["x", "n" if length else ""]
    inits = {"n": np.array(length, np.int64)} if length else {}
    attrs = {"inverse": inverse, "onesided": onesided}
    if opset >= 20:
        inputs.append("axis")
        inits["axis"] = np.array(axis, np.int64)
    else:
        attrs["axis"] = axis
    while inputs[-1] == "":
        inputs.pop()
    model = model_of([helper.make_node("DFT", inputs, ["y"], **attrs)], {"x": shape}, ["y"], inits, opset=opset)
    agrees(model, {"x": rng.standard_normal(shape).astype(np.float32)}, reference=True, atol=1e-4)


@pytest.mark.parametrize("momentum,shape", [(0.8, [4, 3, 5, 6]), (0.9, [4, 3, 7])])
def test_batch_normalization_in_training_mode_agrees_with_onnx_runtime(momentum, shape):
    rng = np.random.default_rng(52)
    outputs = ["y", "running_mean", "running_var"]
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "mean", "var"], outputs, training_mode=1,
                            momentum=momentum, epsilon=1e-3)
    inits = {"s": rng.uniform(0.5, 1.5, 3).astype(np.float32), "b": rng.standard_normal(3).astype(np.float32),
             "mean": rng.standard_normal(3).astype(np.float32), "var": rng.uniform(0.5, 2, 3).astype(np.float32)}
    model = model_of([node], {"x": shape}, outputs, inits, opset=15)
    agrees(model, {"x": (rng.standard_normal(shape) * 2 + 1).astype(np.float32)})


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin", "ReduceMean", "ReduceSum"])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduction_over_an_axis_of_one_element(op, keepdims):
    # The class score of a one-class (pose) YOLO head: oneDNN refuses a reduction that reduces
    # nothing; it runs as a copy.
    m = model_of([helper.make_node("Relu", ["x"], ["r"]), helper.make_node(op, ["r", "ax"], ["y"], keepdims=keepdims)],
                 {"x": [1, 50, 1]}, initializers={"ax": np.array([-1], np.int64)}, opset=18)
    agrees(m, {"x": np.random.default_rng(0).standard_normal((1, 50, 1)).astype(np.float32)}, rtol=0, atol=0)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_space_to_depth_in_both_modes_agrees_with_the_reference(mode):
    """DCR on the convolutions' op, CRD (output channel c · b² + row · b + column) as a reshape, a
    transpose and a reshape; a convolution reads either result. A block that does not divide H and
    W is refused in one line."""
    import stagecraft
    from stagecraft.onnx_backend import Backend
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 6, 8)).astype(np.float32)
    w = rng.standard_normal((5, 12, 1, 1)).astype(np.float32)
    nodes = [helper.make_node("SpaceToDepth", ["x"], ["s"], blocksize=2, mode=mode),
             helper.make_node("Conv", ["s", "w"], ["y"])]
    agrees(model_of(nodes, {"x": list(x.shape)}, initializers={"w": w}, opset=28), {"x": x}, reference=True)
    bad = model_of([helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=4, mode=mode)], {"x": list(x.shape)},
                   opset=28)
    with pytest.raises(stagecraft.Error) as info:
        Backend.prepare(bad)
    assert "\n" not in str(info.value).strip()


@pytest.mark.parametrize("shape", [[5, 1, 1], [3, 2, 2], [2, 4, 3, 3], [6, 4, 4]])
def test_det_of_small_matrices_agrees_with_onnx_runtime(shape):
    """Det of a batch of matrices up to 4 x 4 (Leibniz's formula), a singular one included."""
    rng = np.random.default_rng(90)
    x = rng.standard_normal(shape).astype(np.float32)
    x.reshape(-1, shape[-1], shape[-1])[0, -1] = x.reshape(-1, shape[-1], shape[-1])[0, 0]  # rows equal: det 0
    model = model_of([helper.make_node("Det", ["x"], ["y"])], {"x": shape}, ["y"], opset=22)
    (y,) = agrees(model, {"x": x}, rtol=1e-4, atol=1e-5)
    assert y.shape == tuple(shape[:-2])


def test_det_of_a_large_matrix_is_refused_in_one_line():
    model = model_of([helper.make_node("Det", ["x"], ["y"])], {"x": [2, 5, 5]}, ["y"], opset=22)
    with pytest.raises(stagecraft.Error, match=r"\(Det\): matrices of 5 x 5 are not supported \(1 to 4\)"):
        Backend.prepare(model)
