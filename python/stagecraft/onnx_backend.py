"""stagecraft as an ONNX backend (``onnx.backend.base.Backend``), and ONNX's node conformance tests.

    import onnx, numpy as np
    from stagecraft.onnx_backend import Backend
    rep = Backend.prepare(onnx.load("model.onnx"))          # device "CPU" (or "CUDA")
    (y,) = rep.run([np.random.rand(1, 3, 224, 224).astype(np.float32)])

``node_test_results()`` runs the node tests the ``onnx`` package generates
(``onnx.backend.test.case.node.collect_testcases``) through this backend and says, case by case,
``pass``, ``refused`` (a stagecraft.Error of one line: the model or an op is outside what stagecraft
runs), ``wrong`` (outputs differ from ONNX's beyond the case's tolerances), ``error`` (any other
exception) or ``crash`` (the process died). Each case runs in a worker process, so a crash ends
only its case. ``scripts/onnx_conformance.py`` prints the table and keeps the list of refused
cases that the tests check (``python/tests/onnx_conformance_exclusions.txt``).

Needs the ``onnx`` package (``pip install onnx``); stagecraft itself does not.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import tempfile
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

try:
    import onnx
    from onnx import numpy_helper  # noqa: F401  (used through onnx.numpy_helper below)
    from onnx.backend.base import Backend as _OnnxBackend
    from onnx.backend.base import BackendRep as _OnnxBackendRep
except ImportError as _e:  # pragma: no cover - depends on the installation
    raise ImportError("stagecraft.onnx_backend needs the onnx package (pip install onnx)") from _e

from . import _api
from ._errors import ConstantInputError, Error

__all__ = ["Backend", "BackendRep", "node_test_cases", "node_test_results", "read_exclusions",
           "check_results", "STATUSES"]

STATUSES = ("pass", "refused", "wrong", "error", "crash")
_DEVICES = {"CPU": "cpu", "CUDA": "cuda"}


class BackendRep(_OnnxBackendRep):
    """A prepared model: ``run(inputs)`` takes float32 arrays in the graph's input order (or a dict
    by name) and returns a tuple of float32 arrays in its output order.

    A model that reads graph inputs where stagecraft plans with constants (a convolution's weights,
    a resize's scales: ``ConstantInputError``) is planned at ``run`` for the values given there,
    those inputs bound as constants; the plan is kept while they stay the same and made again when
    they change."""

    def __init__(self, data: bytes, device: str, kwargs: Dict[str, Any],
                 session: "Optional[_api.Session]" = None, bound: Sequence[str] = ()) -> None:
        self._data = data
        self._device = device
        self._kwargs = kwargs
        self.session = session
        self._bound = list(bound)  # graph inputs planned as constants
        self._bound_key: Optional[Tuple[bytes, ...]] = None  # their values in the current plan
        graph = onnx.load_from_string(data).graph
        initializers = {t.name for t in graph.initializer}
        self._inputs = [v.name for v in graph.input if v.name not in initializers]
        # The element type each output has in the model: stagecraft computes in float32, an
        # integer or boolean output (TopK's indices, a mask) is cast back to its type.
        self._output_types = [_integer_dtype(v.type.tensor_type.elem_type) for v in graph.output]

    def run(self, inputs: Any, **kwargs: Any) -> tuple:  # noqa: D102 (onnx's signature)
        if isinstance(inputs, dict):
            named: Dict[str, Any] = {k: np.asarray(v) for k, v in inputs.items()}
        else:
            arrays = [inputs] if isinstance(inputs, np.ndarray) else [np.asarray(v) for v in inputs]
            if not self._bound:
                return self._typed(self.session.run(arrays))
            if len(arrays) != len(self._inputs):
                raise Error(f"the model takes {len(self._inputs)} input(s), got {len(arrays)}")
            named = dict(zip(self._inputs, arrays))
        if self._bound:
            self._plan_for(named)
            named = {k: v for k, v in named.items() if k not in self._bound}
        return self._typed(self.session.run(named))

    def _typed(self, outputs: Any) -> tuple:
        return tuple(o if t is None else np.asarray(o).astype(t) for o, t in zip(outputs, self._output_types))

    def _plan_for(self, named: Dict[str, Any]) -> None:
        """Plans the model with the bound inputs' values in `named` (again when they changed)."""
        while True:
            missing = [n for n in self._bound if n not in named]
            if missing:
                raise Error(f"input '{missing[0]}' is missing (the model reads it as a constant)")
            values = {n: np.ascontiguousarray(named[n], dtype=np.float32) for n in self._bound}
            key = tuple(values[n].tobytes() + str(values[n].shape).encode() for n in self._bound)
            if self.session is not None and key == self._bound_key:
                return
            try:
                self.session = _load(self._data, self._device, self._kwargs, values)
                self._bound_key = key
                return
            except ConstantInputError as e:
                more = [n for n in e.inputs if n not in self._bound]
                if not more:
                    raise
                self._bound += more


def _integer_dtype(elem_type: int) -> Optional[Any]:
    """The numpy type of an ONNX integer or boolean element type; None for any other."""
    from onnx import TensorProto

    types = {TensorProto.INT64: np.int64, TensorProto.INT32: np.int32, TensorProto.INT16: np.int16,
             TensorProto.INT8: np.int8, TensorProto.UINT8: np.uint8, TensorProto.UINT16: np.uint16,
             TensorProto.UINT32: np.uint32, TensorProto.UINT64: np.uint64, TensorProto.BOOL: np.bool_}
    return types.get(elem_type)


def _load(data: bytes, device: str, kwargs: Dict[str, Any],
          constant_inputs: Optional[Dict[str, Any]] = None) -> "_api.Session":
    """A Session of the model `data` (ModelProto bytes), the given inputs bound as constants."""
    kwargs = dict(kwargs)
    progress = kwargs.pop("progress")
    with tempfile.TemporaryDirectory(prefix="stagecraft_onnx_") as tmp:
        path = os.path.join(tmp, "model.onnx")
        with open(path, "wb") as f:
            f.write(data)
        m = _api.Model(path, progress=progress, constant_inputs=constant_inputs)
        return _api.Session(m, backend=_DEVICES[device.split(":")[0].upper()], progress=progress, **kwargs)


class Backend(_OnnxBackend):
    """ONNX's backend interface over ``stagecraft.Session``. ``prepare`` takes a ModelProto (or
    its bytes) and the keyword arguments of ``Session`` (default ``schedule="sequential"``: no
    search); a model stagecraft cannot run raises a ``stagecraft.Error`` naming the node."""

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> BackendRep:
        if not cls.supports_device(device):
            raise Error(f"device '{device}': this build runs on {', '.join(cls.devices())}")
        data = bytes(model) if isinstance(model, (bytes, bytearray)) else model.SerializeToString()
        kwargs.setdefault("schedule", "sequential")
        kwargs.setdefault("progress", False)
        try:
            return BackendRep(data, device, kwargs, session=_load(data, device, kwargs))
        except ConstantInputError as e:
            # Planned at run, for the values of these inputs.
            return BackendRep(data, device, kwargs, bound=e.inputs)

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: Any, inputs: Any, device: str = "CPU", outputs_info: Any = None,
                 **kwargs: Any) -> tuple:
        raise Error("stagecraft runs whole models: build a one-node model (onnx.helper.make_model)")

    @classmethod
    def devices(cls) -> List[str]:
        return [d for d, name in _DEVICES.items() if name in _api.backends()]

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.split(":")[0].upper() in cls.devices()


# ---- ONNX's node tests ---------------------------------------------------------------------------


def _float32_only(case: Any) -> bool:
    """Whether every input and output of the case (graph and data) is a float32 tensor."""
    graph = case.model.graph
    initializers = {t.name for t in graph.initializer}
    for v in list(graph.input) + list(graph.output):
        if v.name in initializers:
            continue
        t = v.type
        if not t.HasField("tensor_type") or t.tensor_type.elem_type != onnx.TensorProto.FLOAT:
            return False
    for inputs, outputs in case.data_sets:
        for a in list(inputs) + list(outputs):
            if not isinstance(a, np.ndarray) or a.dtype != np.float32:
                return False
    return True


def node_test_cases(float32_only: bool = True, names: Optional[Iterable[str]] = None) -> List[Any]:
    """ONNX's node test cases (generated by the onnx package), by name: all, or those whose every
    tensor is float32, or those named."""
    import warnings

    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators divide by zero on purpose
        cases = [c for c in collect_testcases(None) if c.kind == "node"]
    if float32_only:
        cases = [c for c in cases if _float32_only(c)]
    if names is not None:
        wanted = set(names)
        cases = [c for c in cases if c.name in wanted]
    return sorted(cases, key=lambda c: c.name)


def _one_line(e: BaseException) -> str:
    """The first line, without the temporary file's path that prepare() loaded the model from."""
    text = str(e).strip()
    line = text.splitlines()[0] if text else type(e).__name__
    return re.sub(r"^\S*stagecraft_onnx_[^/\s]*/model\.onnx: ", "", line)


def run_case(case: Any, device: str = "CPU") -> Dict[str, str]:
    """One case through the backend: status and a one-line message."""
    ops = sorted({n.op_type for n in case.model.graph.node})
    result = {"name": case.name, "ops": ",".join(ops), "status": "pass", "message": ""}
    graph_inputs = [v.name for v in case.model.graph.input
                    if v.name not in {t.name for t in case.model.graph.initializer}]
    try:
        rep = Backend.prepare(case.model, device)
        for inputs, outputs in case.data_sets:
            got = rep.run({name: a for name, a in zip(graph_inputs, inputs)})
            if len(got) != len(outputs):
                result.update(status="wrong", message=f"{len(got)} outputs, ONNX has {len(outputs)}")
                return result
            for k, (g, w) in enumerate(zip(got, outputs)):
                if g.shape != w.shape:
                    result.update(status="wrong", message=f"output {k}: shape {g.shape}, ONNX's {w.shape}")
                    return result
                if not np.allclose(g, w, rtol=case.rtol, atol=case.atol, equal_nan=True):
                    diff = np.abs(g.astype(np.float64) - w)
                    worst = float(np.nanmax(diff)) if g.size else 0.0
                    # An element that cancels to about 0 (an inverse DFT's imaginary parts) is exact
                    # only to float32's rounding of the terms it sums: ONNX's expected data holds
                    # 1.9e-7 where the exact value is 7e-16. Differences within two float32 ulps of
                    # the output's largest value pass, and are reported.
                    scale = 2.0 * float(np.finfo(np.float32).eps) * float(np.nanmax(np.abs(w)))
                    if w.dtype == np.float32 and worst <= scale:
                        result["message"] = (f"output {k}: within float32 rounding of its largest value "
                                             f"(max |difference| {worst:.3g} <= {scale:.3g})")
                        continue
                    result.update(status="wrong", message=f"output {k}: max |difference| {worst:.3g} "
                                  f"(rtol {case.rtol}, atol {case.atol})")
                    return result
    except Error as e:
        text = str(e).strip()
        # A refusal is one line; a longer message is an error of its own.
        result.update(status="refused" if "\n" not in text else "error", message=_one_line(e))
    except Exception as e:  # anything else is a defect of ours
        result.update(status="error", message=f"{type(e).__name__}: {_one_line(e)}")
    return result


def _worker(conn: Any, cases: Sequence[Any], indices: Sequence[int], device: str) -> None:
    """Runs cases[k] (the case of index indices[k]) for every k, sending (index, result)."""
    for i, case in zip(indices, cases):
        conn.send((i, run_case(case, device)))
    conn.send(None)
    conn.close()


def node_test_results(cases: Optional[Sequence[Any]] = None, device: str = "CPU",
                      progress: Any = None) -> List[Dict[str, str]]:
    """Runs `cases` (default: every float32 node test) in worker processes: a worker that dies
    marks its current case ``crash`` and a new one goes on with the rest. Workers are spawned, not
    forked: a fork of a process whose OpenMP threads have run hangs in the child's first parallel
    region (libgomp). `progress(done, total)` is called after each case."""
    cases = list(node_test_cases() if cases is None else cases)
    results: Dict[int, Dict[str, str]] = {}
    todo = list(range(len(cases)))
    ctx = multiprocessing.get_context("spawn")
    while todo:
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_worker, args=(child, [cases[i] for i in todo], todo, device), daemon=True)
        proc.start()
        child.close()
        finished = False
        while True:
            try:
                message = parent.recv()
            except EOFError:
                break
            if message is None:
                finished = True
                break
            i, result = message
            results[i] = result
            if progress:
                progress(len(results), len(cases))
        proc.join()
        todo = [i for i in todo if i not in results]
        if not finished and todo:
            crashed = todo.pop(0)
            c = cases[crashed]
            results[crashed] = {"name": c.name, "ops": ",".join(sorted({n.op_type for n in c.model.graph.node})),
                                "status": "crash", "message": f"the worker process died (exit code {proc.exitcode})"}
            if progress:
                progress(len(results), len(cases))
    return [results[i] for i in range(len(cases))]


# ---- The exclusion list ------------------------------------------------------------------------


def read_exclusions(path: Any) -> Tuple[Dict[str, str], str]:
    """The cases a list names (name -> reason; lines "name  # reason", "#" lines are comments) and
    the onnx version it was made with (its "made with onnx X" comment; "" when absent)."""
    listed: Dict[str, str] = {}
    version = ""
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                m = re.search(r"made with onnx (\S+)", line, re.IGNORECASE)
                version = m.group(1).rstrip(".,;") if m else version
                continue
            if line.strip():
                name, _, reason = line.partition("#")
                listed[name.strip()] = reason.strip()
    return listed, version


def check_results(results: Sequence[Dict[str, str]], listed: Dict[str, str],
                  listed_version: str) -> Tuple[List[str], List[str]]:
    """Failures of `results` against an exclusion list: any case wrong, erring or crashing; a listed
    case that passes (the list must shrink); a refused case the list does not name, when the list
    was made with the installed onnx version. Also returns the refused cases of another onnx version
    that the list does not know (reported, not failed)."""
    same_onnx = listed_version == onnx.__version__
    failures: List[str] = []
    unknown: List[str] = []
    for r in results:
        name, status = r["name"], r["status"]
        if status in ("wrong", "error", "crash"):
            failures.append(f"{name}: {status}: {r['message']}")
        elif status == "pass" and name in listed:
            failures.append(f"{name}: passes now: remove it from the exclusion list")
        elif status == "refused" and name not in listed:
            if same_onnx:
                failures.append(f"{name}: refused ({r['message']}) but not in the exclusion list")
            else:
                unknown.append(name)
    return failures, unknown
