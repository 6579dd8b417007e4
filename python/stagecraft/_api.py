"""The user-facing API: Model, Schedule, Session, schedule(), networks(), backends() (bench()
and calibrate() are in _tools.py).

Every call that computes releases the GIL (loading an int8 model, searching, building a plan,
running, timing), so several sessions can run on several threads at once.
"""

from __future__ import annotations

import collections
import html
import os
import threading
from typing import (Any, Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple,
                    Union)

import numpy as np

from . import _stagecraft as _core
from ._errors import FormatError, InputError, UsageError
from ._progress import ProgressArg, progress_for

__all__ = [
    "TensorInfo",
    "Model",
    "Stage",
    "Schedule",
    "Session",
    "load",
    "schedule",
    "networks",
    "backends",
]

PathLike = Union[str, "os.PathLike[str]"]
ModelLike = Union["Model", PathLike]
ScheduleLike = Union[str, "Schedule", "os.PathLike[str]"]

STRATEGIES = ("sequential", "greedy", "dp")
DTYPES = ("f32", "f16", "int8")


class TensorInfo(NamedTuple):
    """A graph input or output as ``Session.run`` takes or returns it."""

    name: str
    """Value name in the graph: for inputs of ONNX models the ONNX input name; outputs are named
    after the op that produces them (an ONNX model's output names are not kept)."""
    shape: Tuple[int, ...]
    """Dimensions (NCHW for images, NC for logits)."""
    dtype: str
    """NumPy dtype of the arrays run() takes and returns: always ``"float32"`` (an int8 or f16
    graph converts at its edges)."""
    graph_dtype: str
    """Element type of the value inside the graph (``f32``, ``f16``, ``u8``, ``i8``)."""


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
            raise UsageError(f"--dtype: unknown element type '{dtype}' (known: f32, f16, int8)")
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

    @property
    def name(self) -> str:
        """The graph's name (the network name, or the ONNX graph's)."""
        return self._core.name

    @property
    def source(self) -> str:
        """What the model was loaded from (network name or file path)."""
        return self._core.spec

    @property
    def num_ops(self) -> int:
        """Ops of the inference graph."""
        return self._core.num_ops

    @property
    def dtype(self) -> str:
        """Element type the graph computes in: ``f32``, ``f16`` or ``int8``."""
        return self._core.dtype

    @property
    def batch(self) -> int:
        """Batch size (first dimension of the first input)."""
        return self.inputs[0].shape[0]

    @property
    def hash(self) -> str:
        """Content hash of the graph (recorded in schedule files)."""
        return self._core.hash

    @property
    def inputs(self) -> List[TensorInfo]:
        """Graph inputs, in the order run() takes them."""
        return _infos(self._core.inputs)

    @property
    def outputs(self) -> List[TensorInfo]:
        """Graph outputs, in the order run() returns them."""
        return _infos(self._core.outputs)

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


# ---- Schedules ---------------------------------------------------------------------------------


class Stage(NamedTuple):
    """One stage of a schedule."""

    number: int
    """1-based position in the schedule (as in the stage table)."""
    kind: str
    """``"concurrent"`` (groups on separate streams) or ``"merge"`` (same-input convolutions run
    as one)."""
    groups: Tuple[Tuple[str, ...], ...]
    """Op names per group: each group runs in order on its own stream; for a merge, one group per
    merged convolution."""
    predicted_ms: float
    """The cost model's latency of the stage."""

    @property
    def ops(self) -> Tuple[str, ...]:
        """Every op of the stage, in group order."""
        return tuple(op for group in self.groups for op in group)


class Schedule:
    """A schedule: a sequence of stages of a model's ops, with what it was made for (network,
    batch, dtype, device, cost model, search settings).

    Made by ``stagecraft.schedule(...)``, ``Schedule.from_yaml(path)`` or ``Session.schedule``.
    ``summary()`` is the table ``stagecraft show`` prints; in a notebook the schedule renders as
    an HTML table.
    """

    def __init__(self, core: Any) -> None:
        self._core = core

    @classmethod
    def from_yaml(cls, path: PathLike, model: Optional[ModelLike] = None,
                  **load_args: Any) -> "Schedule":
        """Loads a schedule file (``stagecraft schedule -o`` or ``Schedule.to_yaml``) and checks
        it against its graph: `model`, or else the network, batch and dtype the file names
        (int8: calibrated now unless ``calibration=`` is given). Raises ScheduleError for a file
        made for another graph, batch or op set, or a malformed one."""
        path = _fspath(path)
        if model is None:
            meta = _core.read_schedule_meta(path)
            if meta["network"] not in networks():
                raise UsageError(f"{path}: made for the graph '{meta['network']}', which is not a "
                                 f"built-in network: pass its model "
                                 f"(Schedule.from_yaml(path, model))")
            args = {"batch": meta["batch"], "dtype": meta["dtype"]}
            args.update(load_args)
            model = Model(meta["network"], **args)
        else:
            model = _model(model, load_args)
        return cls(_core.load_schedule(path, model._core))

    @classmethod
    def from_yaml_text(cls, text: str, model: ModelLike) -> "Schedule":
        """A schedule from YAML text, checked against `model`."""
        m = _model(model, {})
        return cls(_core.schedule_from_text(text, m._core, "<string>"))

    def to_yaml(self, path: Optional[PathLike] = None) -> str:
        """The schedule as YAML (the CLI's format); also written to `path` when given."""
        if path is not None:
            self._core.save(_fspath(path))
        return self._core.to_yaml_text()

    def to_dot(self) -> str:
        """Graphviz text of the graph with stages as clusters."""
        return self._core.dot_text()

    @property
    def model(self) -> Model:
        """The model the schedule is for."""
        return Model._wrap(self._core.model)

    @property
    def stages(self) -> List[Stage]:
        """The stages in execution order."""
        return [Stage(i + 1, kind, tuple(tuple(g) for g in groups), ms)
                for i, (kind, groups, ms) in enumerate(self._core.stages)]

    @property
    def meta(self) -> Dict[str, Any]:
        """What the schedule is for and how it was made: network, graph_hash, num_ops, batch,
        dtype, device, cost_model, strategy, mode, r, s, pruned, search_budget, exhaustive,
        converged, predicted_ms, search_seconds, layout."""
        return dict(self._core.meta)

    @property
    def stats(self) -> Dict[str, Any]:
        """Counters of the search that made it (seconds, blocks, parts, states, transitions,
        stage_keys, splits, measured, cache_hits; on a measured model also measured_by_search,
        estimated, converged, out_of_budget, bound_ms, from_cache — the schedule cache file when
        no search ran — and summary, the line the CLI prints); empty for a loaded schedule."""
        return dict(self._core.stats)

    @property
    def predicted_ms(self) -> float:
        """Sum of the stages' predicted latencies."""
        return self._core.meta["predicted_ms"]

    @property
    def strategy(self) -> str:
        """``sequential``, ``greedy`` or ``dp``."""
        return self._core.meta["strategy"]

    def summary(self) -> str:
        """The summary lines and the stage table, as ``stagecraft show`` prints them."""
        return self._core.summary_text() + self._core.table_text()

    def __len__(self) -> int:
        return len(self._core.stages)

    def __iter__(self) -> Iterator[Stage]:
        return iter(self.stages)

    def __repr__(self) -> str:
        m = self.meta
        return (f"<stagecraft.Schedule {m['network']} {m['strategy']}: {len(self)} stages, "
                f"predicted {m['predicted_ms']:.3f} ms ({m['cost_model']})>")

    def _repr_html_(self) -> str:
        m = self.meta
        rows = []
        for st in self.stages:
            if st.kind == "merge":
                groups = "merge " + " + ".join("[" + " &gt; ".join(map(html.escape, g)) + "]"
                                               for g in st.groups)
            else:
                groups = " | ".join("[" + " &gt; ".join(map(html.escape, g)) + "]"
                                    for g in st.groups)
            rows.append(f"<tr><td>{st.number}</td><td>{st.kind}</td><td>{len(st.ops)}</td>"
                        f"<td>{st.predicted_ms:.4f}</td><td style='text-align:left'>{groups}</td>"
                        f"</tr>")
        head = html.escape(self._core.summary_text()).replace("\n", "<br>")
        return (f"<div><p><b>stagecraft schedule</b>: {head}</p>"
                "<table><thead><tr><th>stage</th><th>kind</th><th>ops</th><th>predicted ms</th>"
                "<th>groups (one per stream; &gt; = in order)</th></tr></thead><tbody>"
                + "".join(rows) + "</tbody></table></div>")


def _cost_model(cost_model: Optional[str]) -> str:
    return cost_model or ""


def schedule(model: ModelLike, strategy: str = "dp", *, mode: str = "both", r: int = 3,
             s: int = 8, unpruned: bool = False, max_part_transitions: float = 2e5,
             search_budget: float = 40.0, exhaustive: bool = False,
             cost_model: Optional[str] = None, backend: Optional[str] = None,
             layout: Optional[str] = None, cache_dir: Optional[PathLike] = None,
             streams: int = 8, batch: Optional[int] = None, input_size: Optional[int] = None,
             seed: Optional[int] = None, dtype: Optional[str] = None,
             calibration: Optional[PathLike] = None, calibration_samples: Optional[int] = None,
             progress: ProgressArg = None) -> Schedule:
    """Finds a schedule of `model` (a Model, network name, graph file or ONNX model), like
    ``stagecraft schedule``.

    - `strategy`: ``"sequential"`` (one op per stage), ``"greedy"`` (wavefront of ready ops) or
      ``"dp"`` (dynamic programming over endings; `mode` ``both`` | ``merge`` | ``concurrent``,
      at most `r` ops per group and `s` groups per stage, `unpruned` for small graphs only).
    - `search_budget`: dp on a measured model: seconds for the whole search, measurements
      included (0: no limit). Single ops are measured first, every other candidate stage is
      estimated from them, and only the stages that can change the answer are measured; when the
      budget ends, the best schedule found so far is returned (``Schedule.stats`` says whether the
      search converged). `exhaustive`: go on measuring every stage that could still win (the
      unbounded search; hours on NASNet-A Large with ``search_budget=0``). A search is kept in the
      schedule cache beside the profile cache: the same search again returns at once.
    - `cost_model`: ``"measured"`` (stages timed on `backend`, cached under `cache_dir`) or
      ``"analytic:v100"`` / ``"analytic:a100"`` / ``"analytic:h100"``. Default: measured when a
      `backend` is given, else ``analytic:v100`` (as the CLI).
    - `layout`: ``"auto"`` chooses a layout per tensor by measuring on `backend` first (the search
      then measures in it and the schedule records it); a layout name forces one.
    - `progress`: None shows progress after a second (tqdm when installed), False is quiet, a
      callable receives ``(phase, done, total, seconds, text)``. Ctrl-C stops the search with
      KeyboardInterrupt. The GIL is released while searching.
    """
    m = _model(model, dict(batch=batch, input_size=input_size, seed=seed, dtype=dtype,
                           calibration=calibration, calibration_samples=calibration_samples,
                           progress=progress))
    with progress_for(progress) as callback:
        core = _core.search(m._core, strategy, mode, int(r), int(s), bool(unpruned),
                            float(max_part_transitions), float(search_budget), bool(exhaustive),
                            _cost_model(cost_model), backend or "",
                            _fspath(cache_dir) if cache_dir else "", layout or "", int(streams),
                            callback)
    return Schedule(core)


# ---- Sessions ----------------------------------------------------------------------------------

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
    tensor by measuring), or ``nchw`` | ``nhwc`` | ``nChw8c`` | ``nChw16c``. ``dtype="int8"``
    quantises with ``calibration`` (a file from ``stagecraft.calibrate``) or calibrates now on
    ``calibration_samples`` generated inputs. ``winograd=False`` runs every convolution on oneDNN
    (default: f32 stride-1 3x3, 1xK and Kx1 convolutions by Winograd's algorithm where oneDNN has
    only direct AVX2 kernels, in tiles F(2x2,3x3) and F(2,K) that round about as a direct kernel
    does); ``winograd="fast"`` takes the larger tiles (faster, each layer rounding 5-20x more).

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
                 max_shapes: int = 4, progress: ProgressArg = None) -> None:
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
        def make(model: Model, callback: Any) -> Any:
            return _core.Session(model._core, name, given, mode, int(r), int(s), bool(unpruned),
                                 float(max_part_transitions), float(search_budget),
                                 bool(exhaustive), _cost_model(cost_model),
                                 backend, _fspath(cache_dir) if cache_dir else "",
                                 layout or "", int(streams), bool(tf32), bool(stream_mode),
                                 winograd is not False, winograd == "fast", callback)

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

    @property
    def backend(self) -> str:
        """``cpu`` or ``cuda``."""
        return self._core.backend

    @property
    def device(self) -> str:
        """Device fingerprint of the backend (keys profile caches and schedules)."""
        return self._core.device

    @property
    def description(self) -> str:
        """The device in words (CPU model and threads, or GPU name)."""
        return self._core.description

    @property
    def plan(self) -> str:
        """One line about the execution plan: kernels, streams, events, layouts, memory."""
        return self._core.plan_summary

    def plan_listing(self) -> str:
        """The whole plan, one line per kernel (stage, stream, events, op, implementation) after
        its layout summary: the text `stagecraft run --plan-listing FILE` writes for the same
        model and settings."""
        return self._core.plan_listing()

    def _arrays(self, x: InputsArg) -> List[np.ndarray]:
        infos = self._inputs
        if isinstance(x, np.ndarray):
            items = [x]
            if len(infos) != 1:
                raise InputError(f"the graph takes {len(infos)} inputs "
                                 f"({', '.join(t.name for t in infos)}): pass a list or a dict")
        elif isinstance(x, Mapping):
            names = [t.name for t in infos]
            unknown = [k for k in x if k not in names]
            if unknown:
                raise InputError(f"unknown input '{unknown[0]}' (the graph's inputs: "
                                 f"{', '.join(names)})")
            missing = [n for n in names if n not in x]
            if missing:
                raise InputError(f"missing input '{missing[0]}'")
            items = [x[n] for n in names]
        elif isinstance(x, (list, tuple)):
            items = list(x)
            if len(items) != len(infos):
                raise InputError(f"the graph takes {len(infos)} input(s), got {len(items)}")
        else:
            raise InputError(f"inputs: expected a numpy.ndarray, a list or a dict of them, got "
                             f"{type(x).__name__}")
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
    def shapes(self) -> List[Tuple[Tuple[int, ...], ...]]:
        """The input shapes this session holds plans for, least recently used first."""
        with self._shapes_lock:
            return list(self._by_shapes)

    def time(self, iters: int = 20, warmup: int = 3) -> Dict[str, float]:
        """Latency of `iters` runs after `warmup` (on generated inputs, as ``stagecraft run``):
        median_ms, p10_ms, p90_ms, images_per_s."""
        (ms,) = _core.time_sessions([self._core], int(warmup), int(iters), None)
        median, p10, p90 = _core.summarise(ms)
        return {"median_ms": median, "p10_ms": p10, "p90_ms": p90,
                "images_per_s": self._model.batch * 1e3 / median}

    def __repr__(self) -> str:
        sch = self._core.schedule.meta
        return (f"<stagecraft.Session {self._model.name} on {self.backend}: {sch['strategy']} "
                f"schedule, {len(self._core.schedule.stages)} stages>")


# ---- Bench and calibration ---------------------------------------------------------------------


def networks() -> Dict[str, str]:
    """The built-in networks: name -> one-line description."""
    return dict(_core.networks())


def backends() -> List[str]:
    """Backends this build has (``cpu``, and ``cuda`` when built with CUDA)."""
    return list(_core.backends())
