"""Spreading requests over several Triton servers (replicas of the same models).

`scripts/serve_replicas.sh MODEL --replicas N` starts N tritonservers with stagecraft's backend on
loopback ports, each pinned to its own share of the cores (so that their core pools do not
overlap); `ReplicaClient` sends each request to the replica with the fewest requests in flight and,
when a replica cannot be reached or is shutting down, to the next one (that replica is left out for
a few seconds). Errors the request itself causes (a wrong shape, an unknown input) are raised at
once: another replica would refuse it the same way.

    from replicas import ReplicaClient          # serve/ on sys.path
    client = ReplicaClient(["127.0.0.1:8000", "127.0.0.1:8010"])
    result = client.infer("inception_v3", {"input": x})   # numpy arrays by input name
    y = result.as_numpy("fc")

Thread-safe: each thread has its own HTTP connections.
"""
from __future__ import annotations

import threading
import time

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

# Statuses of errors caused by the request itself (HTTP 400 and 404: bad input, unknown model).
_REQUEST_ERRORS = {"400", "404"}


class NoReplicaError(RuntimeError):
    """Every replica failed for this request."""


class ReplicaClient:
    """Sends requests to the least busy reachable replica; see the module comment."""

    def __init__(self, urls: list[str], down_seconds: float = 5.0, timeout_s: float = 60.0):
        if not urls:
            raise ValueError("ReplicaClient: no replica URL")
        self.urls = list(urls)
        self.down_seconds = down_seconds
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._in_flight = [0] * len(urls)
        self._down_until = [0.0] * len(urls)
        self.served = [0] * len(urls)  # requests each replica answered
        self._local = threading.local()

    def _client(self, i: int) -> httpclient.InferenceServerClient:
        clients = getattr(self._local, "clients", None)
        if clients is None:
            clients = self._local.clients = [None] * len(self.urls)
        if clients[i] is None:
            clients[i] = httpclient.InferenceServerClient(
                self.urls[i], connection_timeout=self.timeout_s, network_timeout=self.timeout_s)
        return clients[i]

    def _forget(self, i: int) -> None:
        clients = getattr(self._local, "clients", None)
        if clients is not None and clients[i] is not None:
            try:
                clients[i].close()
            except Exception:  # noqa: BLE001 - a broken connection may not close cleanly
                pass
            clients[i] = None

    def _pick(self, tried: set[int]) -> int | None:
        now = time.monotonic()
        with self._lock:
            live = [i for i in range(len(self.urls)) if i not in tried and self._down_until[i] <= now]
            if not live:  # every replica down or tried: try the ones down but not tried
                live = [i for i in range(len(self.urls)) if i not in tried]
            if not live:
                return None
            i = min(live, key=lambda k: (self._in_flight[k], k))
            self._in_flight[i] += 1
            return i

    def infer(self, model: str, inputs: dict[str, np.ndarray], outputs: list[str] | None = None):
        """One inference on the least busy replica (failing over); returns tritonclient's result."""
        tried: set[int] = set()
        last: Exception | None = None
        while True:
            i = self._pick(tried)
            if i is None:
                raise NoReplicaError(f"{model}: every replica failed ({', '.join(self.urls)}): {last}")
            try:
                request = []
                for name, x in inputs.items():
                    inp = httpclient.InferInput(name, list(x.shape), np_to_triton_dtype(x.dtype))
                    inp.set_data_from_numpy(x)
                    request.append(inp)
                wanted = [httpclient.InferRequestedOutput(o) for o in outputs] if outputs else None
                result = self._client(i).infer(model, request, outputs=wanted)
                with self._lock:
                    self.served[i] += 1
                return result
            except InferenceServerException as e:
                if str(e.status()) in _REQUEST_ERRORS:
                    raise
                last = e
            except Exception as e:  # noqa: BLE001 - unreachable or closing: the next replica
                last = e
            finally:
                with self._lock:
                    self._in_flight[i] -= 1
            with self._lock:
                self._down_until[i] = time.monotonic() + self.down_seconds
            self._forget(i)
            tried.add(i)
