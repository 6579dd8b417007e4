"""The package gives the `stagecraft` command's results: same outputs on every built-in network,
same schedules from the same files."""

from __future__ import annotations

import numpy as np
import pytest

import stagecraft
from conftest import input_size, random_input, relative_error, run_cli

NETWORKS = sorted(stagecraft.networks())


@pytest.mark.parametrize("network", NETWORKS)
def test_run_equals_cli_run(tmp_path, cli, network):
    size = input_size(network)
    sess = stagecraft.Session(network, input_size=size, schedule="sequential", progress=False)
    x = random_input(sess.inputs[0].shape, seed=11)
    np.save(tmp_path / "x.npy", x)
    run_cli(cli, "run", network, "--input-size", str(size), "--schedule", "sequential",
            "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy"),
            "--warmup", "0", "--iters", "1")
    want = np.load(tmp_path / "y.npy")
    (got,) = sess.run(x)
    assert got.shape == want.shape
    assert np.any(want != 0)
    # Same graph, weights, schedule and kernels: equal up to threading-order rounding.
    assert relative_error(got, want) < 1e-5, network


def test_schedule_file_from_python_runs_in_the_cli_with_the_same_outputs(tmp_path, cli):
    found = stagecraft.schedule("inception_v3", "dp", input_size=75,
                                cost_model="analytic:v100", progress=False)
    path = tmp_path / "s.yaml"
    found.to_yaml(path)
    show = run_cli(cli, "show", str(path), "--input-size", "75")
    # `show` prints the same table as Schedule.summary().
    assert found._core.table_text() in show.stdout
    sess = stagecraft.Session("inception_v3", input_size=75, schedule=path, progress=False)
    assert [st.groups for st in sess.schedule.stages] == [st.groups for st in found.stages]
    x = random_input(sess.inputs[0].shape, seed=12)
    np.save(tmp_path / "x.npy", x)
    run_cli(cli, "run", "inception_v3", "--input-size", "75", "--schedule", str(path), "--input",
            str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy"), "--warmup", "0",
            "--iters", "1")
    (got,) = sess.run(x)
    assert relative_error(got, np.load(tmp_path / "y.npy")) < 1e-5


def test_cli_schedule_file_loads_in_python(tmp_path, cli):
    path = tmp_path / "cli.yaml"
    run_cli(cli, "schedule", "googlenet", "--input-size", "64", "--cost-model", "analytic:a100",
            "-o", str(path), "-q")
    s = stagecraft.Schedule.from_yaml(path, input_size=64)
    assert s.meta["cost_model"] == "analytic:a100"
    again = stagecraft.schedule("googlenet", "dp", input_size=64, cost_model="analytic:a100",
                                progress=False)
    # The analytic search is deterministic: the CLI and the package find the same schedule.
    assert [st.groups for st in s.stages] == [st.groups for st in again.stages]
    assert s.predicted_ms == pytest.approx(again.predicted_ms, rel=1e-5)  # 6 digits in YAML


def test_int8_with_a_calibration_file_equals_cli(tmp_path, cli):
    calib = tmp_path / "sq.calib.yaml"
    run_cli(cli, "calibrate", "squeezenet1_1", "--input-size", "64", "--samples", "2", "-o",
            str(calib))
    sess = stagecraft.Session("squeezenet1_1", input_size=64, dtype="int8", calibration=calib,
                              schedule="sequential", progress=False)
    x = random_input(sess.inputs[0].shape, seed=13)
    np.save(tmp_path / "x.npy", x)
    run_cli(cli, "run", "squeezenet1_1", "--input-size", "64", "--dtype", "int8",
            "--calibration", str(calib), "--schedule", "sequential", "--input",
            str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy"), "--warmup", "0",
            "--iters", "1")
    (got,) = sess.run(x)
    assert np.array_equal(got, np.load(tmp_path / "y.npy"))


@pytest.mark.parametrize("network,layout", [("inception_v3", None), ("squeezenet1_1", "auto")])
def test_cli_and_python_build_the_same_plan(tmp_path, cli, network, layout):
    # Both front ends go through one pipeline (session/pipeline.h): with the same cache, the
    # measured dp search of the second is answered by the schedule the first stored, the layouts
    # by the same profiles, and the plans agree kernel for kernel.
    size = input_size(network)
    cache = tmp_path / "cache"
    listing = tmp_path / "plan.txt"
    args = ["run", network, "--input-size", str(size), "--cache-dir", str(cache),
            "--plan-listing", str(listing), "--warmup", "0", "--iters", "1"]
    if layout:
        args += ["--layout", layout]
    run_cli(cli, *args)
    sess = stagecraft.Session(network, input_size=size, schedule="dp", cache_dir=cache,
                              layout=layout, progress=False)
    want = listing.read_text()
    assert sess.plan_listing() == want
    assert sess.schedule.stats["from_cache"], "the CLI's search was not found by the package"
    assert want.count("\n") > 10  # a listing of kernels, not an empty text
