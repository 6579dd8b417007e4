"""ONNX ops through stagecraft against ONNX Runtime on random data, with their parameters as
initializers (the way exporters write models; ONNX's own node tests pass them as graph inputs):
transposed convolutions, the ops the importer writes as other ops (its expansions), and a YOLO
detection head's decoding."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed (scripts/test.sh installs it)")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (scripts/test.sh installs it)")
from onnx import TensorProto, helper  # noqa: E402

from stagecraft.onnx_backend import Backend  # noqa: E402


def model_of(nodes, inputs, initializers, opset=17):
    """A model of `nodes` reading `inputs` ({name: shape}) and float `initializers` ({name: array});
    its one output is 'y'."""
    graph = helper.make_graph(
        nodes, "ops", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[helper.make_tensor(n, TensorProto.FLOAT, a.shape, a.ravel()) for n, a in initializers.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def agrees_with_ort(model, feeds, rtol=1e-4, atol=1e-5):
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = Backend.prepare(model).run(list(feeds.values()))[0]
    assert got.shape == want.shape
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    return got


@pytest.mark.parametrize("case", [
    dict(x=[1, 4, 5, 6], w=[4, 3, 2, 2], strides=[2, 2]),                       # YOLO-seg's upsampling
    dict(x=[2, 4, 5, 5], w=[4, 2, 3, 3], strides=[1, 1], pads=[1, 1, 1, 1]),
    dict(x=[1, 6, 4, 5], w=[6, 2, 3, 3], group=3, strides=[2, 2], pads=[1, 0, 0, 1]),
    dict(x=[1, 3, 4, 4], w=[3, 2, 3, 3], strides=[2, 2], output_padding=[1, 1], pads=[1, 1, 1, 1]),
    dict(x=[1, 3, 3, 3], w=[3, 2, 3, 3], strides=[3, 2], output_shape=[10, 8]),
    dict(x=[1, 3, 3, 3], w=[3, 2, 3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
    dict(x=[1, 3, 5, 5], w=[3, 4, 2, 2], dilations=[2, 2], bias=False),
    dict(x=[1, 3, 7], w=[3, 5, 3], strides=[2], pads=[1, 1]),                     # 1-D
])
def test_conv_transpose_agrees_with_onnx_runtime(case):
    case = dict(case)
    rng = np.random.default_rng(11)
    x_shape, w_shape = case.pop("x"), case.pop("w")
    bias = case.pop("bias", True)
    group = case.get("group", 1)
    inits = {"w": rng.standard_normal(w_shape).astype(np.float32)}
    if bias:
        inits["b"] = rng.standard_normal(w_shape[1] * group).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w"] + (["b"] if bias else []), ["y"], **case)
    model = model_of([node], {"x": x_shape}, inits)
    agrees_with_ort(model, {"x": rng.standard_normal(x_shape).astype(np.float32)})


@pytest.mark.parametrize("opset", [18, 21])
def test_group_normalization_takes_its_scale_by_the_rule_of_its_opset(opset):
    """Opset 18: one scale and bias per group; 21: per channel."""
    rng = np.random.default_rng(12)
    c, groups = 6, 3
    n = groups if opset < 21 else c
    inits = {"s": rng.uniform(0.5, 1.5, n).astype(np.float32), "b": rng.standard_normal(n).astype(np.float32)}
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=groups, epsilon=1e-4)
    model = model_of([node], {"x": [2, c, 4, 5]}, inits, opset=opset)
    agrees_with_ort(model, {"x": rng.standard_normal([2, c, 4, 5]).astype(np.float32) * 2 + 1})


@pytest.mark.parametrize("nodes,shape,inits", [
    ([helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=1)], [2, 3, 4, 5],
     {"s": [3, 4, 5], "b": [3, 4, 5]}),
    ([helper.make_node("LayerNormalization", ["x", "s"], ["y"], axis=-2)], [2, 3, 4], {"s": [3, 4]}),
    ([helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=-1)], [2, 3, 8], {"s": [8]}),
    ([helper.make_node("MeanVarianceNormalization", ["x"], ["y"])], [2, 3, 4, 5], {}),
    ([helper.make_node("LpNormalization", ["x"], ["y"], axis=1, p=1)], [2, 3, 4, 5], {}),
    ([helper.make_node("PRelu", ["x", "s"], ["y"])], [2, 3, 4, 5], {"s": [3, 1, 1]}),
    ([helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"])], [2, 3, 4, 5], {"s": [3], "b": [3]}),
    ([helper.make_node("Gemm", ["x", "s", "b"], ["y"], transB=1, alpha=0.5, beta=2.0)], [3, 4],
     {"s": [5, 4], "b": [3, 1]}),
    ([helper.make_node("MatMul", ["x", "s"], ["y"])], [2, 3, 4], {"s": [4]}),
    ([helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], p=3)], [1, 3, 6, 6], {}),
], ids=["layernorm-axis1", "layernorm-axis-2", "rmsnorm", "mvn", "l1norm", "prelu", "instancenorm",
        "gemm-bias-by-row", "matmul-vector", "lppool3"])
def test_the_importers_expansions_agree_with_onnx_runtime(nodes, shape, inits):
    """The ops the importer writes as other ONNX ops (onnx_import_expansions.cpp)."""
    rng = np.random.default_rng(13)
    arrays = {n: rng.uniform(0.5, 1.5, s).astype(np.float32) for n, s in inits.items()}
    model = model_of(nodes, {"x": shape}, arrays, opset=23 if nodes[0].op_type == "RMSNormalization" else 18)
    agrees_with_ort(model, {"x": rng.standard_normal(shape).astype(np.float32)})


def test_a_yolo_detection_heads_distribution_decoding_agrees_with_onnx_runtime():
    """Ultralytics' DFL: the box logits [1, 64, A] seen as [1, 4, 16, A], softmax over the 16 bins,
    a 1x1 convolution (their expectation), then Slice of the [1, 4, A] view into two corners (was
    refused: a rank-3 view read by a Slice), and the anchors' decoding."""
    rng = np.random.default_rng(14)
    anchors = 80
    ints = lambda name, values: helper.make_tensor(name, TensorProto.INT64, [len(values)], values)  # noqa: E731
    nodes = [
        helper.make_node("Conv", ["x", "wc"], ["f"]),
        helper.make_node("Reshape", ["f", "s4"], ["r"]),
        helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3]),
        helper.make_node("Softmax", ["t"], ["p"], axis=1),
        helper.make_node("Conv", ["p", "dfl"], ["e"]),
        helper.make_node("Reshape", ["e", "s3"], ["box"]),
        helper.make_node("Slice", ["box", "z", "two", "one"], ["lt"]),
        helper.make_node("Slice", ["box", "two", "four", "one"], ["rb"]),
        helper.make_node("Sub", ["anc", "lt"], ["x1y1"]),
        helper.make_node("Add", ["anc", "rb"], ["x2y2"]),
        helper.make_node("Concat", ["x1y1", "x2y2"], ["y"], axis=1),
    ]
    inits = {"wc": rng.standard_normal([64, 8, 1, 1]).astype(np.float32),
             "dfl": np.arange(16, dtype=np.float32).reshape(1, 16, 1, 1),
             "anc": rng.uniform(0, 20, [2, anchors]).astype(np.float32)}
    model = model_of(nodes, {"x": [1, 8, 8, 10]}, inits, opset=18)
    model.graph.initializer.extend([ints("s4", [1, 4, 16, anchors]), ints("s3", [1, 4, anchors]),
                                    ints("z", [0]), ints("two", [2]), ints("four", [4]), ints("one", [1])])
    got = agrees_with_ort(model, {"x": rng.standard_normal([1, 8, 8, 10]).astype(np.float32)})
    assert got.shape == (1, 4, anchors)


def dynamic_model(path):
    """Conv(3 -> 4, 3x3, stride 2, pad 1) -> Relu -> Resize x2 over input [N, 3, H, W] (symbolic N,
    H, W as exporters write dynamic axes)."""
    rng = np.random.default_rng(15)
    w = rng.standard_normal([4, 3, 3, 3]).astype(np.float32)
    scales = helper.make_tensor("scales", TensorProto.FLOAT, [4], [1, 1, 2, 2])
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("Resize", ["r", "", "scales"], ["y"], mode="nearest")],
        "dynamic", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel()), scales])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_a_session_answers_every_shape_a_dynamic_model_allows(tmp_path):
    """A model with symbolic batch, height and width: the session opened for one shape plans each
    new shape on first use, keeps the most recent `max_shapes`, agrees with ONNX Runtime on all of
    them, and refuses a shape the model does not allow (3 channels are fixed) in one line."""
    import stagecraft
    path = tmp_path / "dynamic.onnx"
    dynamic_model(str(path))
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    sess = stagecraft.Session(str(path), input_shapes=[[1, 3, 16, 16]], schedule="sequential",
                              cache_dir=str(tmp_path / "cache"), max_shapes=2)
    assert sess.inputs[0].shape == (1, 3, 16, 16)
    rng = np.random.default_rng(16)
    for shape in [(1, 3, 16, 16), (2, 3, 20, 12), (1, 3, 9, 33), (2, 3, 20, 12)]:
        x = rng.standard_normal(shape).astype(np.float32)
        (got,) = sess.run(x)
        (want,) = ref.run(None, {"x": x})
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert sess.shapes == [((1, 3, 9, 33),), ((2, 3, 20, 12),)]  # the oldest dropped
    # One pipeline (backend, cost model, caches) made the plans of every shape.
    pipelines = [sess._core.pipeline] + [core.pipeline for core in sess._by_shapes.values()]
    assert all(p is pipelines[0] for p in pipelines)
    with pytest.raises(stagecraft.InputError) as info:
        sess.run(np.zeros((1, 4, 16, 16), np.float32))
    message = str(info.value)
    assert "\n" not in message.strip() and "has dimension 1 = 3 in the model" in message, message


def test_comparisons_logic_and_where_agree_with_onnx_runtime():
    """Masks as exporters write them: comparisons, Not / And / Or / Xor, IsNaN / IsInf, casts to and
    from bool, and Where with tensor and constant branches (-inf padding), broadcast; a boolean is
    0 / 1 in stagecraft's float tensors and every output here is float."""
    rng = np.random.default_rng(17)
    f = lambda name, value: helper.make_tensor(name, TensorProto.FLOAT, [], [value])  # noqa: E731
    nodes = [
        helper.make_node("Less", ["x", "z"], ["lt"]),
        helper.make_node("GreaterOrEqual", ["x", "half"], ["ge"]),
        helper.make_node("Equal", ["x", "x"], ["same"]),
        helper.make_node("Not", ["lt"], ["not_lt"]),
        helper.make_node("And", ["not_lt", "ge"], ["both"]),
        helper.make_node("Or", ["lt", "same"], ["either"]),
        helper.make_node("Xor", ["both", "either"], ["one"]),
        helper.make_node("IsInf", ["x"], ["inf"]),
        helper.make_node("IsNaN", ["x"], ["nan"]),
        helper.make_node("Or", ["inf", "nan"], ["special"]),
        helper.make_node("Where", ["one", "x", "neg_inf"], ["w1"]),
        helper.make_node("Where", ["special", "zero", "w1"], ["w2"]),
        helper.make_node("Cast", ["one"], ["one_f"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["x"], ["x_bool"], to=TensorProto.BOOL),
        helper.make_node("Cast", ["x_bool"], ["x_bf"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["w2", "one_f"], ["s"]),
        helper.make_node("Add", ["s", "x_bf"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "masks", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 5]),
                         helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 3, 1, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[f("half", 0.5), f("neg_inf", -np.inf), f("zero", 0.0)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = rng.standard_normal([2, 3, 4, 5]).astype(np.float32)
    x.flat[::7] = 0.0
    x.flat[3::11] = np.inf
    x.flat[5::13] = -np.inf
    x.flat[6::17] = np.nan
    z = rng.standard_normal([1, 3, 1, 5]).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x, "z": z})[0]
    got = Backend.prepare(model).run([x, z])[0]
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    assert np.isinf(want).any() and not np.isnan(want).any()
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode,extra", [("linear", {}), ("cubic", {"cubic_coeff_a": -0.75}),
                                        ("nearest", {"coordinate_transformation_mode": "asymmetric"})])
def test_a_resize_to_its_own_size_is_the_identity_of_a_constant_or_a_tensor(mode, extra):
    """DINOv2's position embeddings and BEiT's relative-position bias are resized to the size they
    already have (were refused: a Resize of a constant); a tensor resized by scales of 1 too."""
    rng = np.random.default_rng(18)
    table = rng.standard_normal([1, 4, 6, 6]).astype(np.float32)
    ints = helper.make_tensor("sizes", TensorProto.INT64, [4], [1, 4, 6, 6])
    ones = helper.make_tensor("ones", TensorProto.FLOAT, [4], [1, 1, 1, 1])
    nodes = [helper.make_node("Resize", ["table", "", "", "sizes"], ["bias"], mode=mode, **extra),
             helper.make_node("Resize", ["x", "", "ones"], ["same"], mode=mode, **extra),
             helper.make_node("Add", ["same", "bias"], ["y"])]
    model = model_of(nodes, {"x": [2, 4, 6, 6]}, {"table": table}, opset=18)
    model.graph.initializer.extend([ints, ones])
    agrees_with_ort(model, {"x": rng.standard_normal([2, 4, 6, 6]).astype(np.float32)}, rtol=1e-6, atol=1e-6)


def test_bilinear_resizing_with_aligned_corners_agrees_with_onnx_runtime():
    """PyTorch's bilinear with align_corners=True (DPT's fusion stages; was refused): the corner
    pixels of input and output coincide, up by 2 and to sizes that are no multiple."""
    rng = np.random.default_rng(19)
    scales = helper.make_tensor("scales", TensorProto.FLOAT, [4], [1, 1, 2, 2])
    sizes = helper.make_tensor("sizes", TensorProto.INT64, [4], [1, 3, 5, 17])
    nodes = [helper.make_node("Resize", ["x", "", "scales"], ["up"], mode="linear",
                              coordinate_transformation_mode="align_corners"),
             helper.make_node("Resize", ["up", "", "", "sizes"], ["y"], mode="linear",
                              coordinate_transformation_mode="align_corners")]
    model = model_of(nodes, {"x": [1, 3, 7, 6]}, {}, opset=18)
    model.graph.initializer.extend([scales, sizes])
    agrees_with_ort(model, {"x": rng.standard_normal([1, 3, 7, 6]).astype(np.float32)}, rtol=1e-5, atol=1e-5)


def test_gather_and_scatter_elements_of_constants_fold_as_onnx_runtime_computes_them():
    """BEiT's dynamo export builds its relative-position index with ScatterElements of constants
    (was refused); GatherElements then picks from a constant table; both fold at load."""
    rng = np.random.default_rng(20)
    table = rng.standard_normal([3, 5]).astype(np.float32)
    data = np.zeros([3, 4], np.float32)
    upd = rng.standard_normal([3, 2]).astype(np.float32)
    idx = np.array([[0, 3], [-1, 1], [2, 0]], np.int64)
    pick = np.array([[4, 0, 1, 1], [2, 3, -5, 0], [0, 0, 4, 2]], np.int64)
    i64 = lambda name, a: helper.make_tensor(name, TensorProto.INT64, a.shape, a.ravel())  # noqa: E731
    nodes = [helper.make_node("ScatterElements", ["data", "idx", "upd"], ["scattered"], axis=1),
             helper.make_node("GatherElements", ["table", "pick"], ["picked"], axis=1),
             helper.make_node("Add", ["x", "scattered"], ["s"]),
             helper.make_node("Mul", ["s", "picked"], ["y"])]
    model = model_of(nodes, {"x": [3, 4]}, {"table": table, "data": data, "upd": upd}, opset=18)
    model.graph.initializer.extend([i64("idx", idx), i64("pick", pick)])
    agrees_with_ort(model, {"x": rng.standard_normal([3, 4]).astype(np.float32)}, rtol=1e-6, atol=1e-6)


def test_weights_and_scales_given_as_graph_inputs_are_planned_for_their_values(tmp_path):
    """A Conv whose weight is a graph input (ONNX's node tests write models so) is refused with
    ConstantInputError naming that input; bound at load it runs as ONNX Runtime computes; the ONNX
    backend binds it at run and plans again when its value changes; a resize's scales likewise."""
    import stagecraft

    rng = np.random.default_rng(21)
    conv = helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1])
    resize = helper.make_node("Resize", ["c", "", "s"], ["y"], mode="linear")
    graph = helper.make_graph(
        [conv, resize], "bound",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 6]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 3, 3, 3]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    path = tmp_path / "bound.onnx"
    onnx.save(model, str(path))
    x = rng.standard_normal([1, 3, 5, 6]).astype(np.float32)
    w = rng.standard_normal([4, 3, 3, 3]).astype(np.float32)
    s = np.array([1, 1, 2, 1.5], np.float32)
    with pytest.raises(stagecraft.ConstantInputError) as refused:
        stagecraft.Model(str(path))
    assert refused.value.inputs == ("w",)
    assert "graph input 'w'" in str(refused.value) and "\n" not in str(refused.value)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    m = stagecraft.Model(str(path), constant_inputs={"w": w, "s": s})
    assert [i.name for i in m.inputs] == ["x"]
    got = stagecraft.Session(m, schedule="sequential").run([x])[0]
    np.testing.assert_allclose(got, ref.run(None, {"x": x, "w": w, "s": s})[0], rtol=1e-4, atol=1e-5)

    rep = Backend.prepare(model)
    for weights in (w, w * -2.0):  # a new value: a new plan
        want = ref.run(None, {"x": x, "w": weights, "s": s})[0]
        got = rep.run([x, weights, s])[0]
        assert got.shape == want.shape == (1, 4, 10, 9)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op,attrs,with_state", [
    ("LSTM", dict(direction="bidirectional"), True),
    ("LSTM", dict(input_forget=1, clip=0.8), False),  # (ONNX's reference ignores both)
    ("LSTM", dict(layout=1), True),
    ("GRU", dict(linear_before_reset=1), True),
    ("GRU", dict(direction="reverse", activations=["HardSigmoid", "LeakyRelu"], activation_alpha=[0.3, 0.1],
                 activation_beta=[0.4]), False),
    ("RNN", dict(layout=1, direction="bidirectional"), True),
])
def test_recurrent_layers_with_weights_in_the_model_agree_with_onnx_runtime(op, attrs, with_state):
    """RNN, GRU and LSTM unrolled over the sequence, their weights initializers (as exporters write
    them; ONNX's node tests give them as inputs): every output against ONNX Runtime (against ONNX's
    reference implementation for the batch-first layout, which ONNX Runtime refuses)."""
    rng = np.random.default_rng(23)
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    steps, batch, width, hidden = 5, 2, 3, 4
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    batch_first = attrs.get("layout", 0) == 1
    x_shape = [batch, steps, width] if batch_first else [steps, batch, width]
    inits = {"W": rng.standard_normal([dirs, gates * hidden, width]).astype(np.float32) * 0.5,
             "R": rng.standard_normal([dirs, gates * hidden, hidden]).astype(np.float32) * 0.5,
             "B": rng.standard_normal([dirs, 2 * gates * hidden]).astype(np.float32) * 0.5}
    inputs = ["x", "W", "R", "B", ""]
    if with_state:
        state = [batch, dirs, hidden] if batch_first else [dirs, batch, hidden]
        inits["h0"] = rng.standard_normal(state).astype(np.float32)
        inputs.append("h0")
        if op == "LSTM":
            inits["c0"] = rng.standard_normal(state).astype(np.float32)
            inits["P"] = rng.standard_normal([dirs, 3 * hidden]).astype(np.float32)
            inputs += ["c0", "P"]
    outputs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, inputs, outputs, hidden_size=hidden, **attrs)
    graph = helper.make_graph(
        [node], "recurrent", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        initializer=[helper.make_tensor(n, TensorProto.FLOAT, a.shape, a.ravel()) for n, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    x = rng.standard_normal(x_shape).astype(np.float32)
    if batch_first:  # ONNX Runtime refuses layout 1: ONNX's reference implementation instead
        from onnx.reference import ReferenceEvaluator
        want = ReferenceEvaluator(model).run(None, {"x": x})
    else:
        want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = Backend.prepare(model).run([x])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode,padding,align", [
    ("bilinear", "zeros", 0), ("bilinear", "border", 1), ("nearest", "reflection", 0),
    ("bicubic", "reflection", 1), ("bicubic", "zeros", 0), ("nearest", "border", 1),
])
def test_grid_sample_of_a_convolutions_output_agrees_with_onnx_runtime(mode, padding, align):
    """GridSample reading a convolution's output (a tensor of the convolutions' layouts) at a grid
    computed in the model, points inside and outside the input (the padding rule), 2 images."""
    rng = np.random.default_rng(29)
    inits = {"w": rng.standard_normal([4, 3, 3, 3]).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Tanh", ["g"], ["t"]),
             helper.make_node("Mul", ["t", "spread"], ["grid"]),
             helper.make_node("GridSample", ["c", "grid"], ["y"], mode=mode, padding_mode=padding, align_corners=align)]
    model = model_of(nodes, {"x": [2, 3, 7, 9], "g": [2, 5, 6, 2]}, {**inits, "spread": np.float32([1.3, 1.2])}, opset=16)
    feeds = {"x": rng.standard_normal([2, 3, 7, 9]).astype(np.float32),
             "g": rng.standard_normal([2, 5, 6, 2]).astype(np.float32) * 1.5}
    got = agrees_with_ort(model, feeds, rtol=1e-4, atol=1e-4)
    assert got.shape == (2, 4, 5, 6)


@pytest.mark.parametrize("op,x,attrs", [
    ("MaxPool", [1, 2, 6, 7, 8], dict(kernel_shape=[2, 3, 2], strides=[2, 1, 2], pads=[1, 0, 1, 0, 1, 1])),
    ("AveragePool", [2, 2, 5, 6, 7], dict(kernel_shape=[3, 2, 2], strides=[2, 2, 3], pads=[1, 0, 1, 1, 1, 1],
                                         ceil_mode=1, count_include_pad=1)),
    ("AveragePool", [1, 3, 8, 7, 6], dict(kernel_shape=[2, 2, 3], strides=[3, 2, 2], dilations=[2, 3, 1],
                                         pads=[1, 1, 0, 0, 1, 2], ceil_mode=1)),
    ("MaxPool", [1, 2, 7, 9, 5], dict(kernel_shape=[3, 3, 2], auto_pad="SAME_UPPER", strides=[2, 2, 1])),
    ("MaxPool", [2, 3, 9, 11], dict(kernel_shape=[3, 2], strides=[2, 1], dilations=[2, 3], pads=[1, 0, 1, 1])),
    ("AveragePool", [2, 3, 10], dict(kernel_shape=[3], strides=[2], dilations=[2], pads=[1, 2], count_include_pad=1)),
])
def test_pooling_of_any_rank_with_dilations_agrees_with_onnx_runtime(op, x, attrs):
    """MaxPool / AveragePool in 3-D (a video model's tensors), and dilated in 1-D and 2-D behind a
    convolution (its output in the convolutions' layouts), with pads, ceil_mode, auto_pad and
    count_include_pad."""
    rng = np.random.default_rng(31)
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node(op, ["r"], ["y"], **attrs)]
    inits = {}
    if len(x) == 4:  # behind a convolution: a tensor of the convolutions' layouts
        inits = {"w": rng.standard_normal([x[1], x[1], 3, 3]).astype(np.float32)}
        nodes = [helper.make_node("Conv", ["x", "w"], ["r"], pads=[1, 1, 1, 1]),
                 helper.make_node(op, ["r"], ["y"], **attrs)]
    model = model_of(nodes, {"x": x}, inits, opset=19)
    agrees_with_ort(model, {"x": rng.standard_normal(x).astype(np.float32)})


@pytest.mark.parametrize("alpha", [1.0, 1.702])
def test_swiglu_is_the_swish_of_the_gate_times_the_value(alpha):
    """SwiGLU (opset 28): Swish_alpha(A) * B by its definition (ONNX Runtime 1.32 has no opset 28);
    a B of another shape is refused in one line (SwiGLU does not broadcast)."""
    import stagecraft
    rng = np.random.default_rng(37)
    a, b = rng.standard_normal((2, 2, 5, 8)).astype(np.float32)
    node = helper.make_node("SwiGLU", ["a", "b"], ["y"], alpha=alpha)
    model = model_of([node], {"a": [2, 5, 8], "b": [2, 5, 8]}, {}, opset=28)
    (got,) = Backend.prepare(model).run([a, b])
    want = a.astype(np.float64) / (1 + np.exp(-alpha * a.astype(np.float64))) * b
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    bad = model_of([node], {"a": [2, 5, 8], "b": [2, 1, 8]}, {}, opset=28)
    with pytest.raises(stagecraft.Error) as info:
        Backend.prepare(bad)
    assert "same shape" in str(info.value) and "\n" not in str(info.value).strip()


@pytest.mark.parametrize("x,attrs,inputs", [
    ([1, 2, 12, 10], dict(mode="linear", antialias=1), dict(scales=[1, 1, 0.4, 0.55])),
    ([1, 2, 9, 8], dict(mode="cubic", antialias=1, cubic_coeff_a=-0.5), dict(sizes=[1, 2, 4, 5])),
    ([1, 3, 5, 6], dict(mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1), dict(scales=[1, 1, 1.6, 0.7])),
    ([2, 3, 6, 9], dict(mode="linear", coordinate_transformation_mode="half_pixel_symmetric"), dict(scales=[1, 1, 0.7, 1.5])),
    ([2, 3, 7], dict(mode="nearest", nearest_mode="round_prefer_ceil"), dict(sizes=[2, 3, 11])),
    ([1, 2, 5, 6], dict(mode="nearest", nearest_mode="ceil", coordinate_transformation_mode="align_corners"),
     dict(scales=[1, 1, 2.2, 1.5])),
    ([1, 2, 6, 8], dict(mode="linear", axes=[3, 2], keep_aspect_ratio_policy="not_larger"), dict(sizes=[5, 4])),
    ([1, 2, 4, 5, 6], dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=7.5),
     dict(roi=[0, 0, 0.2, -0.1, 0.3, 1, 1, 0.9, 1.2, 0.8], sizes=[1, 2, 3, 7, 4])),
])
def test_resize_in_every_mode_agrees_with_onnx_runtime(x, attrs, inputs):
    """Resize beyond PyTorch's modes (a resize_nd of a row-major tensor): antialias, cubic
    coefficients with exclude_outside, half_pixel_symmetric, nearest roundings, axes with
    keep_aspect_ratio_policy, tf_crop_and_resize's region and extrapolation; of a convolution's
    output where the input is 4-D."""
    rng = np.random.default_rng(41)
    inits, names = {}, ["r"]
    for slot in ("roi", "scales", "sizes"):
        if slot in inputs:
            inits[slot] = np.asarray(inputs[slot], dtype=np.float32 if slot != "sizes" else np.int64)
            names.append(slot)
        else:
            names.append("")
    nodes = [helper.make_node("Relu", ["x"], ["r"])]
    if len(x) == 4:
        nodes = [helper.make_node("Conv", ["x", "w"], ["r"], pads=[1, 1, 1, 1])]
    graph_inits = [helper.make_tensor(n, TensorProto.INT64 if n == "sizes" else TensorProto.FLOAT, a.shape, a.ravel())
                   for n, a in inits.items()]
    if len(x) == 4:
        w = rng.standard_normal([x[1], x[1], 3, 3]).astype(np.float32)
        graph_inits.append(helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel()))
    nodes.append(helper.make_node("Resize", names, ["y"], **attrs))
    graph = helper.make_graph(nodes, "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=graph_inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    agrees_with_ort(model, {"x": rng.standard_normal(x).astype(np.float32)})


def test_empty_parts_of_splits_and_concatenations_add_nothing():
    """A Split with an empty part (a rotary embedding over the whole head leaves nothing unrotated)
    and a Concat of it, and of an empty constant (a causal convolution without past state), give
    the other parts as ONNX Runtime does; an op other than Concat reading the empty part is refused
    in one line."""
    import stagecraft
    rng = np.random.default_rng(43)
    graph_inits = [helper.make_tensor("sizes", TensorProto.INT64, [2], [8, 0]),
                   helper.make_tensor("none", TensorProto.FLOAT, [2, 3, 0], [])]
    nodes = [helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=2),
             helper.make_node("Tanh", ["a"], ["t"]),
             helper.make_node("Concat", ["none", "t", "b"], ["y"], axis=2)]
    graph = helper.make_graph(nodes, "empty", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=graph_inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    agrees_with_ort(model, {"x": rng.standard_normal([2, 3, 8]).astype(np.float32)})
    nodes[2] = helper.make_node("Relu", ["b"], ["y"])
    graph = helper.make_graph(nodes, "empty", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=graph_inits)
    with pytest.raises(stagecraft.Error) as info:
        Backend.prepare(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    assert "empty slice" in str(info.value) and "\n" not in str(info.value).strip()


def rotary_reference(x, cos, sin, interleaved, dim, heads=None):
    """ONNX's RotaryEmbedding by its definition (opset 23), in float64."""
    x = x.astype(np.float64)
    shape = x.shape
    x = x.transpose(0, 2, 1, 3) if x.ndim == 4 else x.reshape(shape[0], shape[1], heads, -1)
    dim = dim or x.shape[3]
    rot, rest = x[..., :dim], x[..., dim:]
    c, s = cos[:, :, None, :], sin[:, :, None, :]
    x1, x2 = (rot[..., 0::2], rot[..., 1::2]) if interleaved else (rot[..., :dim // 2], rot[..., dim // 2:])
    real, imag = c * x1 - s * x2, s * x1 + c * x2
    out = np.stack([real, imag], -1).reshape(rot.shape) if interleaved else np.concatenate([real, imag], -1)
    y = np.concatenate([out, rest], -1)
    return y.transpose(0, 2, 1, 3) if len(shape) == 4 else y.reshape(shape)


@pytest.mark.parametrize("rank,interleaved,dim,positions", [
    (4, 0, 0, False), (4, 1, 6, False), (3, 1, 0, True), (3, 0, 4, True),
])
def test_rotary_embedding_follows_its_definition(rank, interleaved, dim, positions):
    """RotaryEmbedding (opset 23) as its ONNX expansion: 4-D [B, heads, S, D] or 3-D with num_heads,
    halves or interleaved, the whole head or rotary_embedding_dim of it, caches per position or
    picked by constant position ids."""
    rng = np.random.default_rng(47)
    b, heads, s, d = 2, 3, 5, 8
    half = (dim or d) // 2
    x = rng.standard_normal([b, heads, s, d] if rank == 4 else [b, s, heads * d]).astype(np.float32)
    inits, inputs = [], ["x", "cos", "sin"]
    if positions:
        table_cos = rng.standard_normal([9, half]).astype(np.float32)
        table_sin = rng.standard_normal([9, half]).astype(np.float32)
        ids = rng.integers(0, 9, [b, s])
        cos, sin = table_cos[ids], table_sin[ids]
        inits = [helper.make_tensor("cos", TensorProto.FLOAT, table_cos.shape, table_cos.ravel()),
                 helper.make_tensor("sin", TensorProto.FLOAT, table_sin.shape, table_sin.ravel()),
                 helper.make_tensor("ids", TensorProto.INT64, ids.shape, ids.ravel())]
        inputs.append("ids")
    else:
        cos = rng.standard_normal([b, s, half]).astype(np.float32)
        sin = rng.standard_normal([b, s, half]).astype(np.float32)
        inits = [helper.make_tensor("cos", TensorProto.FLOAT, cos.shape, cos.ravel()),
                 helper.make_tensor("sin", TensorProto.FLOAT, sin.shape, sin.ravel())]
    attrs = dict(interleaved=interleaved, rotary_embedding_dim=dim)
    if rank == 3:
        attrs["num_heads"] = heads
    node = helper.make_node("RotaryEmbedding", inputs, ["y"], **attrs)
    graph = helper.make_graph([node], "rope", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    (got,) = Backend.prepare(model).run([x])
    want = rotary_reference(x, cos.astype(np.float64), sin.astype(np.float64), interleaved, dim, heads)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("past,bias,activation", [(False, False, "none"), (True, True, "silu"), (True, False, "swish")])
def test_causal_conv_with_state_follows_its_definition(past, bias, activation):
    """CausalConvWithState (opset 27, Mamba's): the past state (or zeros) joined before the input,
    a depthwise convolution of width k, the optional SiLU; the present state is the last k - 1
    positions. Against the definition written out in numpy."""
    rng = np.random.default_rng(53)
    b, c, length, k = 2, 4, 7, 3
    x = rng.standard_normal([b, c, length]).astype(np.float32)
    w = rng.standard_normal([c, 1, k]).astype(np.float32)
    bias_v = rng.standard_normal([c]).astype(np.float32)
    state = rng.standard_normal([b, c, k - 1]).astype(np.float32)
    inits = [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel())]
    if bias:
        inits.append(helper.make_tensor("bias", TensorProto.FLOAT, bias_v.shape, bias_v))
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))]
    names = ["x", "w", "bias" if bias else ""]
    if past:
        names.append("state")
        ins.append(helper.make_tensor_value_info("state", TensorProto.FLOAT, list(state.shape)))
    node = helper.make_node("CausalConvWithState", names, ["y", "present"], activation=activation)
    graph = helper.make_graph([node], "causal", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                                                      helper.make_tensor_value_info("present", TensorProto.FLOAT, None)],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 27)])
    got_y, got_state = Backend.prepare(model).run([x, state] if past else [x])
    padded = np.concatenate([state if past else np.zeros_like(state), x], axis=2).astype(np.float64)
    want = np.stack([sum(padded[:, :, t + j] * w[:, 0, j] for j in range(k)) for t in range(length)], axis=2)
    if bias:
        want += bias_v[None, :, None]
    if activation != "none":
        want = want / (1 + np.exp(-want))
    np.testing.assert_allclose(got_y, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got_state, padded[:, :, -(k - 1):].astype(np.float32))


def test_mod_with_the_divisors_sign_and_transpose_by_default_agree_with_numpy():
    """Mod with fmod 0 on floats (Python's %: the divisor's sign) at mixed signs, zeros, NaN and
    infinities, as numpy.mod gives them; Transpose without perm reverses the axes."""
    x = np.asarray([[5.5, -5.5, 5.5, -5.5, 0.0, 3.0, -3.0, np.inf, np.nan, 4.0, -2.0, 7.0]], np.float32)
    y = np.asarray([[2.0, 2.0, -2.0, -2.0, 3.0, np.inf, np.inf, 2.0, 1.0, 0.0, 0.5, -np.inf]], np.float32)
    nodes = [helper.make_node("Mod", ["x", "y"], ["m"], fmod=0), helper.make_node("Transpose", ["m"], ["y2"])]
    graph = helper.make_graph(nodes, "mod", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 12]) for n in "xy"],
                              [helper.make_tensor_value_info("y2", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    (got,) = Backend.prepare(model).run([x, y])
    with np.errstate(invalid="ignore", divide="ignore"):
        want = np.mod(x, y).T
    assert got.shape == (12, 1)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[~np.isnan(got)], want[~np.isnan(want)], rtol=1e-6)
