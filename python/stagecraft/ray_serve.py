"""stagecraft on Ray Serve: models served by stagecraft sessions, scaled out by Ray.

An application is one ingress deployment (HTTP and the Python handle API) in front of one model
deployment per model. A model replica holds one `stagecraft.Session` per planned batch size, all
made when the replica starts (a dp schedule is searched once per size and kept in the schedule
cache, ``cache_dir``, which replicas on the same machine share); ``@serve.batch`` gathers requests
into batches of at most ``max_batch`` samples. A batch runs as the planned runs that hold it at the
least cost, from each plan's latency measured when the replica starts (`batch_runs`: with plans of
1, 2 and 4, 3 samples run as 2 + 1 where padding them to 4 costs more). A replica asks Ray for ``num_cpus`` = its session's threads, and its
process runs OpenMP teams of that many threads (``OMP_NUM_THREADS``).

    from ray import serve
    from stagecraft import ray_serve

    app = ray_serve.app([ray_serve.ModelConfig("squeezenet1_1", input_size=64, max_batch=8,
                                               threads=1, num_replicas=2)])
    serve.run(app, name="stagecraft", route_prefix="/")
    client = ray_serve.Client("stagecraft")                 # the Python handle API
    (logits,) = client.infer("squeezenet1_1", x)            # x: float32 (N, 3, 64, 64), N <= 8

HTTP (KServe v2 paths; the ingress answers on Ray Serve's proxy, port 8000 by default):
  POST /v2/models/MODEL/infer   Content-Type application/json: the KServe v2 JSON request
                                ``{"inputs": [{"name", "shape", "datatype": "FP32", "data"}]}``,
                                answered with ``{"model_name", "outputs": [...]}`` in the same form;
                                Content-Type application/x-npy (or application/octet-stream): the
                                input as .npy bytes (one-input models), answered with the first
                                output as .npy bytes; application/x-npz: inputs by name, answered
                                with the outputs by name as .npz.
  GET  /v2/models/MODEL         metadata (inputs, outputs, max_batch, planned batch sizes)
  GET  /v2/models, /v2/health/live, /v2/health/ready
A bad request (malformed or truncated body, wrong name, shape or dtype, a batch over ``max_batch``)
is answered 400, an unknown model 404, with one line of text; the replicas never see it fail.

Failures: a request whose model replica dies (its node removed, its process killed) is sent again
to another replica by the ingress (``retries`` times, with back-off, while Ray Serve starts a
replacement); the ingress runs beside the HTTP proxy on the head node (``ingress_on_head``), so
that losing a worker node loses no accepted request. `Client` retries likewise when the ingress
itself cannot be reached.

`app_builder` is the application builder for ``serve run`` / ``serve deploy`` config files
(docs/ray_serve.md, docs/ray_serve.yaml). This module imports Ray only when it is used.
"""
from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ._inputs import in_input_order
# The request bodies (and their codecs, public here: clients and tests encode with them).
from ._serve_bodies import (RequestError, _decode_body, _encode_body, _one_line, decode_kserve_json,  # noqa: F401
                            decode_npy, decode_npz, encode_kserve_json, encode_npy, encode_npz)

DEFAULT_APP = "stagecraft"
# Ray's resource that only the head node has: where the ingress goes, beside the HTTP proxy.
HEAD_RESOURCE = "node:__internal_head__"


@dataclasses.dataclass
class ModelConfig:
    """One served model. ``model``: a built-in network name, a graph file (.yaml) or an ONNX
    model (.onnx); ``name``: its name in URLs (default: the network or file name).

    ``max_batch``: the most samples one run takes (requests are batched up to it, a larger request
    is refused); ``batch_sizes``: the planned sizes (default 1, 2, 4, ... and ``max_batch``; a
    batch runs as the planned runs that hold it at the least measured cost: `batch_runs`). ``threads``: OpenMP threads of a run,
    and the CPUs a replica asks Ray for (``num_cpus``, default ``threads``); ``streams``: the
    session's streams (default ``threads``: on the CPU a stream is a worker thread, and a schedule
    with more concurrent groups than cores would use cores Ray did not give the replica).
    ``num_replicas`` or
    ``autoscaling_config`` (Ray Serve's: ``min_replicas``, ``max_replicas``,
    ``target_ongoing_requests``, ...); ``max_replicas_per_node`` (e.g. 1: spread over nodes).
    ``session``: further `stagecraft.Session` arguments (``layout``, ``dtype``, ``winograd``...).
    """

    model: str
    name: Optional[str] = None
    max_batch: int = 8
    batch_sizes: Optional[Sequence[int]] = None
    schedule: str = "dp"
    cache_dir: Optional[str] = None
    input_size: Optional[int] = None
    search_budget: float = 40.0
    threads: int = 1
    streams: Optional[int] = None
    num_cpus: Optional[float] = None
    num_replicas: int = 1
    autoscaling_config: Optional[Dict[str, Any]] = None
    max_replicas_per_node: Optional[int] = None
    batch_wait_timeout_s: float = 0.002
    env: Dict[str, str] = dataclasses.field(default_factory=dict)
    session: Dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.name is None:
            base = os.path.basename(str(self.model))
            self.name = os.path.splitext(base)[0] if base.endswith((".onnx", ".yaml")) else base
        if int(self.max_batch) < 1:
            raise ValueError(f"model '{self.name}': max_batch {self.max_batch}, expected >= 1")
        if int(self.threads) < 1:
            raise ValueError(f"model '{self.name}': threads {self.threads}, expected >= 1")
        sizes = sorted(set(int(b) for b in self.batch_sizes)) if self.batch_sizes else None
        if sizes is None:
            sizes, b = [], 1
            while b < self.max_batch:
                sizes.append(b)
                b *= 2
            sizes.append(int(self.max_batch))
        if sizes[0] < 1 or sizes[-1] != int(self.max_batch):
            raise ValueError(f"model '{self.name}': batch_sizes {sizes}: sizes >= 1, the largest "
                             f"max_batch ({self.max_batch})")
        self.batch_sizes = sizes


def batch_runs(costs: Mapping[int, float], n: int) -> List[int]:
    """The planned batch sizes whose runs hold n samples at the least summed cost, largest first.
    ``costs``: the latency of one run of each planned size. The last run is zero-padded where it
    is not full: with runs of 1, 2 and 4 samples taking 70, 137 and 270 ms, 3 samples run as
    [2, 1] (207 ms) rather than [4] (270 ms); with 70, 100 and 120 ms they run as [4]."""
    if n < 1 or not costs:
        raise ValueError(f"batch_runs: {n} samples over planned sizes {sorted(costs)}")
    best = [0.0] + [float("inf")] * n  # best[m]: the least cost of m samples
    first = [0] * (n + 1)
    for m in range(1, n + 1):
        for size in sorted(costs, reverse=True):  # on a tie, fewer and larger runs
            cost = costs[size] + best[max(0, m - size)]
            if cost < best[m]:
                best[m], first[m] = cost, size
    runs, m = [], n
    while m > 0:
        runs.append(first[m])
        m -= first[m]
    return sorted(runs, reverse=True)


def _run_pieces(session_of: Mapping[int, Any], runs: Sequence[int],
                arrays: Sequence[np.ndarray]) -> List[np.ndarray]:
    """The outputs of the samples in `arrays` (one array per input, samples first), run as `runs`
    (planned sizes; the last zero-padded where the samples do not fill it)."""
    n = arrays[0].shape[0]
    if len(runs) == 1 and runs[0] == n:
        return session_of[n].run(list(arrays))
    parts: List[List[np.ndarray]] = []
    start = 0
    for size in runs:
        take = min(size, n - start)
        piece = [a[start:start + take] for a in arrays]
        if take < size:
            piece = [np.concatenate([p, np.zeros((size - take, *p.shape[1:]), p.dtype)]) for p in piece]
        parts.append([y[:take] for y in session_of[size].run(piece)])
        start += take
    return [np.concatenate(ys) if len(ys) > 1 else ys[0] for ys in zip(*parts)]


def _run_costs(sessions: Mapping[int, Any], inputs: Sequence[Tuple[str, Tuple[int, ...]]],
               rounds: int = 3) -> Dict[int, float]:
    """Each session's run latency (ms; the least of `rounds` runs after one warm-up, the sizes
    interleaved) on zero inputs."""
    feeds = {b: [np.zeros((b, *shape), np.float32) for _, shape in inputs] for b in sessions}
    times: Dict[int, List[float]] = {b: [] for b in sessions}
    for r in range(rounds + 1):
        for b, session in sessions.items():
            t0 = time.perf_counter()
            session.run(feeds[b])
            if r > 0:
                times[b].append((time.perf_counter() - t0) * 1e3)
    return {b: min(t) for b, t in times.items()}


class Refusal:
    """What a model replica answers to a bad request (not an exception: Ray would log each one
    with its traceback); the ingress raises it as RequestError."""

    def __init__(self, message: str) -> None:
        self.message = message


class Answer:
    """A model replica's outputs with where they were computed (Ray node id, process id)."""

    def __init__(self, outputs: List[np.ndarray], node_id: str, pid: int) -> None:
        self.outputs = outputs
        self.node_id = node_id
        self.pid = pid


class UnknownModelError(KeyError):
    """A model this application does not serve (HTTP 404)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown model"


# ---- Checking a request ------------------------------------------------------------------------

def _check_request(config: ModelConfig, inputs: Sequence[Tuple[str, Tuple[int, ...]]],
                   x: Any) -> List[np.ndarray]:
    """The request's arrays in input order for a model of `config` whose inputs are `inputs` (name,
    shape without the batch); RequestError (one line) when it is wrong."""
    items = in_input_order(x, [n for n, _ in inputs], RequestError, f"model '{config.name}'")
    batch = None
    arrays = []
    for a, (name, shape) in zip(items, inputs):
        if not isinstance(a, np.ndarray):
            raise RequestError(f"input '{name}': expected an array, got {type(a).__name__}")
        if a.dtype != np.float32:
            raise RequestError(f"input '{name}': dtype {a.dtype}, expected float32")
        if a.ndim != len(shape) + 1 or tuple(a.shape[1:]) != shape:
            got = "x".join(map(str, a.shape)) or "scalar"
            raise RequestError(f"input '{name}': shape {got}, expected Nx"
                               f"{'x'.join(map(str, shape))}")
        n = a.shape[0]
        if n < 1 or n > config.max_batch:
            raise RequestError(f"input '{name}': batch {n}, expected 1 to max_batch "
                               f"{config.max_batch}")
        if batch is not None and n != batch:
            raise RequestError(f"input '{name}': batch {n}, the other inputs' {batch}")
        batch = n
        arrays.append(np.ascontiguousarray(a))
    return arrays


# ---- The deployments (made when first used: Ray is imported then) -------------------------------

_classes: Dict[str, Any] = {}


def _retryable() -> tuple:
    """The errors of a request whose replica (or its node) went away: worth sending again."""
    from ray import exceptions as rx
    kinds = [rx.RayActorError, rx.ActorUnavailableError]
    for name in ("NodeDiedError", "WorkerCrashedError", "OwnerDiedError", "ObjectLostError"):
        if hasattr(rx, name):
            kinds.append(getattr(rx, name))
    return tuple(kinds)


def _model_class() -> type:
    """The class of a model deployment (a local class: Ray sends it to the replicas by value)."""
    from ray import serve

    class StagecraftModel:
        """One replica of a served model: a Session per planned batch size, batched calls."""

        def __init__(self, config: Dict[str, Any]) -> None:
            import stagecraft
            self.config = ModelConfig(**config)
            c = self.config
            t0 = time.perf_counter()
            args = dict(schedule=c.schedule, cache_dir=c.cache_dir, search_budget=c.search_budget,
                        streams=c.streams or c.threads, progress=False, **c.session)
            if c.input_size:
                args["input_size"] = c.input_size
            # The model at batch 1 first: a model whose outputs the data shapes (an ONNX model's
            # data-dependent tail, e.g. in-graph NMS, which reads one sample) runs its samples one
            # at a time on the plan of batch 1.
            load_keys = ("input_size", "seed", "dtype", "calibration", "calibration_samples")
            one = stagecraft.Model(c.model, batch=1, **{k: v for k, v in args.items() if k in load_keys})
            plan_args = {k: v for k, v in args.items() if k not in load_keys}
            self.per_sample = bool(one.tail)
            sizes = [1] if self.per_sample else c.batch_sizes
            self.sessions = {b: stagecraft.Session(one, **plan_args) if b == 1 else
                             stagecraft.Session(c.model, batch=b, **args) for b in sizes}
            first = self.sessions[sizes[0]]
            self.inputs = [(t.name, tuple(t.shape[1:])) for t in first.inputs]
            self.outputs = [(t.name, tuple(t.shape[1:])) for t in first.outputs]
            self.description = first.description
            # How each batch size runs (batch_runs), from the plans' latencies measured here.
            self.costs = {} if self.per_sample else _run_costs(self.sessions, self.inputs)
            self.runs = {n: batch_runs(self.costs, n) for n in range(1, c.max_batch + 1)} if self.costs else {}
            self.start_s = time.perf_counter() - t0
            self._run_batch.set_max_batch_size(c.max_batch)
            self._run_batch.set_batch_wait_timeout_s(c.batch_wait_timeout_s)
            self.served = 0
            import ray
            self.node_id = ray.get_runtime_context().get_node_id()

        def metadata(self) -> Dict[str, Any]:
            c = self.config
            return {"name": c.name, "model": c.model, "max_batch": c.max_batch,
                    "batch_sizes": list(c.batch_sizes), "schedule": c.schedule,
                    "run_ms": self.costs, "batch_runs": self.runs,
                    "threads": c.threads, "streams": c.streams or c.threads,
                    "device": self.description, "plan": self.sessions[max(self.sessions)].plan,
                    "per_sample": self.per_sample,
                    "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
                    "inputs": [{"name": n, "shape": [-1, *s], "datatype": "FP32"}
                               for n, s in self.inputs],
                    "outputs": [{"name": n, "shape": [-1, *s], "datatype": "FP32"}
                                for n, s in self.outputs],
                    "node_id": self.node_id, "pid": os.getpid(),
                    "start_s": self.start_s, "served": self.served}

        def _check(self, x: Any) -> List[np.ndarray]:
            """The request's arrays in input order; RequestError (one line) when it is wrong."""
            return _check_request(self.config, self.inputs, x)

        async def infer(self, x: Any) -> Union[Answer, Refusal]:
            """The outputs (in the model's output order) for x: an array, a list in input order
            or a dict by input name, float32, batch 1..max_batch; batched with other calls."""
            try:
                arrays = self._check(x)
            except RequestError as e:
                return Refusal(str(e))
            outputs = await self._run_batch(arrays)
            if isinstance(outputs, Refusal):
                return outputs
            return Answer(outputs, self.node_id, os.getpid())

        @serve.batch(max_batch_size=8, batch_size_fn=lambda items: sum(a[0].shape[0] for a in items))
        async def _run_batch(self, items: List[List[np.ndarray]]) -> List[Any]:
            if self.per_sample:
                return await asyncio.get_running_loop().run_in_executor(None, self._run_samples, items)
            counts = [a[0].shape[0] for a in items]
            arrays = [np.concatenate([a[i] for a in items]) if len(items) > 1 else items[0][i]
                      for i in range(len(self.inputs))]
            # The session releases the GIL; the event loop keeps taking requests meanwhile.
            outs = await asyncio.get_running_loop().run_in_executor(
                None, _run_pieces, self.sessions, self.runs[sum(counts)], arrays)
            self.served += len(items)
            results, start = [], 0
            for k in counts:
                results.append([y[start:start + k] for y in outs])
                start += k
            return results

        def _run_samples(self, items: List[List[np.ndarray]]) -> List[Any]:
            """Each request's samples one at a time (plan, then the tail), joined along the first
            dimension when their shapes allow it; a Refusal for a request whose do not."""
            results: List[Any] = []
            for arrays in items:
                per = [self.sessions[1].run([x[j:j + 1] for x in arrays]) for j in range(arrays[0].shape[0])]
                self.served += 1
                results.append(_join_samples(per, [n for n, _ in self.outputs]))
            return results

    return StagecraftModel


def _join_samples(per: List[List[np.ndarray]], names: Sequence[str]) -> Union[List[np.ndarray], Refusal]:
    """The outputs of one request's samples (each run alone) joined along their first dimension,
    which must be 1; one sample's outputs as they are."""
    if len(per) == 1:
        return per[0]
    joined = []
    for k, name in enumerate(names):
        shapes = [p[k].shape for p in per]
        if shapes[0][:1] != (1,):
            return Refusal(f"output '{name}' of one sample has shape {list(shapes[0])}: its first "
                           f"dimension is not the batch; send one sample per request")
        if any(sh != shapes[0] for sh in shapes):
            other = next(sh for sh in shapes if sh != shapes[0])
            return Refusal(f"output '{name}' has shape {list(shapes[0])} for one sample and "
                           f"{list(other)} for another of the same request: send them in separate "
                           f"requests")
        joined.append(np.concatenate([p[k] for p in per]))
    return joined


def _ingress_class() -> type:
    """The class of the ingress deployment (a local class, as _model_class's)."""

    class StagecraftIngress:
        """HTTP (KServe v2 paths, JSON and .npy) and the handle API in front of the models."""

        def __init__(self, models: Dict[str, Any], retries: int = 8, retry_s: float = 0.5) -> None:
            self.models = dict(models)
            self.retries = int(retries)
            self.retry_s = float(retry_s)
            self._meta: Dict[str, Dict[str, Any]] = {}
            self.retried = 0

        def _handle(self, model: str) -> Any:
            h = self.models.get(model)
            if h is None:
                raise UnknownModelError(f"unknown model '{model}' (served: "
                                        f"{', '.join(sorted(self.models)) or 'none'})")
            return h

        async def _call(self, model: str, method: str, *args: Any) -> Any:
            h = self._handle(model)
            retryable = _retryable()
            for attempt in range(self.retries + 1):
                try:
                    result = await getattr(h, method).remote(*args)
                    if isinstance(result, Refusal):
                        raise RequestError(result.message)
                    return result
                except RequestError:
                    raise
                except retryable:
                    if attempt == self.retries:
                        raise
                    self.retried += 1
                    await asyncio.sleep(self.retry_s * min(2 ** attempt, 8))

        async def infer(self, model: str, x: Any, with_replica: bool = False) -> Any:
            """The handle API: the outputs of `model` for x (see StagecraftModel.infer); with
            `with_replica`, (outputs, {"node_id", "pid"}) of the replica that computed them."""
            answer = await self._call(model, "infer", x)
            if with_replica:
                return answer.outputs, {"node_id": answer.node_id, "pid": answer.pid}
            return answer.outputs

        async def metadata(self, model: str) -> Dict[str, Any]:
            meta = self._meta.get(model)
            if meta is None:
                meta = self._meta[model] = await self._call(model, "metadata")
            return meta

        async def models_served(self) -> List[str]:
            return sorted(self.models)

        async def stats(self) -> Dict[str, Any]:
            return {"retried": self.retried}

        async def __call__(self, request: Any) -> Any:
            from starlette.responses import JSONResponse, PlainTextResponse
            parts = [p for p in request.url.path.split("/") if p]
            if "v2" in parts:  # the path after the application's route prefix
                parts = parts[parts.index("v2"):]
            try:
                if request.method == "GET":
                    if parts[:2] == ["v2", "health"]:
                        return PlainTextResponse("ok\n")
                    if parts == ["v2", "models"]:
                        return JSONResponse({"models": sorted(self.models)})
                    if len(parts) == 3 and parts[:2] == ["v2", "models"]:
                        return JSONResponse(await self.metadata(parts[2]))
                if request.method == "POST" and len(parts) == 4 and parts[:2] == ["v2", "models"] \
                        and parts[3] == "infer":
                    return await self._infer_http(parts[2], request)
                return PlainTextResponse(f"no route {request.method} {request.url.path} (POST "
                                         f"/v2/models/MODEL/infer, GET /v2/models/MODEL)\n",
                                         status_code=404)
            except UnknownModelError as e:
                return PlainTextResponse(_one_line(e) + "\n", status_code=404)
            except RequestError as e:
                return PlainTextResponse(_one_line(e) + "\n", status_code=400)

        async def _infer_http(self, model: str, request: Any) -> Any:
            self._handle(model)
            kind = request.headers.get("content-type", "application/json").split(";")[0].strip()
            body = await request.body()
            x = _decode_body(kind, body)
            outputs, replica = await self.infer(model, x, with_replica=True)
            names = [o["name"] for o in (await self.metadata(model))["outputs"]]
            # Which replica answered (observability; the tests check that requests spread).
            headers = {"x-stagecraft-node": replica["node_id"], "x-stagecraft-pid": str(replica["pid"])}
            return _encode_body(kind, model, names, outputs, headers)

    return StagecraftIngress


def _make_classes() -> Dict[str, Any]:
    """The deployment classes, made (and Ray imported) once per process."""
    if _classes:
        return _classes
    _classes["model"] = _model_class()
    _classes["ingress"] = _ingress_class()
    return _classes


def model_deployment_name(name: str) -> str:
    return f"stagecraft_{name}"


def app(models: Sequence[Union[ModelConfig, Mapping[str, Any]]], *, ingress_on_head: bool = True,
        ingress_replicas: int = 1, retries: int = 8, retry_s: float = 0.5,
        others: Optional[Mapping[str, Any]] = None) -> Any:
    """A Ray Serve application: the ingress (HTTP + handle API) in front of one deployment per
    model (`ModelConfig`, or a dict of its fields). Run it with ``serve.run(app(...))``.
    ``others``: more model deployments by name (bound, with the same methods: ``infer`` answering
    an `Answer` or a `Refusal`, ``metadata``), e.g. another engine to compare with
    (bench/ray_serve_bench.py)."""
    from ray import serve
    classes = _make_classes()
    handles = dict(others or {})
    for m in models:
        c = m if isinstance(m, ModelConfig) else ModelConfig(**m)
        if c.name in handles:
            raise ValueError(f"model name '{c.name}' given twice")
        env = {"OMP_NUM_THREADS": str(c.threads), **c.env}
        options: Dict[str, Any] = {
            "name": model_deployment_name(c.name),
            "ray_actor_options": {"num_cpus": c.num_cpus if c.num_cpus is not None else c.threads,
                                  "runtime_env": {"env_vars": env}},
            # The batch queue needs max_batch requests of one sample in hand to fill a batch.
            "max_ongoing_requests": max(2 * c.max_batch, 4),
        }
        if c.autoscaling_config:
            options["autoscaling_config"] = dict(c.autoscaling_config)
            options["num_replicas"] = "auto"
        else:
            options["num_replicas"] = int(c.num_replicas)
        if c.max_replicas_per_node:
            options["max_replicas_per_node"] = int(c.max_replicas_per_node)
        config = {k: v for k, v in dataclasses.asdict(c).items()}
        config["batch_sizes"] = list(c.batch_sizes)
        handles[c.name] = serve.deployment(classes["model"]).options(**options).bind(config)
    actor: Dict[str, Any] = {"num_cpus": 0}
    if ingress_on_head:
        actor["resources"] = {HEAD_RESOURCE: 0.001}
    ingress = serve.deployment(classes["ingress"]).options(
        name="stagecraft_ingress", num_replicas=int(ingress_replicas), ray_actor_options=actor,
        max_ongoing_requests=1000)
    return ingress.bind(handles, retries, retry_s)


def app_builder(args: Dict[str, Any]) -> Any:
    """The application builder of ``serve run`` / ``serve deploy`` config files:
    ``import_path: stagecraft.ray_serve:app_builder`` with ``args: {models: [{model: ...,
    max_batch: ..., threads: ..., num_replicas: ...}, ...], ingress_on_head: true}``."""
    args = dict(args or {})
    models = args.pop("models", None)
    if not models:
        raise ValueError("args.models: expected a list of models ({model: NAME_OR_FILE, ...})")
    return app(models, **args)


class Client:
    """The Python handle API of a running application (in the Ray cluster's driver or a replica):
    ``Client("stagecraft").infer("squeezenet1_1", x)`` -> list of float32 arrays. Retries when
    the ingress cannot be reached (the ingress itself retries on a lost model replica)."""

    def __init__(self, app_name: str = DEFAULT_APP, retries: int = 8, retry_s: float = 0.5) -> None:
        from ray import serve
        self.handle = serve.get_app_handle(app_name)
        self.retries = int(retries)
        self.retry_s = float(retry_s)

    def _call(self, method: str, *args: Any) -> Any:
        retryable = _retryable()
        for attempt in range(self.retries + 1):
            try:
                return getattr(self.handle, method).remote(*args).result()
            except RequestError as e:  # raised again without Ray's traceback: one line
                raise RequestError(_one_line(e)) from None
            except UnknownModelError as e:
                raise UnknownModelError(_one_line(e)) from None
            except retryable:
                if attempt == self.retries:
                    raise
                time.sleep(self.retry_s * min(2 ** attempt, 8))

    def infer(self, model: str, x: Any, with_replica: bool = False) -> Any:
        """The outputs of `model` for x (a float32 array, a list in input order or a dict by
        name): a list of float32 arrays; with `with_replica`, (outputs, {"node_id", "pid"})."""
        return self._call("infer", model, x, with_replica)

    def metadata(self, model: str) -> Dict[str, Any]:
        return self._call("metadata", model)

    def models(self) -> List[str]:
        return self._call("models_served")
