"""DeformConv (opset 19; the deformable convolutions of DCN detectors) through stagecraft against
ONNX Runtime on random data: offsets that move taps between pixels and out of the image, masks,
bias, groups, offset groups, strides, dilations and padding, and the DCN block as detectors write
it (offsets and mask computed from the input by a convolution). Bad shapes are refused in one
line naming the node."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed (scripts/test.sh installs it)")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (scripts/test.sh installs it)")
from onnx import helper  # noqa: E402
from onnx_cases import agrees, model_of  # noqa: E402

import stagecraft  # noqa: E402
from stagecraft.onnx_backend import Backend  # noqa: E402


def out_size(size, k, stride, pad0, pad1, dilation):
    return (size + pad0 + pad1 - dilation * (k - 1) - 1) // stride + 1


@pytest.mark.parametrize("n,c,m,hw,k,stride,pads,dilation,group,offset_group,mask,bias", [
    (1, 4, 6, [7, 9], [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1, 1, False, False),
    (2, 4, 6, [8, 7], [3, 3], [2, 1], [1, 0, 2, 1], [1, 1], 2, 1, True, True),
    (1, 6, 4, [9, 9], [3, 2], [1, 2], [2, 1, 2, 1], [2, 1], 1, 3, True, False),
    (1, 8, 8, [6, 5], [1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 4, 2, False, True),
    (1, 2, 3, [1, 6], [1, 3], [1, 1], [0, 1, 0, 1], [1, 1], 1, 2, True, True),  # one row: the sampling of H = 1
])
def test_deform_conv_agrees_with_onnx_runtime(n, c, m, hw, k, stride, pads, dilation, group, offset_group, mask, bias):
    rng = np.random.default_rng(60)
    oh = out_size(hw[0], k[0], stride[0], pads[0], pads[2], dilation[0])
    ow = out_size(hw[1], k[1], stride[1], pads[1], pads[3], dilation[1])
    taps = k[0] * k[1]
    # Offsets of up to 3 pixels: taps fall between pixels and past the image's edges.
    feeds = {"x": rng.standard_normal([n, c, *hw]).astype(np.float32),
             "offset": (3 * rng.standard_normal([n, 2 * offset_group * taps, oh, ow])).astype(np.float32)}
    inits = {"w": rng.standard_normal([m, c // group, *k]).astype(np.float32)}
    names = ["x", "w", "offset", "b" if bias else "", "mask" if mask else ""]
    if bias:
        inits["b"] = rng.standard_normal([m]).astype(np.float32)
    if mask:
        feeds["mask"] = rng.random([n, offset_group * taps, oh, ow]).astype(np.float32)
    while names[-1] == "":
        names.pop()
    node = helper.make_node("DeformConv", names, ["y"], kernel_shape=k, strides=stride, pads=pads,
                            dilations=dilation, group=group, offset_group=offset_group)
    model = model_of([node], {name: list(a.shape) for name, a in feeds.items()}, ["y"], inits, opset=19)
    (y,) = agrees(model, feeds, rtol=1e-4, atol=1e-4)
    assert y.shape == (n, m, oh, ow)


def test_a_dcn_block_as_detectors_write_it():
    """DCNv2: a 3x3 convolution of the input gives the offsets and (through a sigmoid) the mask of
    the deformable convolution that follows, then a ReLU."""
    rng = np.random.default_rng(61)
    c, m = 8, 16
    inits = {"w_off": (0.3 * rng.standard_normal([27, c, 3, 3])).astype(np.float32),
             "w": rng.standard_normal([m, c, 3, 3]).astype(np.float32), "b": rng.standard_normal([m]).astype(np.float32),
             "at0": np.array([0], np.int64), "at18": np.array([18], np.int64), "at27": np.array([27], np.int64),
             "axis1": np.array([1], np.int64)}
    nodes = [helper.make_node("Conv", ["x", "w_off"], ["om"], pads=[1, 1, 1, 1]),
             helper.make_node("Slice", ["om", "at0", "at18", "axis1"], ["offset"]),
             helper.make_node("Slice", ["om", "at18", "at27", "axis1"], ["logits"]),
             helper.make_node("Sigmoid", ["logits"], ["mask"]),
             helper.make_node("DeformConv", ["x", "w", "offset", "b", "mask"], ["d"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["d"], ["y"])]
    model = model_of(nodes, {"x": [1, c, 20, 24]}, ["y"], inits, opset=19)
    (y,) = agrees(model, {"x": rng.standard_normal([1, c, 20, 24]).astype(np.float32)}, rtol=1e-4, atol=1e-4)
    assert y.shape == (1, m, 20, 24) and (y > 0).any()


def test_an_offset_of_the_wrong_shape_is_one_line():
    node = helper.make_node("DeformConv", ["x", "w", "offset"], ["y"], kernel_shape=[3, 3])
    model = model_of([node], {"x": [1, 2, 6, 6], "offset": [1, 18, 6, 6]}, ["y"],
                     {"w": np.ones([2, 2, 3, 3], np.float32)}, opset=19)
    with pytest.raises(stagecraft.Error) as e:
        Backend.prepare(model)
    text = str(e.value)
    assert "DeformConv" in text and "1x18x4x4" in text and "\n" not in text, text


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_taps_outside_the_image_read_nothing_even_beside_an_infinity(mode):
    """The sampling under DeformConv: a tap outside the image reads 0 (padding zeros), whatever
    the image holds (an infinity in its first element gives no NaN elsewhere); points inside,
    between pixels, agree with ONNX Runtime."""
    rng = np.random.default_rng(62)
    x = rng.standard_normal([1, 3, 6, 7]).astype(np.float32)
    x[0, :, 0, 0] = np.inf
    grid = rng.uniform(-3, 3, [1, 40, 9, 2]).astype(np.float32)
    grid[0, 0, :, :] = [0.1, -0.2]  # a row of points inside, away from the infinity
    node = helper.make_node("GridSample", ["x", "g"], ["y"], mode=mode, padding_mode="zeros", align_corners=0)
    model = model_of([node], {"x": [1, 3, 6, 7], "g": [1, 40, 9, 2]}, ["y"], opset=16)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x, "g": grid})[0]
    (got,) = Backend.prepare(model).run([x, grid])
    outside = (np.abs(grid[0]) > 1.2).any(axis=-1)
    assert outside.sum() > 100 and (got[:, :, outside] == 0).all()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)  # NaN where ONNX Runtime has NaN, inf where inf
