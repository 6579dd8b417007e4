"""3-D convolutions (video and volume models: R3D, X3D, 3-D U-Nets) through stagecraft against
ONNX Runtime on random data: Conv and ConvTranspose of a 5-D input with per-axis kernels,
strides, dilations, pads, output padding, groups and bias, and a small encoder-decoder of them;
the 2-D ConvTranspose that is a block upsampling."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed (scripts/test.sh installs it)")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (scripts/test.sh installs it)")
from onnx import helper  # noqa: E402
from onnx_cases import agrees, model_of  # noqa: E402


@pytest.mark.parametrize("x,m,k,attrs,bias", [
    ([1, 3, 6, 7, 8], 4, [3, 3, 3], dict(pads=[1, 1, 1, 1, 1, 1]), True),
    ([2, 4, 7, 6, 5], 6, [3, 1, 2], dict(strides=[2, 1, 2], pads=[1, 0, 0, 2, 0, 1]), False),
    ([1, 4, 9, 5, 5], 4, [2, 3, 3], dict(dilations=[3, 1, 2], pads=[0, 1, 2, 1, 1, 2], group=2), True),
    ([1, 6, 5, 4, 4], 6, [1, 3, 3], dict(group=6, pads=[0, 1, 1, 0, 1, 1]), False),  # depthwise, (2+1)-D style
    ([1, 2, 4, 5, 6], 3, [3, 1, 1], dict(strides=[3, 1, 1], pads=[2, 0, 0, 2, 0, 0]), True),  # temporal only
])
def test_conv_3d_agrees_with_onnx_runtime(x, m, k, attrs, bias):
    rng = np.random.default_rng(70)
    group = attrs.get("group", 1)
    inits = {"w": rng.standard_normal([m, x[1] // group, *k]).astype(np.float32)}
    if bias:
        inits["b"] = rng.standard_normal([m]).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w", "b"] if bias else ["x", "w"], ["y"], **attrs)
    agrees(model_of([node], {"x": x}, ["y"], inits), {"x": rng.standard_normal(x).astype(np.float32)}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("x,m,k,attrs,bias", [
    ([1, 1, 3, 4, 5], 2, [3, 3, 3], {}, False),  # ONNX's own test_convtranspose_3d shape
    ([1, 4, 3, 4, 4], 3, [2, 2, 2], dict(strides=[2, 2, 2]), True),  # a 3-D U-Net's up-sampling
    ([2, 4, 4, 3, 5], 4, [3, 2, 3], dict(strides=[2, 1, 3], pads=[1, 0, 2, 2, 1, 0], output_padding=[1, 0, 2]), True),
    ([1, 4, 3, 3, 3], 6, [3, 3, 2], dict(dilations=[2, 1, 2], group=2, pads=[3, 1, 0, 1, 0, 1]), False),
])
def test_conv_transpose_3d_agrees_with_onnx_runtime(x, m, k, attrs, bias):
    rng = np.random.default_rng(71)
    group = attrs.get("group", 1)
    inits = {"w": rng.standard_normal([x[1], m // group, *k]).astype(np.float32)}
    if bias:
        inits["b"] = rng.standard_normal([m]).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"] if bias else ["x", "w"], ["y"], **attrs)
    agrees(model_of([node], {"x": x}, ["y"], inits), {"x": rng.standard_normal(x).astype(np.float32)}, rtol=1e-4, atol=1e-4)


def test_a_3d_encoder_decoder():
    """Conv3d -> ReLU -> MaxPool3d -> Conv3d -> ConvTranspose3d (stride 2) + the skip, as a 3-D
    U-Net's level."""
    rng = np.random.default_rng(72)
    inits = {"w1": (0.3 * rng.standard_normal([8, 2, 3, 3, 3])).astype(np.float32),
             "w2": (0.2 * rng.standard_normal([8, 8, 3, 3, 3])).astype(np.float32),
             "wt": (0.2 * rng.standard_normal([8, 8, 2, 2, 2])).astype(np.float32),
             "bt": rng.standard_normal([8]).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1] * 6),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p"], kernel_shape=[2, 2, 2], strides=[2, 2, 2]),
             helper.make_node("Conv", ["p", "w2"], ["c2"], pads=[1] * 6),
             helper.make_node("ConvTranspose", ["c2", "wt", "bt"], ["u"], strides=[2, 2, 2]),
             helper.make_node("Add", ["u", "r1"], ["y"])]
    agrees(model_of(nodes, {"x": [1, 2, 8, 10, 12]}, ["y"], inits),
           {"x": rng.standard_normal([1, 2, 8, 10, 12]).astype(np.float32)}, rtol=1e-4, atol=1e-4)


def test_a_video_classifier_head_of_depth_one():
    """R3D-18's last block: a 3-D convolution whose output has one depth (a view of the 2-D
    convolutions' tensor), a ReLU, a second 3-D convolution, then the global pool over depth, height
    and width and a linear layer (torchvision's r3d_18 agrees with ONNX Runtime to 6.5e-7)."""
    rng = np.random.default_rng(73)
    inits = {"w1": (0.3 * rng.standard_normal([16, 8, 3, 3, 3])).astype(np.float32),
             "w2": (0.2 * rng.standard_normal([16, 16, 3, 3, 3])).astype(np.float32),
             "fc": rng.standard_normal([16, 5]).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], strides=[2, 2, 2], pads=[1] * 6),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1] * 6),
             helper.make_node("GlobalAveragePool", ["c2"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("MatMul", ["f", "fc"], ["y"])]
    agrees(model_of(nodes, {"x": [1, 8, 2, 7, 7]}, ["y"], inits),
           {"x": rng.standard_normal([1, 8, 2, 7, 7]).astype(np.float32)}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("x,m,k,bias,extra", [
    ([1, 8, 10, 12], 6, 2, True, {}),       # YOLO's prototype upsampling: a 1x1 Conv, then DepthToSpace
    ([2, 4, 5, 7], 3, 3, False, {}),
    ([1, 4, 6, 6], 4, 2, True, {"pads": [1, 1, 1, 1]}),        # padded: oneDNN's deconvolution
    ([1, 4, 6, 6], 4, 2, False, {"output_padding": [1, 1]}),
    ([1, 4, 6, 6], 4, 2, False, {"strides": [1, 1]}),          # overlapping blocks
])
def test_block_upsampling_conv_transpose_agrees_with_onnx_runtime(x, m, k, bias, extra):
    """A 2-D ConvTranspose whose stride equals its square kernel, unpadded, runs as a 1x1 Conv to
    M · k · k channels and DepthToSpace; the others stay transposed convolutions."""
    rng = np.random.default_rng(74)
    inits = {"w": rng.standard_normal([x[1], m, k, k]).astype(np.float32)}
    if bias:
        inits["b"] = rng.standard_normal([m]).astype(np.float32)
    attrs = {"strides": [k, k], **extra}
    node = helper.make_node("ConvTranspose", ["x", "w", "b"] if bias else ["x", "w"], ["y"], kernel_shape=[k, k], **attrs)
    agrees(model_of([node], {"x": x}, ["y"], inits), {"x": rng.standard_normal(x).astype(np.float32)}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op,x,attrs", [
    ("MaxPool", [1, 4, 6, 9, 8], dict(kernel_shape=[3, 3, 3], strides=[1, 1, 1], pads=[1, 1, 1, 1, 1, 1])),  # S3D
    ("MaxPool", [2, 3, 7, 8, 9], dict(kernel_shape=[2, 3, 2], strides=[2, 2, 1], pads=[0, 1, 1, 1, 0, 0], ceil_mode=1)),
    ("AveragePool", [1, 3, 5, 6, 7], dict(kernel_shape=[3, 2, 3], strides=[2, 1, 2], pads=[1, 0, 1, 1, 1, 0])),
    ("AveragePool", [1, 3, 5, 6, 7], dict(kernel_shape=[3, 2, 3], strides=[2, 1, 2], pads=[1, 0, 1, 1, 1, 0],
                                          count_include_pad=1, ceil_mode=1)),
    ("MaxPool", [1, 2, 7, 6, 5], dict(kernel_shape=[2, 2, 2], dilations=[2, 1, 1])),  # dilated: the N-D host pool
])
def test_3d_pools_agree_with_onnx_runtime(op, x, attrs):
    """A 3-D pool without dilations is a 2-D pool of every depth slice, then one along the depth
    (max of maxima, mean of means with the padding rule per axis); a dilated one stays N-D."""
    rng = np.random.default_rng(75)
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    agrees(model_of([node], {"x": x}, ["y"]), {"x": rng.standard_normal(x).astype(np.float32)}, rtol=1e-5, atol=1e-6)
