"""The user-facing API: Model, Schedule, Session, schedule(), networks(), backends() (bench()
and calibrate() are in _tools.py).

Gathered here from the modules that define them: _models.py (Model, load, TensorInfo,
networks(), backends()), _schedules.py (Stage, Schedule, schedule()) and _session.py (Session).

Every call that computes releases the GIL (loading an int8 model, searching, building a plan,
running, timing), so several sessions can run on several threads at once.
"""

from __future__ import annotations

# The helpers and type aliases (PathLike, _model, ...) are re-exported too: _tools.py imports them
# from here.
from ._models import (DTYPES, Model, ModelLike, PathLike, TensorInfo, _fspath,  # noqa: F401
                      _infos, _model, backends, load, networks)
from ._schedules import (STRATEGIES, Schedule, ScheduleLike, Stage, _cost_model,  # noqa: F401
                         schedule)
from ._session import InputsArg, Session  # noqa: F401

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

