"""A small ONNX model whose output shape the data decides, for the server tests (the same model as
tests/support/tail_model.h): x [1, 4, 6] -> y = NonZero(Relu(x)[0] > 0.5) with a batch axis in
front, int64 [1, 2, count] (what in-graph NMS does to a detector's output)."""
import numpy as np
import onnx
from onnx import TensorProto, helper


def tail_model() -> onnx.ModelProto:
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Gather", ["r", "first"], ["sample"], axis=0),
             helper.make_node("Greater", ["sample", "half"], ["mask"]),
             helper.make_node("NonZero", ["mask"], ["nz"]),
             helper.make_node("Unsqueeze", ["nz", "axis0"], ["y"])]
    graph = helper.make_graph(
        nodes, "tail", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [1, 2, "count"])],
        initializer=[onnx.numpy_helper.from_array(np.array(0, np.int64), "first"),
                     onnx.numpy_helper.from_array(np.array(0.5, np.float32), "half"),
                     onnx.numpy_helper.from_array(np.array([0], np.int64), "axis0")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def tail_input(count: int, rng: np.random.Generator) -> np.ndarray:
    """One sample [1, 4, 6] with `count` elements above 0.5."""
    x = np.full((1, 4, 6), 0.1, np.float32)
    x.reshape(-1)[rng.choice(24, count, replace=False)] = 0.9
    return x


def tail_reference(x: np.ndarray) -> np.ndarray:
    """y of one sample x [1, 4, 6], as numpy computes it."""
    return np.stack(np.nonzero(x[0] > 0.5))[None]
