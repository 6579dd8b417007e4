#!/usr/bin/env python3
"""Served throughput and latency on Ray Serve: stagecraft's deployment (python/stagecraft/
ray_serve.py) against an ONNX Runtime session in the same deployment shape, on the same Ray
cluster, through the same ingress and HTTP proxy, with the same weights (`stagecraft graph NET
--onnx`, batch dimension made dynamic for ORT).

Both engines: --replicas replicas of --threads threads each (num_cpus = threads; ORT's
intra_op_num_threads = threads), @serve.batch up to --max-batch samples (stagecraft: plans for
1, 2, 4, ... max-batch, made before timing, the dp schedules searched once into a shared cache).
Clients: aiohttp sending batch-1 .npy requests over HTTP; at each concurrency C, C requests are
always in flight, for --seconds per engine in --rounds blocks alternating between the engines
(both deployed all along), after a warm-up. Reports requests/s and p50/p99 latency.

    bench/ray_serve_bench.py [--models inception_v3,resnet50] [--concurrency 1,2,4,8,16]
                             [--seconds 6] [--rounds 2] [--replicas 2] [--threads 1]
                             [--max-batch 4] [--schedule dp] [--out bench/results/ray_serve_bench]

Writes OUT.md, OUT.json and OUT.png. Needs the CLI and the Python module built
($STAGECRAFT_BUILD_DIR or build/: build/cli/stagecraft, build/python).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from pyenv import ROOT, machine, reexec_in_venv  # noqa: E402
from plot_bench import plot_served  # noqa: E402
from servers import add_load_options, export_dynamic_batch, free_port, request_inputs  # noqa: E402

reexec_in_venv("ray_serve_bench", __file__,
               ["numpy", "onnx", "onnxruntime", "ray[serve]", "aiohttp", "matplotlib"],
               ["numpy", "onnx", "onnxruntime", "ray.serve", "aiohttp", "matplotlib"])

import numpy as np  # noqa: E402

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # keep Ray on 127.0.0.1
BUILD = Path(os.environ.get("STAGECRAFT_BUILD_DIR", ROOT / "build"))
class OrtModel:
    """ONNX Runtime in stagecraft's deployment shape: @serve.batch up to max_batch samples, the
    same Answer/Refusal protocol towards the ingress."""

    def __init__(self, name: str, path: str, max_batch: int, threads: int,
                 batch_wait_timeout_s: float) -> None:
        import onnxruntime as ort
        import ray
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        self.src = self.session.get_inputs()[0].name
        self.dst = [o.name for o in self.session.get_outputs()]
        self.name, self.max_batch = name, max_batch
        self.node_id = ray.get_runtime_context().get_node_id()
        self._run_batch.set_max_batch_size(max_batch)
        self._run_batch.set_batch_wait_timeout_s(batch_wait_timeout_s)

    def metadata(self):
        return {"name": self.name, "max_batch": self.max_batch,
                "outputs": [{"name": n} for n in self.dst], "pid": os.getpid()}

    async def infer(self, x):
        from stagecraft.ray_serve import Answer, Refusal
        if not isinstance(x, np.ndarray) or x.dtype != np.float32 or not 1 <= x.shape[0] <= self.max_batch:
            return Refusal("expected one float32 array of batch 1..max_batch")
        return Answer(await self._run_batch(x), self.node_id, os.getpid())

    async def _run_batch(self, items):
        counts = [a.shape[0] for a in items]
        x = np.concatenate(items) if len(items) > 1 else items[0]
        loop = asyncio.get_running_loop()
        outs = await loop.run_in_executor(None, self.session.run, self.dst, {self.src: x})
        results, start = [], 0
        for k in counts:
            results.append([y[start:start + k] for y in outs])
            start += k
        return results


def p99_interval(ms: np.ndarray, resamples: int = 2000) -> list[float]:
    """A 90% bootstrap interval of the p99 of `ms`: how far the measured p99 could move with
    other draws of the same latencies (with 100 requests it is about their two largest)."""
    rng = np.random.default_rng(0)
    draws = rng.choice(ms, size=(resamples, ms.size), replace=True)
    p99 = np.percentile(draws, 99, axis=1)
    return [float(np.percentile(p99, 5)), float(np.percentile(p99, 95))]


def warm_cache(model: str, sizes: list[int], schedule: str, cache_dir: str, budget: float,
               streams: int) -> float:
    """Plans (dp searched) for every batch size, in a Ray task shaped like a replica, so that
    the replicas find the schedules in the cache instead of searching side by side."""
    import stagecraft
    t0 = time.time()
    for b in sizes:
        stagecraft.Session(model, batch=b, schedule=schedule, cache_dir=cache_dir,
                           search_budget=budget, streams=streams, progress=False)
    return time.time() - t0


async def load(url: str, body: bytes, concurrency: int, seconds: float) -> dict:
    import aiohttp
    latencies: list[float] = []
    errors = [0]
    end = time.perf_counter() + seconds
    headers = {"Content-Type": "application/x-npy"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as http:
        async def worker():
            while time.perf_counter() < end:
                t = time.perf_counter()
                async with http.post(url, data=body, headers=headers) as r:
                    await r.read()
                    if r.status != 200:
                        errors[0] += 1
                        continue
                latencies.append(time.perf_counter() - t)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - start
    return {"requests": len(latencies), "errors": errors[0], "wall_s": wall,
            "latencies_ms": np.array(latencies) * 1e3}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_load_options(p, concurrency="1,2,4,8,16", seconds=6, rounds=2, warmup=1.5)
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch-wait", type=float, default=0.002, help="@serve.batch wait (s)")
    p.add_argument("--schedule", default="dp")
    p.add_argument("--search-budget", type=float, default=10)
    p.add_argument("--cache-dir", default=str(BUILD / "serve" / "ray_cache"))
    p.add_argument("--cli", default=str(BUILD / "cli" / "stagecraft"))
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "ray_serve_bench"))
    args = p.parse_args()
    # SIGTERM (a timeout, ctest) unwinds like Ctrl-C, so that the Ray cluster is shut down.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    nets = args.models.split(",")
    import ray
    from ray import serve
    from stagecraft import ray_serve as rs

    work = Path(tempfile.mkdtemp(prefix="ray_serve_bench_"))
    inputs = request_inputs(nets)
    onnx_files = {n: export_dynamic_batch(args.cli, n, work) for n in nets}
    # Both engines and every model stay deployed (only one is sent requests at a time): the node
    # offers Ray CPUs for all of them, not the cores that one of them uses.
    cpus = 2 * len(nets) * args.replicas * args.threads
    ray.init(num_cpus=cpus, include_dashboard=False, _node_ip_address="127.0.0.1",
             log_to_driver=False)
    results, agreement, setup = [], {}, {}
    try:
        env = {"OMP_NUM_THREADS": str(args.threads)}
        sizes = rs.ModelConfig(nets[0], max_batch=args.max_batch).batch_sizes
        task = ray.remote(num_cpus=args.threads, runtime_env={"env_vars": env})(warm_cache)
        for n in nets:
            setup[n] = ray.get(task.remote(n, sizes, args.schedule, args.cache_dir,
                                           args.search_budget, args.threads))
            print(f"{n}: plans for batch {sizes} ({args.schedule}) in {setup[n]:.0f} s", flush=True)
        port = free_port()
        serve.start(proxy_location="HeadOnly", http_options={"host": "127.0.0.1", "port": port})
        ours = [rs.ModelConfig(n, max_batch=args.max_batch, schedule=args.schedule,
                               cache_dir=args.cache_dir, search_budget=args.search_budget,
                               threads=args.threads, num_replicas=args.replicas,
                               batch_wait_timeout_s=args.batch_wait) for n in nets]
        ort_dep = serve.deployment(OrtModel)
        serve_batch = serve.batch(max_batch_size=args.max_batch,
                                  batch_size_fn=lambda items: sum(a.shape[0] for a in items))
        OrtModel._run_batch = serve_batch(OrtModel._run_batch)
        others = {f"ort_{n}": ort_dep.options(
            name=f"ort_{n}", num_replicas=args.replicas, max_ongoing_requests=2 * args.max_batch,
            ray_actor_options={"num_cpus": args.threads, "runtime_env": {"env_vars": env}}).bind(
                f"ort_{n}", str(onnx_files[n]), args.max_batch, args.threads, args.batch_wait)
            for n in nets}
        t0 = time.time()
        serve.run(rs.app(ours, others=others), name="bench", route_prefix="/")
        print(f"both engines deployed in {time.time() - t0:.0f} s", flush=True)
        client = rs.Client("bench")
        for n in nets:
            (a,) = client.infer(n, inputs[n])
            (b,) = client.infer(f"ort_{n}", inputs[n])
            agreement[n] = float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-6))
        base = f"http://127.0.0.1:{port}/v2/models"
        block = args.seconds / args.rounds
        for n in nets:
            body = rs.encode_npy(inputs[n])
            engines = {"stagecraft": f"{base}/{n}/infer", "onnxruntime": f"{base}/ort_{n}/infer"}
            for c in args.concurrency:
                runs = {e: [] for e in engines}
                for url in engines.values():
                    asyncio.run(load(url, body, c, args.warmup))
                for _ in range(args.rounds):
                    for e, url in engines.items():
                        runs[e].append(asyncio.run(load(url, body, c, block)))
                for e in engines:
                    ms = np.concatenate([r["latencies_ms"] for r in runs[e]])
                    wall = sum(r["wall_s"] for r in runs[e])
                    r = {"engine": e, "model": n, "concurrency": c, "requests": int(ms.size),
                         "errors": sum(r["errors"] for r in runs[e]), "rps": ms.size / wall,
                         "p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)),
                         "p99_interval_ms": p99_interval(ms),
                         "rps_per_round": [rr["requests"] / rr["wall_s"] for rr in runs[e]],
                         # each round's latencies in order (ms): where the slow requests fell
                         "latencies_ms_per_round": [np.round(rr["latencies_ms"], 1).tolist() for rr in runs[e]]}
                    results.append(r)
                    print(f"{e:12s} {n:13s} c={c:2d}: {r['rps']:6.1f} req/s  p50 {r['p50_ms']:7.1f} ms  "
                          f"p99 {r['p99_ms']:7.1f} ms  errors {r['errors']}", flush=True)
    finally:
        try:
            serve.shutdown()
        finally:
            ray.shutdown()
            shutil.rmtree(work, ignore_errors=True)  # the exported models are large
    write(args, nets, results, agreement, setup)


def write(args, nets, results, agreement, setup) -> None:
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    where = machine()
    load_avg = os.getloadavg()
    meta = {"machine": where, "command": " ".join(sys.argv), "replicas": args.replicas,
            "threads": args.threads, "max_batch": args.max_batch, "schedule": args.schedule,
            "agreement": agreement, "plans_s": setup, "loadavg_at_end": load_avg}
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    by = {(r["engine"], r["model"], r["concurrency"]): r for r in results}
    lines = ["# Ray Serve: stagecraft's deployment vs ONNX Runtime in the same deployment shape", "",
             f"Machine: {where}. Load average at the end: {load_avg[0]:.2f} (other work on the "
             "machine falls on both engines alike: blocks alternate).",
             f"Command: `bench/ray_serve_bench.py {' '.join(sys.argv[1:])}`", "",
             f"One Ray node on loopback ({2 * len(nets) * args.replicas * args.threads} Ray CPUs: "
             f"both engines and models stay deployed, one is sent requests at a time); per engine "
             f"{args.replicas} replica(s) of {args.threads} thread(s) (num_cpus = threads), "
             f"@serve.batch up to {args.max_batch}, behind the same ingress and HTTP proxy; "
             f"batch-1 .npy requests over HTTP, C in flight for {args.seconds:.0f} s per engine in "
             f"{args.rounds} alternating blocks after a warm-up. stagecraft schedule: {args.schedule}. "
             "Outputs agree (max relative difference): "
             + ", ".join(f"{n} {e:.1e}" for n, e in agreement.items()) + ".", "",
             "p99 ms with its 90% bootstrap interval in brackets; 'no (within noise)': the intervals "
             "overlap.", "",
             "| model | C | stagecraft req/s | p50 ms | p99 ms | ORT req/s | p50 ms | p99 ms | req/s ratio | p99 lower or equal |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for n in nets:
        for c in args.concurrency:
            s, o = by[("stagecraft", n, c)], by[("onnxruntime", n, c)]
            (sl, sh), (ol, oh) = s["p99_interval_ms"], o["p99_interval_ms"]
            verdict = ("yes" if s["p99_ms"] <= o["p99_ms"] else
                       "no (within noise)" if sl <= oh else "no")
            lines.append(f"| {n} | {c} | {s['rps']:.1f} | {s['p50_ms']:.1f} | {s['p99_ms']:.1f} "
                         f"[{sl:.0f}-{sh:.0f}] | {o['rps']:.1f} | {o['p50_ms']:.1f} | "
                         f"{o['p99_ms']:.1f} [{ol:.0f}-{oh:.0f}] | {s['rps'] / o['rps']:.2f}x | {verdict} |")
    errors = sum(r["errors"] for r in results)
    lines += ["", f"Requests answered with an error during the timing: {errors}."]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot_served(out.with_suffix(".png"), nets, args.concurrency, by,
                f"Ray Serve, {args.replicas}x{args.threads} thread(s), batch <= {args.max_batch}: {where}")


if __name__ == "__main__":
    main()
