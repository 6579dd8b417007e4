"""What the Python tools that start servers share (bench/serve_bench.py, bench/ray_serve_bench.py,
tests/serve/triton_test.py): a free loopback port, stopping a server started in a process group
of its own (start_new_session=True), so that what serve.sh execs goes with it, and the benches'
models and requests."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

SIZES = {"inception_v3": 299}  # input height = width of the benches' networks (default 224)


def export_dynamic_batch(cli: str, net: str, work: Path) -> Path:
    """A built-in network as ONNX with stagecraft's weights (`stagecraft graph NET --onnx`), its
    batch dimension made dynamic ("N")."""
    import onnx
    path = work / f"{net}.onnx"
    subprocess.run([cli, "graph", net, "--onnx", str(path)], check=True, stdout=subprocess.DEVNULL)
    m = onnx.load(str(path))
    for v in list(m.graph.input) + list(m.graph.output):
        v.type.tensor_type.shape.dim[0].dim_param = "N"
    del m.graph.value_info[:]
    dyn = work / f"{net}_dyn.onnx"
    onnx.save(m, str(dyn))
    return dyn


def request_inputs(nets: list[str]) -> dict:
    """One seeded random float32 image of each network's size, batch 1, by network."""
    import numpy as np
    rng = np.random.default_rng(0)
    return {n: rng.standard_normal((1, 3, SIZES.get(n, 224), SIZES.get(n, 224)), dtype=np.float32)
            for n in nets}


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


def add_load_options(parser, concurrency: str, seconds: float, rounds: int, warmup: float) -> None:
    """The load options both serving benches take (their defaults differ): models, concurrency
    levels, seconds per measurement, rounds, warm-up seconds and the server's largest batch."""
    parser.add_argument("--models", default="inception_v3,resnet50")
    parser.add_argument("--concurrency", default=concurrency)
    parser.add_argument("--seconds", type=float, default=seconds, help="per engine, model and concurrency")
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--warmup", type=float, default=warmup)
    parser.add_argument("--max-batch", type=int, default=4)
