"""Schedules: Stage, Schedule (made, loaded, saved, shown) and schedule(), the search. Part of the
user-facing API that _api.py gathers.
"""

from __future__ import annotations

import html
import os
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Tuple, Union

from . import _stagecraft as _core
from ._errors import UsageError
from ._models import Model, ModelLike, PathLike, _fspath, _model, networks
from ._progress import ProgressArg, progress_for

ScheduleLike = Union[str, "Schedule", "os.PathLike[str]"]

STRATEGIES = ("sequential", "greedy", "dp")


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
    pipeline = _core.Pipeline(mode, int(r), int(s), bool(unpruned), float(max_part_transitions),
                              float(search_budget), bool(exhaustive), _cost_model(cost_model),
                              backend or "", _fspath(cache_dir) if cache_dir else "", layout or "",
                              int(streams))
    with progress_for(progress) as callback:
        core = _core.search(m._core, strategy, pipeline, callback)
    return Schedule(core)

