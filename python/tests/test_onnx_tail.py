"""A data-dependent tail (frontend/onnx/onnx_tail.h): NonZero, NonMaxSuppression and what reads
them run on the host after the plan, with ONNX's semantics. Compared with ONNX Runtime on random
data: a detection head written as Ultralytics' `nms=True` export writes it, an output whose shape
the data decides, Pad in every mode; and one-line refusals."""
from __future__ import annotations

import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import stagecraft
from onnx_cases import agrees, model_of

C = helper.make_node
MAX_DETECTIONS = 20


def const(name: str, value, dtype=np.int64) -> onnx.NodeProto:
    return C("Constant", [], [name], value=onnx.numpy_helper.from_array(np.asarray(value, dtype=dtype), name))


def detection_head(classes: int, boxes: int, threshold: float = 0.5) -> onnx.ModelProto:
    """[1, 4 + classes, boxes] -> [MAX_DETECTIONS, 6] (x1, y1, x2, y2, score, class), zero rows
    after the detections: the best class per box, the boxes above `threshold` (NonZero), boxes of
    different classes kept apart by an offset, NonMaxSuppression, then Pad to a fixed row count by
    Shape arithmetic."""
    n = [
        C("Transpose", ["x"], ["t"], perm=[0, 2, 1]),
        const("s0", [0]), const("s4", [4]), const("s_end", [4 + classes]), const("ax2", [2]),
        C("Slice", ["t", "s0", "s4", "ax2"], ["box3"]),
        C("Slice", ["t", "s4", "s_end", "ax2"], ["cls3"]),
        const("last", [-1]),
        C("ReduceMax", ["cls3", "last"], ["conf2"], keepdims=0),
        C("ArgMax", ["cls3"], ["label2"], axis=-1, keepdims=0),
        const("zero", 0),
        C("Gather", ["box3", "zero"], ["box"], axis=0),
        C("Gather", ["conf2", "zero"], ["conf"], axis=0),
        C("Gather", ["label2", "zero"], ["label"], axis=0),
        const("thr", threshold, np.float32),
        C("Greater", ["conf", "thr"], ["keep"]),
        C("NonZero", ["keep"], ["nz"]),
        C("Transpose", ["nz"], ["nzt"], perm=[1, 0]),
        C("GatherND", ["box", "nzt"], ["kbox"]),
        C("GatherND", ["conf", "nzt"], ["kconf"]),
        C("GatherND", ["label", "nzt"], ["klabel"]),
        C("Cast", ["klabel"], ["flabel"], to=TensorProto.FLOAT),
        const("col", [1]),
        C("Unsqueeze", ["flabel", "col"], ["flabel2"]),
        const("offset", 1000.0, np.float32),
        C("Mul", ["flabel2", "offset"], ["shift"]),
        C("Add", ["kbox", "shift"], ["nbox2"]),
        const("batch", [0]),
        C("Unsqueeze", ["nbox2", "batch"], ["nbox"]),
        const("rows01", [0, 1]),
        C("Unsqueeze", ["kconf", "rows01"], ["nscore"]),
        const("max_out", [MAX_DETECTIONS]), const("iou", [0.5], np.float32),
        C("NonMaxSuppression", ["nbox", "nscore", "max_out", "iou"], ["sel"]),
        const("two", 2),
        C("Gather", ["sel", "two"], ["pick"], axis=1),
        C("Gather", ["kbox", "pick"], ["obox"], axis=0),
        C("Gather", ["kconf", "pick"], ["oconf1"], axis=0),
        C("Unsqueeze", ["oconf1", "col"], ["oconf"]),
        C("Gather", ["flabel2", "pick"], ["olabel"], axis=0),
        C("Concat", ["obox", "oconf", "olabel"], ["rows"], axis=-1),
        C("Shape", ["rows"], ["rshape"]),
        C("Gather", ["rshape", "zero"], ["count"], axis=0),
        const("cap", MAX_DETECTIONS),
        C("Sub", ["cap", "count"], ["missing"]),
        C("Unsqueeze", ["missing", "batch"], ["missing1"]),
        const("no_pads", [0, 0]), const("no_pad", [0]),
        C("Concat", ["no_pads", "missing1", "no_pad"], ["pads"], axis=0),  # rows after the detections
        C("Pad", ["rows", "pads"], ["y"], mode="constant"),
    ]
    return model_of(n, {"x": [1, 4 + classes, boxes]}, opset=18)


def detection_input(classes: int, boxes: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    corner = rng.uniform(0, 200, (2, boxes))
    size = rng.uniform(10, 60, (2, boxes))
    scores = rng.uniform(0, 1, (classes, boxes))  # distinct: no ties decide the order
    return np.concatenate([corner, corner + size, scores])[None].astype(np.float32)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_detection_head_agrees_with_onnxruntime(seed):
    model = detection_head(classes=3, boxes=300)
    x = detection_input(3, 300, seed)
    (y,) = agrees(model, {"x": x}, rtol=0, atol=0)
    rows = int((np.abs(y).sum(-1) > 0).sum())
    assert 0 < rows <= MAX_DETECTIONS  # detections were made and suppressed, not a vacuous match
    assert np.all(y[rows:] == 0)


def test_detection_head_with_no_detection():
    # Nothing above the threshold: NonZero, GatherND and NonMaxSuppression of empty tensors.
    model = detection_head(classes=2, boxes=50, threshold=2.0)
    (y,) = agrees(model, {"x": detection_input(2, 50, 0)}, rtol=0, atol=0)
    assert y.shape == (MAX_DETECTIONS, 6) and not y.any()


def test_session_declares_the_model_outputs(tmp_path):
    path = tmp_path / "head.onnx"
    model = detection_head(classes=3, boxes=100)
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT, [MAX_DETECTIONS, "rows"]))
    onnx.save(model, path)
    session = stagecraft.Session(stagecraft.Model(str(path)), schedule="sequential")
    assert [(o.name, o.shape) for o in session.outputs] == [("y", (MAX_DETECTIONS, -1))]
    assert "NonMaxSuppression" in session.model.tail
    (y,) = session.run(detection_input(3, 100, 0))
    assert y.shape == (MAX_DETECTIONS, 6)


def test_output_shape_follows_the_data():
    # The indices of the positive elements of a tensor the graph computes: [2, count].
    model = model_of([C("Relu", ["x"], ["r"]), C("Greater", ["r", "half"], ["m"]), C("NonZero", ["m"], ["y"])],
                     {"x": [6, 5]}, {"y": TensorProto.INT64}, initializers={"half": np.float32(0.5)})
    rng = np.random.default_rng(3)
    counts = set()
    for _ in range(3):
        x = rng.uniform(-1, 1, (6, 5)).astype(np.float32)
        (y,) = agrees(model, {"x": x}, exact=True)
        counts.add(y.shape[1])
    assert len(counts) > 1  # one plan, outputs of different sizes


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_modes_after_nonzero(mode):
    # Pad of a tail value (every mode, negative pads crop) and of a constant (folded at load).
    nodes = [C("Greater", ["x", "zero"], ["m"]), C("NonZero", ["m"], ["nz"]),
             C("Cast", ["nz"], ["f"], to=TensorProto.FLOAT),
             C("Pad", ["f", "pads", "value"], ["y"], mode=mode),
             C("Pad", ["table", "pads2"], ["z0"], mode=mode), C("Add", ["z0", "x"], ["z"])]
    inits = {"zero": np.float32(0), "pads": np.array([1, 2, 0, 3], np.int64), "value": np.float32(-1)}
    if mode == "constant":  # [4, 5] -> [4, 4]
        inits.update(table=np.arange(20, dtype=np.float32).reshape(4, 5), pads2=np.array([0, 1, 0, -2], np.int64))
    else:  # [3, 4] -> [4, 5]; wrap: the last row cropped first, then the others repeated (ONNX
        # Runtime's order; ONNX's reference refuses negative pads and ONNX Runtime a reflection of
        # more than the axis)
        pads2 = [2, 1, -1, 0] if mode == "wrap" else [1, 1, 0, 0]
        inits.update(table=np.arange(12, dtype=np.float32).reshape(3, 4), pads2=np.array(pads2, np.int64))
    x_shape = [4, 4] if mode == "constant" else [4, 5]
    model = model_of(nodes, {"x": x_shape}, ("y", "z"), initializers=inits, opset=19)
    x = np.random.default_rng(0).uniform(-1, 1, x_shape).astype(np.float32)
    agrees(model, {"x": x}, rtol=0, atol=0)


def test_a_tail_op_without_a_host_rule_is_refused_at_load():
    model = model_of([C("Relu", ["x"], ["r"]), C("NonZero", ["r"], ["nz"]),
                      C("Cast", ["nz"], ["f"], to=TensorProto.FLOAT), C("Erf", ["f"], ["y"])], {"x": [4, 4]})
    with pytest.raises(stagecraft.FormatError) as e:
        stagecraft.Model(_saved(model))
    assert "node 'y' (Erf), evaluated on the host after the plan: the host evaluation has no rule for Erf" in str(e.value)
    assert "\n" not in str(e.value)


def _saved(model: onnx.ModelProto) -> str:
    import tempfile

    path = tempfile.mktemp(suffix=".onnx")
    onnx.save(model, path)
    return path


def test_cli_runs_the_tail_and_refuses_to_export_it(tmp_path, cli):
    path = tmp_path / "head.onnx"
    onnx.save(detection_head(classes=3, boxes=100), path)
    x = detection_input(3, 100, 1)
    np.save(tmp_path / "x.npy", x)
    out = subprocess.run([cli, "run", str(path), "--schedule", "sequential", "--iters", "2", "--input",
                          str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "tail: " in out.stdout and "NonMaxSuppression" in out.stdout
    import onnxruntime as ort

    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), want)
    refused = subprocess.run([cli, "graph", str(path), "--onnx", str(tmp_path / "copy.onnx")],
                             capture_output=True, text=True)
    assert refused.returncode != 0
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "would lose them" in lines[0]
