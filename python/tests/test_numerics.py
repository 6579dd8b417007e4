"""Numerics of the Winograd kernels on a deep network: rounding adds up layer after layer, so the
tile chosen by default must keep a deep stack of 3x3 convolutions as close to the exact (float64)
result as a plain fp32 engine (ONNX Runtime: direct/GEMM convolutions) and our own direct kernels.

The CLI runs with oneDNN capped at AVX2 (DNNL_MAX_CPU_ISA), where the Winograd kernels replace
oneDNN's direct ones on every CPU with AVX2 and FMA; the plan listing proves that they ran.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from conftest import run_cli

onnx = pytest.importorskip("onnx", reason="the deep-network numerics test builds an ONNX model")
ort = pytest.importorskip("onnxruntime", reason="the deep-network numerics test compares with ONNX Runtime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

CHANNELS, SIZE, BLOCKS = 64, 14, 24  # 48 convolutions on the longest path: a ResNet-101's depth


def deep_residual_model(rng):
    """BLOCKS residual blocks x + conv(relu(conv(x))) of 3x3 convolutions, He-scaled weights:
    the graph (ONNX) and the same network in float64 (numpy)."""
    nodes, inits, weights = [], [], []
    x = "x"
    for b in range(BLOCKS):
        pair = []
        for k, gain in ((0, 2.0), (1, 0.5)):
            w = (rng.standard_normal((CHANNELS, CHANNELS, 3, 3)) * np.sqrt(gain / (9 * CHANNELS))).astype(np.float32)
            bias = (0.1 * rng.standard_normal(CHANNELS)).astype(np.float32)
            inits += [numpy_helper.from_array(w, f"w{b}_{k}"), numpy_helper.from_array(bias, f"b{b}_{k}")]
            pair.append((w.astype(np.float64), bias.astype(np.float64)))
        weights.append(pair)
        nodes += [helper.make_node("Conv", [x, f"w{b}_0", f"b{b}_0"], [f"c{b}_0"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{b}_0"], [f"r{b}"]),
                  helper.make_node("Conv", [f"r{b}", f"w{b}_1", f"b{b}_1"], [f"c{b}_1"], pads=[1, 1, 1, 1]),
                  helper.make_node("Add", [x, f"c{b}_1"], [f"x{b}"])]
        x = f"x{b}"
    shape = [1, CHANNELS, SIZE, SIZE]
    graph = helper.make_graph(nodes, "deep_residual", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8

    def conv64(v, w, bias):  # 3x3, padding 1, stride 1, in float64
        p = np.pad(v, ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros((v.shape[0], w.shape[0]) + v.shape[2:])
        for i in range(3):
            for j in range(3):
                out += np.einsum("oc,nchw->nohw", w[:, :, i, j], p[:, :, i:i + SIZE, j:j + SIZE])
        return out + bias[None, :, None, None]

    def exact(v):
        v = v.astype(np.float64)
        for (w0, b0), (w1, b1) in weights:
            v = v + conv64(np.maximum(conv64(v, w0, b0), 0.0), w1, b1)
        return v

    return model, exact


def test_default_winograd_tiles_keep_a_deep_network_within_fp32_error(tmp_path, cli):
    if "avx2" not in open("/proc/cpuinfo").read() or "fma" not in open("/proc/cpuinfo").read():
        pytest.skip("the Winograd kernels need x86 AVX2 and FMA; this CPU has neither")
    rng = np.random.default_rng(5)
    model, exact = deep_residual_model(rng)
    path = tmp_path / "deep.onnx"
    onnx.save(model, str(path))
    x = rng.standard_normal((1, CHANNELS, SIZE, SIZE)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    want = exact(x)
    scale = np.abs(want).max()

    def error(got):
        return float(np.abs(got.reshape(want.shape) - want).max() / scale)

    ort_error = error(ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0])
    env = dict(os.environ, DNNL_MAX_CPU_ISA="AVX2", ONEDNN_MAX_CPU_ISA="AVX2")
    errors, listings = {}, {}
    for name, flags in (("default", []), ("direct", ["--no-winograd"]), ("fast", ["--fast-winograd"])):
        out, listing = tmp_path / f"{name}.npy", tmp_path / f"{name}.txt"
        run_cli(cli, "run", str(path), "--schedule", "sequential", "--layout", "nChw8c", "--input",
                str(tmp_path / "x.npy"), "--output", str(out), "--plan-listing", str(listing),
                "--warmup", "0", "--iters", "1", "--winograd-rule", *flags, env=env)
        errors[name], listings[name] = error(np.load(out)), listing.read_text()
    # The default ran every convolution on F(2x2,3x3) Winograd kernels, the direct run none (by
    # the FMA-width rule: ours against oneDNN's AVX2 kernels; measured choices may differ).
    assert listings["default"].count("winograd F(2x2,3x3)") == 2 * BLOCKS, listings["default"]
    assert "winograd" not in listings["direct"]
    assert listings["fast"].count("winograd F(4x4,3x3)") == 2 * BLOCKS, listings["fast"]
    print(f"float64 error: ONNX Runtime {ort_error:.2e}, ours {errors}")
    fp32 = max(ort_error, errors["direct"])  # what plain fp32 convolutions reach on this network
    assert fp32 < 1e-5, (ort_error, errors)  # the network is well conditioned: rounding is small
    assert errors["default"] <= 2.0 * fp32, (ort_error, errors)
    # The larger tiles round more: the check above tells them apart (why they are not the default).
    assert errors["fast"] > errors["default"], (ort_error, errors)
