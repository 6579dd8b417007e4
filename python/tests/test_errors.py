"""Mistakes raise stagecraft.Error subclasses carrying the CLI's one-line messages."""

from __future__ import annotations

import numpy as np
import pytest

import stagecraft
from conftest import cli_error, random_input


def test_exception_hierarchy():
    assert issubclass(stagecraft.InputError, stagecraft.Error)
    assert issubclass(stagecraft.InputError, ValueError)
    assert issubclass(stagecraft.IoError, OSError)
    assert issubclass(stagecraft.ShapeError, stagecraft.GraphError)
    assert issubclass(stagecraft.FormatError, stagecraft.GraphError)
    for cls in (stagecraft.NetworkError, stagecraft.ScheduleError, stagecraft.BackendError,
                stagecraft.UsageError, stagecraft.DeviceSpecError):
        assert issubclass(cls, stagecraft.Error)


def test_wrong_shape(squeezenet_session):
    with pytest.raises(stagecraft.InputError) as e:
        squeezenet_session.run(random_input((1, 3, 32, 32)))
    name = squeezenet_session.inputs[0].name
    assert str(e.value) == (f"input '{name}': shape 1x3x32x32 does not match the graph input "
                            f"1x3x64x64")


def test_wrong_dtype(squeezenet_session):
    x = np.zeros((1, 3, 64, 64), dtype=np.float64)
    with pytest.raises(stagecraft.InputError, match=r"dtype float64, expected float32"):
        squeezenet_session.run(x)
    with pytest.raises(stagecraft.InputError, match=r"expected a numpy.ndarray"):
        squeezenet_session.run([[0.0] * 3])


def test_wrong_names_and_counts(squeezenet_session):
    x = random_input((1, 3, 64, 64))
    with pytest.raises(stagecraft.InputError, match=r"unknown input 'nope'"):
        squeezenet_session.run({"nope": x})
    with pytest.raises(stagecraft.InputError, match=r"takes 1 input\(s\), got 2"):
        squeezenet_session.run([x, x])
    with pytest.raises(stagecraft.InputError, match=r"missing input"):
        squeezenet_session.run({})


def test_unknown_network_says_what_the_cli_says(cli):
    with pytest.raises(stagecraft.NetworkError) as e:
        stagecraft.Session("inceptoin_v3", schedule="sequential")
    assert str(e.value) == cli_error(cli, "run", "inceptoin_v3", "--schedule", "sequential")
    assert "inception_v3" in str(e.value)  # the message lists the known networks


def test_missing_file_says_what_the_cli_says(tmp_path, cli):
    missing = str(tmp_path / "missing.onnx")
    with pytest.raises(stagecraft.IoError) as e:
        stagecraft.Model(missing)
    assert isinstance(e.value, OSError)
    assert str(e.value) == cli_error(cli, "graph", missing)
    with pytest.raises(stagecraft.IoError):
        stagecraft.Model(str(tmp_path / "missing.yaml"))


def test_bad_schedule_yaml_says_what_the_cli_says(tmp_path, cli, squeezenet):
    bad = tmp_path / "bad.yaml"
    bad.write_text("schedule: {version: 1, stages: [[nonexistent_op]]\n")  # unbalanced
    with pytest.raises(stagecraft.Error) as e:
        stagecraft.Schedule.from_yaml(bad, squeezenet)
    assert str(e.value) == cli_error(cli, "run", "squeezenet1_1", "--input-size", "64",
                                     "--schedule", str(bad))
    assert "bad.yaml" in str(e.value)
    with pytest.raises(stagecraft.Error) as e2:
        stagecraft.Session(squeezenet, schedule=str(bad))
    assert str(e2.value) == str(e.value)


def test_foreign_schedule_is_a_schedule_error(tmp_path, squeezenet):
    path = tmp_path / "s.yaml"
    stagecraft.schedule(squeezenet, "greedy", progress=False).to_yaml(path)
    other = stagecraft.Model("squeezenet1_1", input_size=64, batch=2)
    with pytest.raises(stagecraft.ScheduleError, match="batch"):
        stagecraft.Schedule.from_yaml(path, other)
    with pytest.raises(stagecraft.ScheduleError):
        stagecraft.Session("googlenet", input_size=64, schedule=path)


def test_schedule_of_an_onnx_model_needs_the_model(tmp_path, cli):
    onnx_lib = pytest.importorskip("onnx")
    from conftest import run_cli
    onnx = tmp_path / "sq.onnx"
    run_cli(cli, "graph", "squeezenet1_1", "--input-size", "64", "--onnx", str(onnx))
    proto = onnx_lib.load(str(onnx))
    proto.graph.name = "my_model"  # as exporters name graphs: not a built-in network
    onnx_lib.save(proto, str(onnx))
    model = stagecraft.Model(onnx)
    assert model.name == "my_model"
    path = tmp_path / "s.yaml"
    stagecraft.schedule(model, "greedy", progress=False).to_yaml(path)
    with pytest.raises(stagecraft.UsageError, match="not a built-in network: pass its model"):
        stagecraft.Schedule.from_yaml(path)
    assert len(stagecraft.Schedule.from_yaml(path, model)) == len(stagecraft.Schedule.from_yaml(
        path, onnx))


def test_schedule_name_that_is_neither(cli, squeezenet):
    with pytest.raises(stagecraft.UsageError) as e:
        stagecraft.Session(squeezenet, schedule="fastest")
    assert str(e.value) == cli_error(cli, "run", "squeezenet1_1", "--schedule", "fastest")


def test_bad_options(squeezenet):
    with pytest.raises(stagecraft.UsageError, match="strategy"):
        stagecraft.schedule(squeezenet, "fastest", progress=False)
    with pytest.raises(stagecraft.UsageError, match="layout"):
        stagecraft.Session(squeezenet, layout="nwhc", schedule="sequential")
    with pytest.raises(stagecraft.UsageError, match="dtype"):
        stagecraft.Model("squeezenet1_1", dtype="int4")
    with pytest.raises(stagecraft.UsageError):
        stagecraft.Session(squeezenet, batch=4)  # the model is loaded already
    with pytest.raises(stagecraft.DeviceSpecError):
        stagecraft.schedule(squeezenet, "dp", cost_model="analytic:tpu", progress=False)


def test_unavailable_backend(squeezenet):
    """A backend this machine cannot give is one BackendError naming it and why: CUDA not built
    in, or built in with no usable GPU (the CUDA runtime's reason)."""
    try:
        stagecraft.Session(squeezenet, backend="cuda", schedule="sequential")
    except stagecraft.BackendError as e:
        message = str(e)
        assert "cuda" in message.lower(), message
        if "cuda" in stagecraft.backends():
            assert "no usable GPU" in message, message
        return
    pytest.skip("a GPU is usable here, so the CUDA backend opened (tests/cuda tests it)")
