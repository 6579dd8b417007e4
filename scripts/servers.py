"""What the Python tools that start servers share (bench/serve_bench.py, tests/serve/
triton_test.py): a free loopback port, and stopping a server started in a process group of its
own (start_new_session=True), so that what serve.sh execs goes with it."""
from __future__ import annotations

import os
import signal
import socket
import subprocess


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_group(proc: subprocess.Popen, timeout: float) -> None:
    """SIGTERM to the process group that `proc` leads, SIGKILL when `proc` has not exited after
    `timeout` seconds; nothing when it has already exited."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
