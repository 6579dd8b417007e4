"""Progress of long calls (searches, layout measurement, calibration, bench rounds).

The extension calls ``callback(phase, done, total, seconds, text)`` with the GIL held, about every
0.2 s during a search and after every measurement, sample or round; every call also checks for
signals, so Ctrl-C raises KeyboardInterrupt in the middle of a long search.
"""

from __future__ import annotations

import sys
import time
from typing import Callable, Optional, Union

ProgressCallback = Callable[[str, float, float, float, str], None]
ProgressArg = Union[bool, None, ProgressCallback]

QUIET_SECONDS = 1.0  # calls shorter than this show nothing (as the CLI's searches)

_PHASES = {
    "search": "searching",
    "layouts": "measuring layouts",
    "calibrate": "calibrating",
    "bench": "timing",
}


def _use_tqdm() -> bool:
    """tqdm bars where they render: a terminal, or a notebook (tqdm.auto picks the widget); plain
    lines in logs and pipes."""
    try:
        import tqdm  # noqa: F401  (optional)
    except ImportError:
        return False
    return sys.stderr.isatty() or "ipykernel" in sys.modules


class _Display:
    """Shows progress after QUIET_SECONDS: a tqdm bar when tqdm is installed and stderr is a
    terminal (or in a notebook), else one line per phase on stderr (at most one a second)."""

    def __init__(self, force: bool) -> None:
        self._start = time.monotonic()
        self._force = force
        self._bars: dict = {}
        self._lines: dict = {}
        self._tqdm = _use_tqdm()

    def __call__(self, phase: str, done: float, total: float, seconds: float, text: str) -> None:
        if not self._force and time.monotonic() - self._start < QUIET_SECONDS:
            return
        label = _PHASES.get(phase, phase)
        if self._tqdm:
            self._update_bar(phase, label, done, total, text)
        else:
            self._update_line(phase, label, done, total, text)

    def _update_bar(self, phase: str, label: str, done: float, total: float, text: str) -> None:
        from tqdm.auto import tqdm

        bar = self._bars.get(phase)
        if bar is None:
            unit = {"search": "part", "layouts": "op", "calibrate": "sample", "bench": "round"}
            bar = tqdm(total=int(total) if total > 0 else None, initial=int(done), desc=label,
                       unit=unit.get(phase, "it"), leave=False, file=sys.stderr)
            self._bars[phase] = bar
        if text:
            bar.set_postfix_str(text, refresh=False)
        bar.update(int(done) - bar.n)

    def _update_line(self, phase: str, label: str, done: float, total: float, text: str) -> None:
        now = time.monotonic()
        tty = sys.stderr.isatty()
        last = self._lines.get(phase)
        if not tty and last is not None and now - last < 1.0 and not (total and done >= total):
            return
        self._lines[phase] = now
        count = f"{int(done)}/{int(total)}" if total > 0 else f"{int(done)}"
        line = f"stagecraft: {label} {count}" + (f", {text}" if text else "")
        line += f" ({now - self._start:.1f} s)"
        sys.stderr.write(("\r" + line + "   ") if tty else (line + "\n"))
        sys.stderr.flush()

    def close(self) -> None:
        for bar in self._bars.values():
            bar.close()
        if self._lines and sys.stderr.isatty():
            sys.stderr.write("\n")
        self._bars.clear()
        self._lines.clear()


class progress_for:
    """Context manager giving the callback to pass to the extension for a ``progress`` argument:
    None/True show progress after a second (True: at once), False is quiet, a callable receives
    ``(phase, done, total, seconds, text)``. Ctrl-C works in every case."""

    def __init__(self, progress: ProgressArg) -> None:
        self._display: Optional[_Display] = None
        if progress is False:
            self.callback: Optional[ProgressCallback] = None
        elif progress is None or progress is True:
            self._display = _Display(force=progress is True)
            self.callback = self._display
        elif callable(progress):
            self.callback = progress
        else:
            raise TypeError(f"progress: expected None, a bool or a callable, got {type(progress).__name__}")

    def __enter__(self) -> Optional[ProgressCallback]:
        return self.callback

    def __exit__(self, *exc: object) -> None:
        if self._display is not None:
            self._display.close()
