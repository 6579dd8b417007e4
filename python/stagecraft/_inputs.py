"""The one rule for the ways a caller may pass a model's inputs (Session.run, the Ray Serve
deployment): one array, a list or tuple in input order, or a dict by input name."""

from __future__ import annotations

from typing import Any, Callable, List, Mapping, Sequence

import numpy as np


def in_input_order(x: Any, names: Sequence[str], error: Callable[[str], Exception], who: str) -> List[Any]:
    """The items of `x` in the order of `names`; raises error(one line) for a wrong count, an
    unknown or a missing name, or another type. `who` names the taker ("the graph", "model 'm'")."""
    if isinstance(x, np.ndarray):
        if len(names) != 1:
            raise error(f"{who} takes {len(names)} inputs ({', '.join(names)}): pass a list or a dict by name")
        return [x]
    if isinstance(x, Mapping):
        unknown = [k for k in x if k not in names]
        if unknown:
            raise error(f"unknown input '{unknown[0]}' ({who} takes {', '.join(names)})")
        missing = [n for n in names if n not in x]
        if missing:
            raise error(f"missing input '{missing[0]}' ({who} takes {', '.join(names)})")
        return [x[n] for n in names]
    if isinstance(x, (list, tuple)):
        if len(x) != len(names):
            raise error(f"{who} takes {len(names)} input(s), got {len(x)} (inputs: {', '.join(names)})")
        return list(x)
    raise error(f"inputs: expected a numpy.ndarray, a list or a dict of them, got {type(x).__name__}")
