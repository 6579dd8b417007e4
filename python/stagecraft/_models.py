"""Models: loading a network, graph file or ONNX model (Model, load), the graph's inputs and
outputs (TensorInfo), and what this build has (networks(), backends()). Part of the user-facing
API that _api.py gathers.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _stagecraft as _core
from ._core_attr import CoreAttr
from ._errors import UsageError
from ._progress import ProgressArg, progress_for

PathLike = Union[str, "os.PathLike[str]"]
ModelLike = Union["Model", PathLike]

DTYPES = ("f32", "f16", "bf16", "int8")


class TensorInfo(NamedTuple):
    """A graph input or output as ``Session.run`` takes or returns it."""

    name: str
    """Value name in the graph: for inputs of ONNX models the ONNX input name; outputs are named
    after the op that produces them (an ONNX model's output names are not kept)."""
    shape: Tuple[int, ...]
    """Dimensions (NCHW for images, NC for logits)."""
    dtype: str
    """NumPy dtype of the arrays run() takes and returns: always ``"float32"`` (an int8, f16 or
    bf16 graph converts at its edges)."""
    graph_dtype: str
    """Element type of the value inside the graph (``f32``, ``f16``, ``bf16``, ``u8``, ``i8``)."""


def _infos(raw: Sequence[Tuple[str, Tuple[int, ...], str]]) -> List[TensorInfo]:
    return [TensorInfo(name, tuple(shape), "float32", dtype) for name, shape, dtype in raw]


def _fspath(path: PathLike) -> str:
    return os.fspath(path)


# ---- Models ------------------------------------------------------------------------------------


class Model:
    """A network ready for stagecraft: the inference graph (batch norms folded, activations fused,
    quantised for ``dtype="int8"``) and its weights.

    ``source`` is a built-in network name (``stagecraft.networks()``), a graph file (``.yaml``) or
    an ONNX model (``.onnx``; its initializers are the weights). Built-in networks and YAML graphs
    get deterministic random weights from ``seed`` (the same as the ``stagecraft`` command's).

    ``input_shapes`` (ONNX models): the shapes of the inputs, in order; they fill the dimensions a
    model exported with dynamic axes leaves open (and may change the batch).

    ``constant_inputs`` (ONNX models): values of graph inputs, by name, fixed at load: each is
    imported as if it were an initializer, and the model no longer takes it. A model whose
    convolution weights or resize scales are graph inputs is refused with ``ConstantInputError``
    (naming them in ``.inputs``) until they are bound here.

    >>> m = stagecraft.Model("squeezenet1_1", batch=1)
    >>> m.inputs
    [TensorInfo(name='data', shape=(1, 3, 224, 224), dtype='float32', graph_dtype='f32')]
    """

    def __init__(self, source: PathLike, *, batch: Optional[int] = None,
                 input_size: Optional[int] = None, seed: int = 1, dtype: str = "f32",
                 calibration: Optional[PathLike] = None, calibration_samples: int = 8,
                 input_shapes: Optional[Sequence[Sequence[int]]] = None,
                 constant_inputs: Optional[Dict[str, Any]] = None,
                 progress: ProgressArg = None) -> None:
        spec = _fspath(source)
        if not spec:
            raise UsageError("name a network, a graph file or an ONNX model")
        if dtype not in DTYPES:
            raise UsageError(f"--dtype: unknown element type '{dtype}' (known: f32, f16, bf16, int8)")
        shapes = [[int(d) for d in s] for s in (input_shapes or [])]
        bound = {str(k): np.ascontiguousarray(v, dtype=np.float32) for k, v in (constant_inputs or {}).items()}
        with progress_for(progress) as callback:
            self._core = _core.load_model(spec, int(batch or 0), int(input_size or 0), int(seed),
                                          dtype, _fspath(calibration) if calibration else "",
                                          int(calibration_samples), shapes, bound, callback)
        # What loads it again for other input shapes (Session's dynamic shapes).
        self._reload = dict(batch=batch, input_size=input_size, seed=seed, dtype=dtype,
                            calibration=calibration, calibration_samples=calibration_samples,
                            constant_inputs=bound or None)

    @classmethod
    def _wrap(cls, core: Any) -> "Model":
        m = cls.__new__(cls)
        m._core = core
        m._reload = None
        return m

    def _with_input_shapes(self, shapes: Sequence[Sequence[int]]) -> "Model":
        """The same source loaded for other input shapes (an ONNX model's dynamic axes)."""
        args = dict(self._reload)
        args["batch"] = args["input_size"] = None  # the shapes give them
        return Model(self.source, input_shapes=shapes, **args)

    @property
    def dynamic(self) -> bool:
        """Whether the model can be loaded again for other input shapes (an ONNX file: its symbolic
        dimensions and the batch come from the shapes given)."""
        return self._reload is not None and self.source.lower().endswith(".onnx")

    name = CoreAttr[str]("name", "The graph's name (the network name, or the ONNX graph's).")

    source = CoreAttr[str]("spec", "What the model was loaded from (network name or file path).")

    num_ops = CoreAttr[int]("num_ops", "Ops of the inference graph.")

    dtype = CoreAttr[str](
        "dtype", "Element type the graph computes in: ``f32``, ``f16``, ``bf16`` or ``int8``."
    )

    @property
    def batch(self) -> int:
        """Batch size (first dimension of the first input)."""
        return self.inputs[0].shape[0]

    hash = CoreAttr[str]("hash", "Content hash of the graph (recorded in schedule files).")

    @property
    def inputs(self) -> List[TensorInfo]:
        """Graph inputs, in the order run() takes them."""
        return _infos(self._core.inputs)

    @property
    def outputs(self) -> List[TensorInfo]:
        """Outputs, in the order run() returns them: the graph's, or for an ONNX model ending in a
        data-dependent tail (``tail``) the model's own, -1 where the data decides a dimension."""
        return _infos(self._core.outputs)

    @property
    def tail(self) -> str:
        """An ONNX model's nodes evaluated on the host after each run because their output shapes
        depend on the data (NonZero, NonMaxSuppression and what reads them), in one line; ``""``
        when there are none."""
        return self._core.tail

    def to_yaml(self, path: PathLike) -> None:
        """Writes the inference graph as a stagecraft graph file."""
        self._core.save_yaml(_fspath(path))

    def __repr__(self) -> str:
        ins = ", ".join(f"{t.name}{list(t.shape)}" for t in self.inputs)
        return f"<stagecraft.Model {self.name} ({self.dtype}, {self.num_ops} ops; inputs {ins})>"


def load(source: PathLike, **kwargs: Any) -> Model:
    """``Model(source, **kwargs)``: loads a built-in network, a graph file or an ONNX model."""
    return Model(source, **kwargs)


def _model(model: ModelLike, kwargs: Dict[str, Any]) -> Model:
    """The Model to use: `model` itself, or one loaded with the loading arguments in `kwargs`
    (batch, input_size, seed, dtype, calibration, calibration_samples)."""
    keys = ("batch", "input_size", "seed", "dtype", "calibration", "calibration_samples", "input_shapes")
    load_args = {k: kwargs[k] for k in keys if kwargs.get(k) is not None}
    if isinstance(model, Model):
        given = {k: v for k, v in load_args.items() if not (k == "dtype" and v == model.dtype)
                 and not (k == "batch" and v == model.batch)}
        if given:
            raise UsageError(f"{', '.join(sorted(given))}: the model is already loaded; pass "
                             f"them to stagecraft.Model(...) instead")
        return model
    if not isinstance(model, (str, os.PathLike)):
        raise TypeError(f"model: expected a Model, a network name or a file path, got "
                        f"{type(model).__name__}")
    return Model(model, progress=kwargs.get("progress"), **load_args)


# ---- What this build has -----------------------------------------------------------------------


def networks() -> Dict[str, str]:
    """The built-in networks: name -> one-line description."""
    return dict(_core.networks())


def backends() -> List[str]:
    """Backends this build has (``cpu``, and ``cuda`` when built with CUDA)."""
    return list(_core.backends())
