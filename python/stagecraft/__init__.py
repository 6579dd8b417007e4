"""stagecraft: inter-operator scheduling and multi-stream execution of CNNs, from Python.

    import numpy as np
    import stagecraft

    sess = stagecraft.Session("model.onnx", schedule="dp")        # or "inception_v3", a Model
    (y,) = sess.run(np.random.rand(*sess.inputs[0].shape).astype(np.float32))

    s = stagecraft.schedule("inception_v3", "dp", backend="cpu")   # a Schedule
    print(s.summary()); s.to_yaml("inception_v3.yaml")
    rows = stagecraft.bench("inception_v3", ["sequential", "greedy", s], iters=20)

Errors a user can cause raise subclasses of stagecraft.Error with the command line's one-line
messages. See help(stagecraft.Session), help(stagecraft.schedule), help(stagecraft.bench).
"""

from __future__ import annotations

# The extension module may live in another directory of sys.path than these sources (the CMake
# build puts it in build/python/stagecraft/; tests run with PYTHONPATH=build/python:python): the
# package spans every `stagecraft` directory on the path.
__path__ = __import__("pkgutil").extend_path(__path__, __name__)

import os as _os

# An installed package carries the analytic models' device files (configs/devices/*.yaml).
_configs = _os.path.join(_os.path.dirname(__file__), "configs")
if _os.path.isdir(_configs):
    _os.environ.setdefault("STAGECRAFT_CONFIG_DIR", _configs)

from . import _errors
from ._errors import (BackendError, ConstantInputError, DeviceSpecError, Error, FormatError,
                      GraphError, InputError, IoError, NetworkError, ScheduleError, ShapeError,
                      UsageError)

try:
    from . import _stagecraft  # noqa: F401
except ImportError as _e:  # pragma: no cover - depends on the installation
    raise ImportError(
        "stagecraft: the compiled module stagecraft._stagecraft is missing or does not load "
        f"({_e}). Install the package with `pip install ./python` from the repository, or build "
        "it with CMake (-DSTAGECRAFT_BUILD_PYTHON=ON) and put build/python and python on "
        "PYTHONPATH.") from _e

from ._api import Model, Schedule, Session, Stage, TensorInfo, backends, load, networks, schedule
from ._tools import bench, calibrate

__version__ = "0.1.0"

__all__ = [
    "Model",
    "Schedule",
    "Session",
    "Stage",
    "TensorInfo",
    "backends",
    "bench",
    "calibrate",
    "load",
    "networks",
    "schedule",
]
__all__ += _errors.__all__  # the exception classes
