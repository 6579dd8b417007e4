"""What the ONNX op tests share: a model of a few nodes, and its outputs through stagecraft
compared with ONNX Runtime's (or ONNX's reference evaluator's, for ops ONNX Runtime lacks)."""
from __future__ import annotations

from typing import Any, Dict, Iterable, Optional, Union

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from stagecraft.onnx_backend import Backend


def model_of(nodes: list, inputs: Dict[str, list], outputs: Union[Iterable[str], Dict[str, int]] = ("y",),
             initializers: Optional[Dict[str, np.ndarray]] = None, opset: int = 17) -> Any:
    """A model of `nodes` reading float `inputs` ({name: shape}) and `initializers` ({name: array},
    any type); `outputs` are names (float) or {name: ONNX element type}."""
    typed = outputs if isinstance(outputs, dict) else {n: TensorProto.FLOAT for n in outputs}
    graph = helper.make_graph(
        nodes, "ops", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, t, None) for n, t in typed.items()],
        initializer=[numpy_helper.from_array(np.asarray(a), n) for n, a in (initializers or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def agrees(model: Any, feeds: Dict[str, np.ndarray], reference: bool = False, rtol: float = 1e-4,
           atol: float = 1e-5, exact: bool = False) -> list:
    """Runs `model` on `feeds` through stagecraft and the other engine; asserts every output has
    the other's shape, finite values and agrees (exactly, and in type, with `exact`)."""
    if reference:
        want = ReferenceEvaluator(model).run(None, feeds)
    else:
        import onnxruntime as ort

        want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = Backend.prepare(model).run(list(feeds.values()))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        if exact:
            assert g.dtype == w.dtype  # integer outputs come back as their ONNX type
            np.testing.assert_array_equal(g, w)
        else:
            assert np.all(np.isfinite(g))
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return list(got)
