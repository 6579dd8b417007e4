"""Shared fixtures of the Python package's tests.

Run through ctest (`python/pytest`, python/tests/run_pytest.sh) or directly:
    PYTHONPATH=build/python:python STAGECRAFT_CLI=build/stagecraft .venv/bin/python -m pytest python/tests
Profiles go to a temporary cache; the tests never assert on time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

# Before stagecraft runs anything: a private profile cache (never the user's).
if "STAGECRAFT_CACHE_DIR" not in os.environ:
    os.environ["STAGECRAFT_CACHE_DIR"] = tempfile.mkdtemp(prefix="stagecraft-pytest-")
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import stagecraft  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

# Reduced input sizes that keep every built-in network valid and the suite quick.
INPUT_SIZES = {"inception_v3": 75}
DEFAULT_INPUT_SIZE = 64


def input_size(network: str) -> int:
    return INPUT_SIZES.get(network, DEFAULT_INPUT_SIZE)


@pytest.fixture(scope="session")
def cli() -> str:
    """Path of the `stagecraft` command of the same build ($STAGECRAFT_CLI, else build/)."""
    path = os.environ.get("STAGECRAFT_CLI") or str(REPO / "build" / "cli" / "stagecraft")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.skip(f"no stagecraft command at {path} (set STAGECRAFT_CLI)")
    return path


def run_cli(cli: str, *args: str, check: bool = True, env=None) -> subprocess.CompletedProcess:
    proc = subprocess.run([cli, *args], capture_output=True, text=True, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"stagecraft {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def cli_error(cli: str, *args: str) -> str:
    """The one error line the CLI prints for `args` (without the 'stagecraft: error: ' prefix)."""
    proc = run_cli(cli, *args, check=False)
    assert proc.returncode != 0, proc.stdout
    lines = [l for l in proc.stderr.splitlines() if l.startswith("stagecraft: error: ")]
    assert len(lines) == 1, proc.stderr
    return lines[0][len("stagecraft: error: "):]


@pytest.fixture(scope="session")
def squeezenet() -> "stagecraft.Model":
    return stagecraft.Model("squeezenet1_1", input_size=64)


@pytest.fixture(scope="session")
def squeezenet_session(squeezenet) -> "stagecraft.Session":
    return stagecraft.Session(squeezenet, schedule="sequential", progress=False)


def random_input(shape, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, size=shape).astype(np.float32)


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / max |want|, as the C++ tests compute it."""
    return float(np.max(np.abs(got - want)) / max(1e-6, float(np.max(np.abs(want)))))
