"""bench() and calibrate(): timing schedules against each other, recording value ranges for
int8 (the Python forms of ``stagecraft bench`` and ``stagecraft calibrate``)."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from . import _stagecraft as _core
from ._api import ModelLike, PathLike, Schedule, ScheduleLike, Session, _fspath, _model
from ._errors import InputError, UsageError
from ._progress import ProgressArg, progress_for

__all__ = ["bench", "calibrate"]


def _label(spec: ScheduleLike) -> str:
    if isinstance(spec, Schedule):
        m = spec.meta
        return m["strategy"] + (f"-{m['mode']}" if m["strategy"] == "dp" else "")
    return os.path.basename(_fspath(spec))


def bench(model: Union[ModelLike, Sequence[ModelLike]],
          schedules: Union[Sequence[ScheduleLike], Mapping[str, ScheduleLike]] = (
              "sequential", "greedy", "dp"),
          *, iters: int = 20, warmup: int = 3, backend: str = "cpu", as_frame: bool = False,
          progress: ProgressArg = None, **session_args: Any) -> Any:
    """Runs `model` (one, or a list) with each schedule and times them in alternating blocks, like
    ``stagecraft bench``. `schedules` are strategy names, Schedules or schedule files (a dict
    gives them labels). Other keyword arguments go to ``Session`` (dtype, batch, layout,
    cache_dir, mode, r, s, cost_model, ...).

    Returns a list of dicts, one per (model, schedule), with the keys of the CLI's bench.json:
    network, batch, dtype, schedule, stages, median_ms, p10_ms, p90_ms, images_per_s, speedup
    (against the first schedule), predicted_ms, search_s, measured, cache_hits — plus backend and
    device. With ``as_frame=True``, a pandas DataFrame of the same rows (needs pandas).
    """
    if as_frame:
        try:
            import pandas
        except ImportError as e:
            raise ImportError("bench(..., as_frame=True) needs pandas (pip install pandas)") from e
    models: List[ModelLike] = (list(model) if isinstance(model, (list, tuple))
                               else [model])  # type: ignore[list-item]
    if isinstance(schedules, Mapping):
        specs = list(schedules.items())
    else:
        specs = [(_label(sch), sch) for sch in schedules]
    if not specs:
        raise UsageError("bench: give at least one schedule")
    load_keys = ("batch", "input_size", "seed", "dtype", "calibration", "calibration_samples")
    load_args = {k: session_args.pop(k) for k in list(session_args) if k in load_keys}
    rows: List[Dict[str, Any]] = []
    for mod in models:
        m = _model(mod, dict(load_args, progress=progress))
        sessions = [Session(m, schedule=sch, backend=backend, progress=progress, **session_args)
                    for _, sch in specs]
        with progress_for(progress) as callback:
            times = _core.time_sessions([s._core for s in sessions], int(warmup), int(iters),
                                        callback)
        net_rows = []
        for (label, _), sess, ms in zip(specs, sessions, times):
            median, p10, p90 = _core.summarise(ms)
            sch = sess._core.schedule
            meta, stats = sch.meta, sch.stats
            net_rows.append({
                "network": m.name, "batch": m.batch, "dtype": m.dtype, "schedule": label,
                "stages": len(sch.stages), "median_ms": median, "p10_ms": p10, "p90_ms": p90,
                "images_per_s": m.batch * 1e3 / median, "speedup": 1.0,
                "predicted_ms": meta["predicted_ms"], "search_s": meta["search_seconds"],
                "measured": stats.get("measured", 0), "cache_hits": stats.get("cache_hits", 0),
                "backend": sess.backend, "device": sess.device,
            })
        for row in net_rows:
            row["speedup"] = net_rows[0]["median_ms"] / row["median_ms"]
        rows.extend(net_rows)
    if as_frame:
        return pandas.DataFrame(rows)
    return rows


def calibrate(model: ModelLike, *, samples: int = 8, inputs: Optional[Sequence[np.ndarray]] = None,
              method: str = "minmax", percentile: float = 99.99,
              path: Optional[PathLike] = None, batch: Optional[int] = None,
              input_size: Optional[int] = None, seed: Optional[int] = None,
              progress: ProgressArg = None) -> Dict[str, Any]:
    """Records the range of every value of the f32 graph of `model` for int8 quantisation, like
    ``stagecraft calibrate``: on `samples` generated inputs, or on `inputs` (float32 arrays of the
    input's shape, one sample each). `method` is ``minmax`` or ``percentile`` (of |x|, keeping
    `percentile` percent). Writes the calibration to `path` (default ``NETWORK.calib.yaml`` in the
    current directory) for ``Session(..., dtype="int8", calibration=path)``.

    Returns a dict: path, network, method, percentile, samples, values (count), int8_ops, f32_ops,
    conversions (of the int8 graph it gives).
    """
    m = _model(model, dict(batch=batch, input_size=input_size, seed=seed, progress=progress))
    if m.dtype != "f32":
        raise UsageError("calibrate runs the f32 graph: drop --dtype (use --dtype int8 on "
                         "run/bench/schedule)")
    arrays: List[np.ndarray] = []
    if inputs is not None:
        infos = m.inputs
        if len(infos) != 1:
            raise InputError(f"inputs give one sample per array, for graphs of one input; this "
                             f"one takes {len(infos)}")
        for a in inputs:
            if not isinstance(a, np.ndarray) or a.dtype != np.float32:
                raise InputError(f"input '{infos[0].name}': expected float32 arrays, got "
                                 f"{getattr(a, 'dtype', type(a).__name__)}")
            if tuple(a.shape) != infos[0].shape:
                raise InputError(f"input '{infos[0].name}': shape {'x'.join(map(str, a.shape))} "
                                 f"does not match the graph input "
                                 f"{'x'.join(map(str, infos[0].shape))}")
            arrays.append(np.ascontiguousarray(a))
    out = _fspath(path) if path is not None else f"{m.name}.calib.yaml"
    with progress_for(progress) as callback:
        return dict(_core.calibrate(m._core, int(samples), arrays, method, float(percentile), out,
                                    callback))
