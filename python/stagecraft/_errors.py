"""Exceptions of stagecraft: one base class, subclasses per area (as in the C++ library).

Every error a user can cause carries the same one-line message the ``stagecraft`` command prints
(naming the file, op or field and the rule broken). The C++ exceptions are mapped to these classes
by the extension module.
"""

from __future__ import annotations

__all__ = [
    "Error",
    "IoError",
    "UsageError",
    "InputError",
    "GraphError",
    "ShapeError",
    "FormatError",
    "ConstantInputError",
    "NetworkError",
    "ScheduleError",
    "BackendError",
    "DeviceSpecError",
]


class Error(Exception):
    """Base of every stagecraft error (C++ ``stagecraft::Error``)."""


class IoError(Error, OSError):
    """A file could not be read or written: missing, unreadable, not writable."""


class UsageError(Error, ValueError):
    """An option value is invalid (unknown strategy, dtype, layout, bad combination)."""


class InputError(Error, ValueError):
    """Session.run got inputs it cannot take: wrong names, count, shape or dtype (not float32)."""


class GraphError(Error):
    """The graph's structure is invalid: a cycle, a dangling input, an unknown op kind."""


class ShapeError(GraphError, ValueError):
    """An op's inputs or attributes give no valid output shape."""


class FormatError(GraphError):
    """A graph, ONNX, tensor or calibration file is malformed."""


class ConstantInputError(FormatError):
    """An ONNX node needs a constant (convolution weights, resize scales) where the model computes
    it from graph inputs; ``inputs`` names them (bind them with ``Model(constant_inputs=...)``)."""

    def __init__(self, message: str = "", inputs: "tuple[str, ...]" = ()) -> None:
        super().__init__(message)
        self.inputs = tuple(inputs)


class NetworkError(Error, ValueError):
    """An unknown built-in network name, or options a network cannot take."""


class ScheduleError(Error):
    """A schedule is invalid for its graph, or a schedule file is malformed or made for another
    graph, batch or op set."""


class BackendError(Error):
    """A backend is not built, has no device, or cannot run an op."""


class DeviceSpecError(Error):
    """An analytic device description (``analytic:DEVICE``) is unknown or malformed."""
