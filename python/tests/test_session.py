"""Session: model info, the forms run() takes, schedules and dtypes giving the same outputs."""

from __future__ import annotations

import numpy as np
import pytest

import stagecraft
from conftest import random_input, relative_error


def test_inputs_and_outputs_describe_the_graph(squeezenet_session):
    (x,) = squeezenet_session.inputs
    assert x.shape == (1, 3, 64, 64)
    assert x.dtype == "float32"
    assert x.graph_dtype == "f32"
    (y,) = squeezenet_session.outputs
    assert y.shape == (1, 1000)
    assert y.name != x.name
    assert squeezenet_session.backend == "cpu"
    assert squeezenet_session.plan.startswith("plan: ")


def test_run_takes_an_array_a_list_or_a_dict(squeezenet_session):
    x = random_input((1, 3, 64, 64))
    name = squeezenet_session.inputs[0].name
    (a,) = squeezenet_session.run(x)
    (b,) = squeezenet_session.run([x])
    (c,) = squeezenet_session.run({name: x})
    assert isinstance(a, np.ndarray) and a.dtype == np.float32 and a.shape == (1, 1000)
    assert np.array_equal(a, b) and np.array_equal(a, c)
    assert np.any(a != 0)
    # A different input gives a different output (the input is really used).
    (d,) = squeezenet_session.run(random_input((1, 3, 64, 64), seed=1))
    assert not np.array_equal(a, d)


def test_non_contiguous_input_is_read_in_logical_order(squeezenet_session):
    x = random_input((1, 64, 64, 3)).transpose(0, 3, 1, 2)  # a strided view
    assert not x.flags["C_CONTIGUOUS"]
    (a,) = squeezenet_session.run(x)
    (b,) = squeezenet_session.run(np.ascontiguousarray(x))
    assert np.array_equal(a, b)


def test_every_schedule_gives_the_sequential_result(squeezenet):
    x = random_input((1, 3, 64, 64), seed=3)
    (want,) = stagecraft.Session(squeezenet, schedule="sequential", progress=False).run(x)
    found = stagecraft.schedule(squeezenet, "dp", cost_model="analytic:v100", progress=False)
    assert any(len(st.groups) > 1 or st.kind == "merge" for st in found.stages)
    for sch in ["greedy", "dp", found]:
        sess = stagecraft.Session(squeezenet, schedule=sch, cost_model="analytic:v100",
                                  progress=False)
        (got,) = sess.run(x)
        assert relative_error(got, want) < 1e-4, sch


def test_session_runs_the_schedule_it_was_given(squeezenet):
    found = stagecraft.schedule(squeezenet, "greedy", progress=False)
    sess = stagecraft.Session(squeezenet, schedule=found, progress=False)
    assert [st.groups for st in sess.schedule.stages] == [st.groups for st in found.stages]


def test_a_schedule_of_an_equal_model_carries_over():
    # Same network loaded twice: the schedule moves over by op name (graph hashes agree).
    a = stagecraft.Model("squeezenet1_1", input_size=64)
    b = stagecraft.Model("squeezenet1_1", input_size=64)
    found = stagecraft.schedule(a, "greedy", progress=False)
    sess = stagecraft.Session(b, schedule=found, progress=False)
    assert len(sess.schedule) == len(found)


def test_batch_and_layout_options(squeezenet):
    sess = stagecraft.Session("squeezenet1_1", input_size=64, batch=2, layout="nhwc",
                              schedule="sequential", progress=False)
    assert sess.inputs[0].shape == (1 * 2, 3, 64, 64)
    x = random_input((2, 3, 64, 64), seed=4)
    (y,) = sess.run(x)
    assert y.shape == (2, 1000)
    # Each image of the batch gives what it gives alone (in the default layout).
    single = stagecraft.Session(squeezenet, schedule="sequential", progress=False)
    for i in range(2):
        (want,) = single.run(x[i:i + 1])
        assert relative_error(y[i:i + 1], want) < 1e-4
    assert "nhwc" in sess.plan


def test_int8_tracks_f32(tmp_path, squeezenet):
    x = random_input((1, 3, 64, 64), seed=5)
    (want,) = stagecraft.Session(squeezenet, schedule="sequential", progress=False).run(x)
    info = stagecraft.calibrate(squeezenet, samples=4, path=tmp_path / "sq.calib.yaml",
                                progress=False)
    assert info["path"] == str(tmp_path / "sq.calib.yaml")
    assert info["values"] > 0 and info["int8_ops"] > 0 and info["samples"] == 4
    a = stagecraft.Session("squeezenet1_1", input_size=64, dtype="int8",
                           calibration=info["path"], schedule="sequential", progress=False)
    b = stagecraft.Session("squeezenet1_1", input_size=64, dtype="int8",
                           calibration=info["path"], schedule="greedy", progress=False)
    assert a.model.dtype == "int8"
    (ya,) = a.run(x)
    (yb,) = b.run(x)
    assert np.array_equal(ya, yb)  # same calibration and kernels: same integers
    cosine = float(np.dot(ya.ravel(), want.ravel()) /
                   (np.linalg.norm(ya) * np.linalg.norm(want)))
    assert cosine > 0.9


def _native_bf16() -> bool:
    with open("/proc/cpuinfo") as f:
        return "avx512_bf16" in f.read()


def test_bf16_tracks_f32_or_is_refused_in_one_line(squeezenet):
    x = random_input((1, 3, 64, 64), seed=5)
    if not _native_bf16():
        with pytest.raises(stagecraft.UsageError, match="no native bf16.*AVX512_BF16 or AMX"):
            stagecraft.Session("squeezenet1_1", input_size=64, dtype="bf16", progress=False)
        return
    (want,) = stagecraft.Session(squeezenet, schedule="sequential", progress=False).run(x)
    a = stagecraft.Session("squeezenet1_1", input_size=64, dtype="bf16", schedule="sequential",
                           progress=False)
    b = stagecraft.Session("squeezenet1_1", input_size=64, dtype="bf16", schedule="dp",
                           progress=False)
    assert a.model.dtype == "bf16"
    assert a.inputs[0].dtype == "float32" and a.outputs[0].graph_dtype == "f32"
    (ya,) = a.run(x)
    (yb,) = b.run(x)
    assert ya.dtype == np.float32
    # Schedules differ by accumulation order at most: within one bf16 rounding of the largest
    # output, or on AMX, whose kernels' blocking follows the thread count, a few (test_bf16.cpp).
    assert relative_error(yb, ya) < (0.02 if "ISA avx512_core_amx" in a.description else 4e-3)
    assert not np.array_equal(ya, want)  # it did compute in bf16
    assert relative_error(ya, want) < 0.03


def test_calibrate_a_residual_network_for_an_int8_session(tmp_path):
    # calibrate() quantises the graph with its additions kept (int8 convolutions take no
    # residual); it used to calibrate the fused graph and fail on every ResNet-like model.
    info = stagecraft.calibrate("resnet50", input_size=64, samples=2, path=tmp_path / "r.calib.yaml",
                                progress=False)
    assert info["int8_ops"] > 50
    s = stagecraft.Session("resnet50", input_size=64, dtype="int8", calibration=info["path"],
                           schedule="sequential", progress=False)
    (y,) = s.run(random_input((1, 3, 64, 64), seed=3))
    assert y.shape == (1, 1000) and np.isfinite(y).all()


def test_calibrate_on_given_inputs(tmp_path, squeezenet):
    xs = [random_input((1, 3, 64, 64), seed=s) for s in range(2)]
    info = stagecraft.calibrate(squeezenet, inputs=xs, method="percentile", percentile=99.9,
                                path=tmp_path / "c.yaml", progress=False)
    assert info["samples"] == 2 and info["method"] == "percentile"
    assert (tmp_path / "c.yaml").read_text().startswith("calibration:")


def test_time_reports_latency(squeezenet_session):
    t = squeezenet_session.time(iters=3, warmup=1)
    assert 0 < t["p10_ms"] <= t["median_ms"] <= t["p90_ms"]
    assert t["images_per_s"] > 0


def test_networks_and_backends():
    nets = stagecraft.networks()
    assert "inception_v3" in nets and "squeezenet1_1" in nets
    assert "cpu" in stagecraft.backends()


def test_onnx_model_runs_like_the_cli_export(tmp_path, cli, squeezenet):
    # An ONNX export of the network (same weights) gives the same outputs through the package.
    from conftest import run_cli
    path = tmp_path / "sq.onnx"
    run_cli(cli, "graph", "squeezenet1_1", "--input-size", "64", "--onnx", str(path))
    sess = stagecraft.Session(str(path), schedule="sequential", progress=False)
    x = random_input((1, 3, 64, 64), seed=6)
    (got,) = sess.run(x)
    (want,) = stagecraft.Session(squeezenet, schedule="sequential", progress=False).run(x)
    assert relative_error(got, want) < 1e-5


def test_winograd_can_be_turned_off_with_the_same_result():
    kw = dict(input_size=64, schedule="sequential")
    on = stagecraft.Session("squeezenet1_1", **kw)
    off = stagecraft.Session("squeezenet1_1", winograd=False, **kw)
    assert "Winograd convolutions off" in off.description
    assert "Winograd convolutions off" not in on.description
    x = random_input((1, 3, 64, 64))
    (a,) = on.run(x)
    (b,) = off.run(x)
    assert relative_error(a, b) < 1e-4
    fast = stagecraft.Session("squeezenet1_1", winograd="fast", **kw)
    assert "fast Winograd tiles" in fast.description
    (c,) = fast.run(x)
    assert relative_error(c, b) < 1e-4
    with pytest.raises(stagecraft.UsageError, match="winograd"):
        stagecraft.Session("squeezenet1_1", winograd="always", **kw)
