"""stagecraft as an ONNX backend (stagecraft.onnx_backend) and ONNX's node conformance tests: every
float32 node test the onnx package generates either passes or is refused with one line, as
python/tests/onnx_conformance_exclusions.txt (the coverage table) says; none gives a wrong answer,
raises anything else or crashes."""
from __future__ import annotations

import copy
import os
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed (scripts/test.sh installs it)")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import stagecraft  # noqa: E402
from stagecraft.onnx_backend import (Backend, check_results, node_test_cases,  # noqa: E402
                                     node_test_results, read_exclusions, run_case)

EXCLUSIONS = Path(__file__).with_name("onnx_conformance_exclusions.txt")


def conv_relu_model() -> "onnx.ModelProto":
    rng = np.random.default_rng(3)
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], rng.standard_normal(108).astype(np.float32))
    b = helper.make_tensor("b", TensorProto.FLOAT, [4], rng.standard_normal(4).astype(np.float32))
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["y"])],
        "conv_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        initializer=[w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


class CrashingCase:
    """A node test case whose model ends the process that reads it, unless that process made it
    (the worker processes are spawned: the case travels pickled, so it lives at module level)."""

    def __init__(self, model: "onnx.ModelProto") -> None:
        self.name = "crashing"
        self._model = model
        self._maker = os.getpid()

    @property
    def model(self) -> "onnx.ModelProto":
        if os.getpid() != self._maker:
            os._exit(3)
        return self._model


def test_backend_runs_a_model_as_the_onnx_reference_does():
    model = conv_relu_model()
    x = np.random.default_rng(4).standard_normal((1, 3, 8, 8)).astype(np.float32)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    assert Backend.supports_device("CPU")
    (got,) = Backend.prepare(model).run([x])
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    (again,) = Backend.run_model(model.SerializeToString(), {"x": x})
    np.testing.assert_array_equal(again, got)
    assert not Backend.supports_device("TPU")
    with pytest.raises(stagecraft.Error, match="TPU"):
        Backend.prepare(model, "TPU")


def test_a_model_outside_the_supported_set_is_one_line_naming_the_node():
    graph = helper.make_graph([helper.make_node("STFT", ["x", "step"], ["y"], name="spectrogram")], "stft",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[helper.make_tensor("step", TensorProto.INT64, [], [8])])
    with pytest.raises(stagecraft.Error) as info:
        Backend.prepare(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert "\n" not in str(info.value).strip(), str(info.value)
    assert "'spectrogram' (STFT)" in str(info.value), str(info.value)


def test_every_float32_node_test_passes_or_is_refused_as_listed():
    results = node_test_results()
    listed, version = read_exclusions(EXCLUSIONS)
    failures, unknown = check_results(results, listed, version)
    assert not failures, "\n".join(failures[:40])
    passed = sum(r["status"] == "pass" for r in results)
    print(f"onnx {onnx.__version__}: {len(results)} float32 node tests, {passed} pass, "
          f"{len(results) - passed} refused as listed" + (f", {len(unknown)} new ones refused" if unknown else ""))
    assert passed >= 5  # matmul (2-D, 4-D, broadcast) and softmax load today


def test_a_wrong_answer_and_a_crash_are_told_apart_from_a_refusal():
    (case,) = node_test_cases(names=["test_matmul_2d"])
    assert run_case(case)["status"] == "pass"
    wrong = copy.deepcopy(case)
    inputs, outputs = wrong.data_sets[0]
    wrong.data_sets[0] = (inputs, [o + 1.0 for o in outputs])
    assert run_case(wrong)["status"] == "wrong"

    results = node_test_results([case, CrashingCase(case.model), case])
    assert [r["status"] for r in results] == ["pass", "crash", "pass"], results
    assert "exit code 3" in results[1]["message"]


def test_the_exclusion_list_fails_when_a_listed_case_passes_or_an_unlisted_one_is_refused():
    results = [{"name": "a", "status": "pass", "message": ""},
               {"name": "b", "status": "refused", "message": "rank 3"}]
    assert check_results(results, {"b": "rank 3"}, onnx.__version__) == ([], [])
    failures, _ = check_results(results, {"a": "", "b": ""}, onnx.__version__)
    assert failures and "passes now" in failures[0]
    failures, _ = check_results(results, {}, onnx.__version__)
    assert failures and "not in the exclusion list" in failures[0]
    assert check_results(results, {}, "0.0")[1] == ["b"]  # another onnx version: reported only
    results.append({"name": "c", "status": "wrong", "message": "output 0"})
    assert check_results(results, {"b": "", "c": ""}, onnx.__version__)[0] == ["c: wrong: output 0"]


def test_the_op_version_table_of_the_importer_matches_the_onnx_package():
    """frontend/onnx/onnx_op_versions.inc (which version of each op a model's opset selects) is the
    installed onnx's schemas; with another onnx version the difference is printed, not failed."""
    root = Path(__file__).resolve().parents[2]
    table = root / "frontend" / "onnx" / "onnx_op_versions.inc"
    made_with = table.read_text().splitlines()[0].split("from onnx ")[1].split(":")[0]
    import subprocess
    import sys
    run = subprocess.run([sys.executable, str(root / "scripts" / "gen_onnx_op_versions.py"), "--check"],
                         capture_output=True, text=True)
    if made_with != onnx.__version__:
        print(f"the table was made with onnx {made_with}, installed {onnx.__version__}: {run.stderr.strip()}")
        return
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("shape,axis", [([2, 3, 4, 5], 1), ([2, 3, 4], 0), ([2, 3, 4], -1), ([3, 7], 1)])
def test_softmax_follows_the_rule_of_its_opset(op, opset, shape, axis):
    """Before opset 13 (Log)Softmax normalises all the dimensions from `axis` on together; from 13
    the one axis. stagecraft gave the per-axis answer at opset 11 for [2, 3, 4, 5] over axis 1
    (max |difference| 0.68) until the importer read the opset. Compared with ONNX Runtime: onnx's
    ReferenceEvaluator (1.23) applies the opset-13 rule at opset 11 too."""
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (scripts/test.sh installs it)")
    graph = helper.make_graph(
        [helper.make_node(op, ["x"], ["y"], axis=axis)], "softmax",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32) * 3
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = Backend.prepare(model).run([x])[0]
    assert got.shape == want.shape
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)  # log: cancellation near 0


@pytest.mark.parametrize("trans_a,trans_b,alpha,beta", [(0, 0, 1.0, 1.0), (1, 0, 0.5, 1.0), (0, 1, 1.0, 2.5),
                                                        (1, 1, -0.25, 0.75)])
def test_gemm_of_a_constant_weight_takes_every_attribute(trans_a, trans_b, alpha, beta):
    """Gemm with a constant B and C: transA (a transpose before), alpha (in the weight), beta (in the
    bias), transB; against ONNX Runtime. These were refused before (only transA 0, alpha 1, beta 1)."""
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (scripts/test.sh installs it)")
    rng = np.random.default_rng(8)
    m, k, n = 3, 5, 4
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    c = rng.standard_normal(n).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=trans_a, transB=trans_b, alpha=alpha, beta=beta)],
        "gemm", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [k, m] if trans_a else [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[helper.make_tensor("b", TensorProto.FLOAT, b.shape, b.ravel()),
                     helper.make_tensor("c", TensorProto.FLOAT, c.shape, c)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    a = rng.standard_normal([k, m] if trans_a else [m, k]).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"a": a})[0]
    got = Backend.prepare(model).run([a])[0]
    assert got.shape == want.shape == (m, n)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
