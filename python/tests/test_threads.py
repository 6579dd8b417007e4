"""The GIL is released while running and searching; Ctrl-C interrupts a search; with
adapt_threads=False a session keeps every thread (and its results bit for bit) while another
process holds a core."""

from __future__ import annotations

import _thread
import re
import sys
import threading
import time

import numpy as np
import pytest

import stagecraft
from conftest import random_input


def released_during(call, attempts: int = 20) -> bool:
    """Whether another thread gets the GIL while `call()` runs. The switch interval is raised so
    far that this thread never hands the GIL over by itself: the helper thread can only run when
    `call` releases it. Repeated a few times so that a slow start of the helper cannot miss it."""
    got = threading.Event()
    go = threading.Event()

    def helper():
        go.wait()
        got.set()  # needs the GIL

    t = threading.Thread(target=helper, daemon=True)
    t.start()
    old = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        go.set()
        for _ in range(attempts):
            call()
            if got.is_set():
                return True
        return False
    finally:
        sys.setswitchinterval(old)
        t.join(timeout=60)


def test_helper_detects_a_call_that_holds_the_gil():
    # The check itself: pure Python work never lets the helper in.
    def busy():
        n = 0
        for i in range(200000):
            n += i
    assert not released_during(busy, attempts=3)


def test_gil_is_released_during_run(squeezenet_session):
    x = random_input((1, 3, 64, 64))
    assert released_during(lambda: squeezenet_session.run(x))


def test_gil_is_released_during_search(squeezenet):
    assert released_during(lambda: stagecraft.schedule(
        squeezenet, "dp", cost_model="analytic:v100", progress=False))


def test_two_sessions_on_two_threads(squeezenet):
    a = stagecraft.Session(squeezenet, schedule="sequential", progress=False)
    b = stagecraft.Session("googlenet", input_size=64, schedule="greedy", progress=False)
    xa = random_input(a.inputs[0].shape, seed=1)
    xb = random_input(b.inputs[0].shape, seed=2)
    (want_a,) = a.run(xa)
    (want_b,) = b.run(xb)
    results = {"a": [], "b": []}
    errors = []

    def loop(sess, x, key):
        try:
            for _ in range(5):
                results[key].append(sess.run(x)[0])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=loop, args=(a, xa, "a")),
               threading.Thread(target=loop, args=(b, xb, "b")),
               threading.Thread(target=loop, args=(a, xa, "a"))]  # one session, two threads
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results["a"]) == 10 and len(results["b"]) == 5
    assert all(np.array_equal(y, want_a) for y in results["a"])
    assert all(np.array_equal(y, want_b) for y in results["b"])


def test_fixed_threads_stay_bit_for_bit_while_a_core_is_busy(monkeypatch):
    """adapt_threads=False: no run switches to kernels built for fewer threads (which round a few
    last bits differently) while a spinning process holds a core; limited_runs counts none."""
    import multiprocessing
    monkeypatch.delenv("STAGECRAFT_ADAPT_THREADS", raising=False)  # the option alone decides
    sess = stagecraft.Session("squeezenet1_1", input_size=96, schedule="sequential", adapt_threads=False,
                              progress=False)
    x = random_input(sess.inputs[0].shape, seed=3)
    (want,) = sess.run(x)
    stop = multiprocessing.Event()
    spinner = multiprocessing.Process(target=_spin, args=(stop,), daemon=True)
    spinner.start()
    try:
        outs = [sess.run(x)[0] for _ in range(40)]
    finally:
        stop.set()
        spinner.join(5)
    assert sess.limited_runs == 0
    assert all(np.array_equal(y, want) for y in outs)
    assert isinstance(stagecraft.Session("squeezenet1_1", input_size=64, schedule="sequential",
                                         progress=False).limited_runs, int)


def _spin(stop) -> None:
    while not stop.is_set():
        pass


def test_ctrl_c_interrupts_a_search():
    # A search that runs for minutes (wide parts, large r, s): an interrupt from another thread
    # while it runs must stop it with KeyboardInterrupt, without any Python progress callback
    # (the extension checks for signals itself).
    model = stagecraft.Model("nasnet_a_large", input_size=64)
    calls = []
    started = threading.Event()

    def progress(phase, done, total, seconds, text):
        calls.append(phase)
        started.set()

    def interrupt():
        started.wait(timeout=120)
        _thread.interrupt_main()

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        stagecraft.schedule(model, "dp", r=6, s=8, max_part_transitions=1e12,
                            cost_model="analytic:v100", progress=progress)
    assert calls and set(calls) == {"search"}
    # The module is usable afterwards.
    assert len(stagecraft.schedule("squeezenet1_1", "greedy", progress=False)) > 0


def test_progress_reports_phases():
    seen = []
    stagecraft.schedule("randwire_small", "dp", input_size=64, cost_model="analytic:v100",
                        progress=lambda phase, done, total, seconds, text: seen.append(
                            (phase, done, total)))
    blocks = [(d, t) for p, d, t in seen if p == "search"]
    assert blocks, "a search reports progress at least at the end of every block"
    assert blocks[-1][0] == blocks[-1][1] > 0  # the last report: every block done


def test_progress_line_without_tqdm(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm fails
    stagecraft.schedule("randwire_small", "dp", input_size=64, cost_model="analytic:v100",
                        progress=True)
    err = capsys.readouterr().err
    lines = [l for l in err.splitlines() if l.startswith("stagecraft: searching ")]
    assert lines, err
    done, total = lines[-1].split()[2].rstrip(",").split("/")
    assert done == total  # the last line: every block done


def test_progress_bar_with_tqdm(monkeypatch, capsys):
    pytest.importorskip("tqdm", reason="tqdm is not installed (scripts/test.sh installs it)")

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    stagecraft.schedule("randwire_small", "dp", input_size=64, cost_model="analytic:v100",
                        progress=True)
    err = capsys.readouterr().err
    # tqdm's bar ("searching: 100%|####| 12/12 [00:00<00:00, 80.1part/s]"), not the plain
    # lines of the fallback ("stagecraft: searching 12/12").
    assert re.search(r"searching: +\d+%\|", err), err
    assert "part/s" in err, err
    assert "stagecraft: searching" not in err, err


def test_quiet_progress(capsys):
    stagecraft.schedule("randwire_small", "dp", input_size=64, cost_model="analytic:v100",
                        progress=False)
    assert capsys.readouterr().err == ""
