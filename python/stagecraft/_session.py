"""Sessions: a model compiled for a backend with a schedule, run on NumPy arrays (Session). Part
of the user-facing API that _api.py gathers.
"""

from __future__ import annotations

import collections
import os
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _stagecraft as _core
from ._core_attr import CoreAttr
from ._errors import FormatError, InputError, UsageError
from ._inputs import in_input_order
from ._models import Model, ModelLike, PathLike, TensorInfo, _fspath, _model
from ._progress import ProgressArg, progress_for
from ._schedules import STRATEGIES, Schedule, ScheduleLike, _cost_model

InputsArg = Union[np.ndarray, Sequence[np.ndarray], Mapping[str, np.ndarray]]


class Session:
    """A model compiled for a backend with a schedule, ready to run (like an ONNX Runtime
    ``InferenceSession``).

    ``model``: a Model, a built-in network name (``"inception_v3"``), a graph file (``.yaml``) or
    an ONNX model (``.onnx``). Loading arguments (``batch``, ``dtype``, ``input_size``, ``seed``,
    ``calibration``, ``calibration_samples``, ``input_shapes``) apply when ``model`` is not a Model
    yet.

    ``schedule``: ``"dp"`` (default: searched now with the session's cost model — measured on the
    backend, results cached in ``cache_dir``), ``"greedy"``, ``"sequential"``, a Schedule, or a
    schedule file (``.yaml``). ``layout``: None (the backend's preferred), ``"auto"`` (chosen per
    tensor by measuring), or ``nchw`` | ``nhwc`` | ``nChw8c`` | ``nChw16c``. ``dtype="bf16"``
    computes convolutions, linear layers, matmuls and additions in bfloat16 on a CPU with
    AVX512_BF16 or AMX (UsageError elsewhere); ``dtype="int8"``
    quantises with ``calibration`` (a file from ``stagecraft.calibrate``) or calibrates now on
    ``calibration_samples`` generated inputs. ``winograd=False`` runs every convolution on oneDNN
    (default: f32 stride-1 3x3, 1xK and Kx1 convolutions by Winograd's algorithm where oneDNN has
    only direct AVX2 kernels, in tiles F(2x2,3x3) and F(2,K) that round about as a direct kernel
    does); ``winograd="fast"`` takes the larger tiles (faster, each layer rounding 5-20x more).
    ``adapt_threads`` (CPU): while runs show another process holding cores, run kernels built for
    fewer threads, probing now and then whether every thread pays again (``limited_runs`` counts
    those runs); False keeps every thread on every run (bit-for-bit repeatable results).

    ``run(x)`` takes float32 arrays — one array, a list in ``inputs`` order, or a dict by input
    name — and returns a **list** of float32 arrays in ``outputs`` order. Wrong names, counts,
    shapes or dtypes raise InputError. An ONNX model answers other input shapes than the one it
    was opened with where the model allows them (dynamic axes, another batch): the first call with
    a new shape loads and plans the model for it (same settings; the schedule cache is shared), and
    the plans of the ``max_shapes`` most recent shapes are kept. A schedule given as a Schedule or
    file fits its own shape only. The GIL is released while running; one session runs one
    call at a time (calls from several threads wait for each other), several sessions run in
    parallel.

    >>> sess = stagecraft.Session("squeezenet1_1", schedule="greedy")
    >>> x = np.random.rand(*sess.inputs[0].shape).astype(np.float32)
    >>> (logits,) = sess.run(x)
    """

    def __init__(self, model: ModelLike, *, backend: str = "cpu", dtype: Optional[str] = None,
                 batch: Optional[int] = None, layout: Optional[str] = None,
                 schedule: ScheduleLike = "dp", cache_dir: Optional[PathLike] = None,
                 input_size: Optional[int] = None, seed: Optional[int] = None,
                 calibration: Optional[PathLike] = None,
                 calibration_samples: Optional[int] = None,
                 input_shapes: Optional[Sequence[Sequence[int]]] = None, mode: str = "both", r: int = 3,
                 s: int = 8, unpruned: bool = False, max_part_transitions: float = 2e5,
                 search_budget: float = 40.0, exhaustive: bool = False,
                 cost_model: Optional[str] = None, streams: int = 8, tf32: bool = False,
                 stream_mode: bool = False, winograd: Union[bool, str] = True,
                 max_shapes: int = 4, adapt_threads: bool = True, progress: ProgressArg = None) -> None:
        if int(max_shapes) < 1:
            raise UsageError(f"max_shapes: expected >= 1, got {max_shapes}")
        m = _model(model, dict(batch=batch, input_size=input_size, seed=seed, dtype=dtype,
                               calibration=calibration, calibration_samples=calibration_samples,
                               input_shapes=input_shapes,
                               progress=progress))
        given = None
        name = ""
        if isinstance(schedule, Schedule):
            given = schedule._core
        elif isinstance(schedule, (str, os.PathLike)):
            name = _fspath(schedule)
            if name not in STRATEGIES and not os.path.exists(name):
                raise UsageError(f"--schedule: '{name}' is neither a file nor one of sequential, "
                                 f"greedy, dp")
        else:
            raise TypeError(f"schedule: expected a strategy name, a Schedule or a file path, got "
                            f"{type(schedule).__name__}")
        if winograd not in (True, False, "fast"):
            raise UsageError(f"winograd: expected True, False or 'fast', got {winograd!r}")
        # One pipeline (backend, cost model, caches) for the plans of every input shape.
        pipeline = _core.Pipeline(mode, int(r), int(s), bool(unpruned), float(max_part_transitions),
                                  float(search_budget), bool(exhaustive), _cost_model(cost_model),
                                  backend, _fspath(cache_dir) if cache_dir else "", layout or "",
                                  int(streams), bool(tf32), bool(stream_mode), winograd is not False,
                                  winograd == "fast", bool(adapt_threads))

        def make(model: Model, callback: Any) -> Any:
            return _core.Session(model._core, name, given, pipeline, callback)

        with progress_for(progress) as callback:
            self._core = make(m, callback)
        self._make = make
        self._progress = progress
        self._model = m
        self._inputs = m.inputs
        self._outputs = m.outputs
        # Plans by input shapes (the one opened with first), most recently used last.
        self._dynamic = m.dynamic and given is None
        self._max_shapes = int(max_shapes)
        self._shapes_lock = threading.Lock()
        self._by_shapes: "collections.OrderedDict[Tuple[Tuple[int, ...], ...], Any]" = collections.OrderedDict()
        self._by_shapes[tuple(t.shape for t in self._inputs)] = self._core

    @property
    def model(self) -> Model:
        """The model this session runs."""
        return self._model

    @property
    def schedule(self) -> Schedule:
        """The schedule this session runs (found now, or the one given)."""
        return Schedule(self._core.schedule)

    @property
    def inputs(self) -> List[TensorInfo]:
        """Inputs: name, shape, dtype (float32) — the order run() takes a list in."""
        return list(self._inputs)

    @property
    def outputs(self) -> List[TensorInfo]:
        """Outputs: name, shape, dtype (float32) — the order run() returns them in."""
        return list(self._outputs)

    backend = CoreAttr[str]("backend", "``cpu`` or ``cuda``.")

    device = CoreAttr[str]("device", "Device fingerprint of the backend (keys profile caches and schedules).")

    description = CoreAttr[str]("description", "The device in words (CPU model and threads, or GPU name).")

    plan = CoreAttr[str](
        "plan_summary", "One line about the execution plan: kernels, streams, events, layouts, memory."
    )

    def plan_listing(self) -> str:
        """The whole plan, one line per kernel (stage, stream, events, op, implementation) after
        its layout summary: the text `stagecraft run --plan-listing FILE` writes for the same
        model and settings."""
        return self._core.plan_listing()

    def _arrays(self, x: InputsArg) -> List[np.ndarray]:
        infos = self._inputs
        items = in_input_order(x, [t.name for t in infos], InputError, "the graph")
        arrays = []
        for a, info in zip(items, infos):
            if not isinstance(a, np.ndarray):
                raise InputError(f"input '{info.name}': expected a numpy.ndarray, got "
                                 f"{type(a).__name__}")
            if a.dtype != np.float32:
                raise InputError(f"input '{info.name}': dtype {a.dtype}, expected float32 (use "
                                 f"x.astype(numpy.float32))")
            if tuple(a.shape) != info.shape and not self._dynamic:
                got = "x".join(map(str, a.shape)) or "scalar"
                raise InputError(f"input '{info.name}': shape {got} does not match the graph "
                                 f"input {'x'.join(map(str, info.shape))}")
            arrays.append(np.ascontiguousarray(a))
        return arrays

    def run(self, x: InputsArg) -> List[np.ndarray]:
        """Runs the model once on `x` (a float32 array, a list of them in ``inputs`` order, or a
        dict by input name) and returns the outputs as a list of float32 arrays in ``outputs``
        order. Releases the GIL while running."""
        arrays = self._arrays(x)
        return self._core_for(tuple(tuple(a.shape) for a in arrays)).run(arrays)

    def _core_for(self, shapes: Tuple[Tuple[int, ...], ...]) -> Any:
        """The plan for inputs of `shapes`: kept, or made now (an ONNX model's other shapes)."""
        with self._shapes_lock:
            core = self._by_shapes.get(shapes)
            if core is not None:
                self._by_shapes.move_to_end(shapes)
                return core
            try:
                model = self._model._with_input_shapes([list(s) for s in shapes])
            except FormatError as e:
                given = ", ".join("x".join(map(str, s)) for s in shapes)
                raise InputError(f"input shapes {given}: {e}") from None
            with progress_for(self._progress) as callback:
                core = self._make(model, callback)
            self._by_shapes[shapes] = core
            while len(self._by_shapes) > self._max_shapes:
                self._by_shapes.popitem(last=False)
            return core

    @property
    def limited_runs(self) -> int:
        """Runs made with kernels built for fewer threads while another process held cores
        (``adapt_threads``), over the plans of every input shape."""
        with self._shapes_lock:
            cores = list(self._by_shapes.values())
        return sum(int(c.limited_runs) for c in cores)

    @property
    def shapes(self) -> List[Tuple[Tuple[int, ...], ...]]:
        """The input shapes this session holds plans for, least recently used first."""
        with self._shapes_lock:
            return list(self._by_shapes)

    def time(self, iters: int = 20, warmup: int = 3) -> Dict[str, float]:
        """Latency of `iters` runs after `warmup` (on generated inputs, as ``stagecraft run``):
        median_ms, p10_ms, p90_ms, images_per_s. The plan's runs only: a model's data-dependent
        tail (``Model.tail``) runs on the host after them in run() and is not in these figures."""
        (ms,) = _core.time_sessions([self._core], int(warmup), int(iters), None)
        median, p10, p90 = _core.summarise(ms)
        return {"median_ms": median, "p10_ms": p10, "p90_ms": p90,
                "images_per_s": self._model.batch * 1e3 / median}

    def __repr__(self) -> str:
        sch = self._core.schedule.meta
        return (f"<stagecraft.Session {self._model.name} on {self.backend}: {sch['strategy']} "
                f"schedule, {len(self._core.schedule.stages)} stages>")

