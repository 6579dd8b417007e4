#!/usr/bin/env python3
"""Served throughput and latency: stagecraft's Triton backend against ONNX Runtime served by
PyTriton (Triton's Python binding around an onnxruntime.InferenceSession), on the same networks
with the same weights (`stagecraft graph NET --onnx`, its batch dimension made dynamic for ORT).

Both servers are the same tritonserver (nvidia-pytriton's), with dynamic batching up to
--max-batch and one model instance, both up; only one is sent requests at a time. Clients are
tritonclient's asyncio gRPC clients sending batch-1 requests: at each concurrency C, C requests are
always in flight, for --seconds per engine in --rounds blocks alternating between the engines (so
that other work on the machine falls on both alike), after a warm-up; requests/s and p50/p99
latency are reported, with the cores other work kept busy just before each block.
stagecraft's plans for batch sizes 1..max-batch are made (dp searched, measured on this CPU, kept
in the schedule cache under $BUILD/serve/cache) before any timing.

    bench/serve_bench.py [--models inception_v3,resnet50] [--concurrency 1,2,4,8] [--seconds 12]
                         [--rounds 3] [--max-batch 4] [--instances 1] [--schedule dp] [--search-budget 20]
                         [--out bench/results/serve_bench]

Writes OUT.md (table, machine, command), OUT.json (raw) and OUT.png (requests/s and p99 against
concurrency). Needs the CLI and libtriton_stagecraft.so built ($STAGECRAFT_BUILD_DIR or build/).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from pyenv import ROOT, machine, reexec_in_venv  # noqa: E402
from plot_bench import plot_served  # noqa: E402
from servers import add_load_options, export_dynamic_batch, free_port, request_inputs, stop_group  # noqa: E402

reexec_in_venv("serve_bench", __file__,
               ["numpy", "onnx", "onnxruntime", "nvidia-pytriton", "tritonclient[http,grpc]", "matplotlib"],
               ["numpy", "onnx", "onnxruntime", "pytriton", "tritonclient.grpc.aio", "matplotlib"])

import numpy as np  # noqa: E402

BUILD = Path(os.environ.get("STAGECRAFT_BUILD_DIR", ROOT / "build"))
# ---- The ONNX Runtime server (this script again, with --ort-server) ---------------------------

def serve_ort(args) -> None:
    import onnxruntime as ort
    from pytriton.decorators import batch
    from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
    from pytriton.triton import Triton, TritonConfig

    http, grpc, metrics = (int(p) for p in args.ort_server.split(","))
    config = TritonConfig(http_port=http, grpc_port=grpc, metrics_port=metrics, exit_timeout_secs=5)
    with Triton(config=config) as triton:
        for spec in args.models.split(","):
            name, path = spec.split("=")
            options = ort.SessionOptions()
            options.intra_op_num_threads = os.cpu_count() or 1
            options.inter_op_num_threads = 1
            session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
            src, dst = session.get_inputs()[0], session.get_outputs()[0]

            def make(session=session, src=src.name, dst=dst.name):
                @batch
                def infer(**inputs):
                    return {dst: session.run([dst], {src: inputs[src]})[0]}
                return infer

            triton.bind(model_name=name, infer_func=make(),
                        inputs=[Tensor(name=src.name, dtype=np.float32, shape=tuple(src.shape[1:]))],
                        outputs=[Tensor(name=dst.name, dtype=np.float32, shape=tuple(dst.shape[1:]))],
                        config=ModelConfig(max_batch_size=args.max_batch, batcher=DynamicBatcher()))
        triton.serve()


# ---- Load generation --------------------------------------------------------------------------

async def load(url: str, model: str, x: np.ndarray, concurrency: int, seconds: float) -> dict:
    import tritonclient.grpc.aio as aio
    client = aio.InferenceServerClient(url)
    meta = await client.get_model_metadata(model, as_json=True)
    inp = aio.InferInput(meta["inputs"][0]["name"], list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    latencies: list[float] = []
    end = time.perf_counter() + seconds

    async def worker():
        while time.perf_counter() < end:
            t = time.perf_counter()
            await client.infer(model, [inp])
            latencies.append(time.perf_counter() - t)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - start
    await client.close()
    return {"requests": len(latencies), "wall_s": wall, "latencies_ms": np.array(latencies) * 1e3}


async def output_of(url: str, model: str, x: np.ndarray) -> np.ndarray:
    import tritonclient.grpc.aio as aio
    client = aio.InferenceServerClient(url)
    meta = await client.get_model_metadata(model, as_json=True)
    inp = aio.InferInput(meta["inputs"][0]["name"], list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    y = (await client.infer(model, [inp])).as_numpy(meta["outputs"][0]["name"])
    await client.close()
    return y


def stub_env() -> dict:
    """The environment of the PyTriton server: its Python backend stub links the system's
    libpython3.X but runs this interpreter's standard library, so where this interpreter has a
    libpython of its own (pyenv), the stub must load that one (a 3.11.2 libpython under 3.11.7's
    multiprocessing fails in PyTriton's model start-up)."""
    import sysconfig
    env = dict(os.environ)
    libdir, soname = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")
    if libdir and soname and (Path(libdir) / soname).exists():
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (libdir, env.get("LD_LIBRARY_PATH")) if p)
    return env


def alone(nets: list[str], onnx_files: dict, inputs: dict, args) -> dict:
    """Median batch-1 latency of each engine in-process, without a server (ms), for reference."""
    import re
    import onnxruntime as ort
    out = {}
    for net in nets:
        run = subprocess.run([str(BUILD / "cli" / "stagecraft"), "run", net, "--backend", "cpu",
                              "--schedule", args.schedule, "--cache-dir", str(BUILD / "serve" / "cache"),
                              "--search-budget", args.search_budget, "--iters", "20"],
                             check=True, capture_output=True, text=True)
        ours = float(re.search(r"latency: median ([0-9.]+) ms", run.stdout + run.stderr).group(1))
        options = ort.SessionOptions()
        options.intra_op_num_threads = os.cpu_count() or 1
        session = ort.InferenceSession(str(onnx_files[net]), options, providers=["CPUExecutionProvider"])
        name = session.get_inputs()[0].name
        times = []
        for i in range(23):
            t = time.perf_counter()
            session.run(None, {name: inputs[net]})
            if i >= 3:
                times.append((time.perf_counter() - t) * 1e3)
        out[net] = {"stagecraft_ms": ours, "onnxruntime_ms": float(np.median(times))}
        print(f"alone: {net}: stagecraft {ours:.1f} ms, onnxruntime {out[net]['onnxruntime_ms']:.1f} ms")
    return out


def wait_ready(url: str, models: list[str], server: subprocess.Popen, seconds: float) -> None:
    import tritonclient.grpc as g
    client = g.InferenceServerClient(url)
    deadline = time.time() + seconds
    while time.time() < deadline:
        if server.poll() is not None:
            sys.exit(f"serve_bench: the server exited ({server.returncode}); see its log")
        try:
            if all(client.is_model_ready(m) for m in models):
                return
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(1)
    sys.exit(f"serve_bench: models {models} not ready after {seconds:.0f} s")


def busy_cores(seconds: float = 1.0) -> float:
    """Cores kept busy by the whole machine over `seconds` (/proc/stat): measured while our
    servers are idle, it is the other work on the machine, which a timing on shared cores feels."""
    def sample():
        fields = [int(v) for v in open("/proc/stat").readline().split()[1:]]
        idle = fields[3] + fields[4]
        return sum(fields) - idle, sum(fields)
    b0, t0 = sample()
    time.sleep(seconds)
    b1, t1 = sample()
    return (os.cpu_count() or 1) * (b1 - b0) / max(t1 - t0, 1)


def measure(engines: dict[str, tuple[str, dict[str, str]]], args, inputs: dict) -> list[dict]:
    """Every (model, concurrency) timed on every engine in alternating blocks (--rounds rounds of
    --seconds/--rounds each), so that other work on the machine falls on both alike."""
    results = []
    block = args.seconds / args.rounds
    for net, x in inputs.items():
        for c in args.concurrency:
            runs = {e: [] for e in engines}
            other = {e: [] for e in engines}
            for engine, (url, models) in engines.items():
                asyncio.run(load(url, models[net], x, c, args.warmup))
            for _ in range(args.rounds):
                for engine, (url, models) in engines.items():
                    other[engine].append(busy_cores(0.5))
                    runs[engine].append(asyncio.run(load(url, models[net], x, c, block)))
            for engine in engines:
                ms = np.concatenate([r["latencies_ms"] for r in runs[engine]])
                wall = sum(r["wall_s"] for r in runs[engine])
                r = {"engine": engine, "model": net, "concurrency": c, "requests": int(ms.size),
                     "rps": ms.size / wall, "p50_ms": float(np.percentile(ms, 50)),
                     "p99_ms": float(np.percentile(ms, 99)),
                     "other_busy_cores": float(np.mean(other[engine])),
                     "rps_per_round": [rr["requests"] / rr["wall_s"] for rr in runs[engine]]}
                results.append(r)
                print(f"{engine:12s} {net:14s} c={c}: {r['rps']:7.1f} req/s  p50 {r['p50_ms']:7.1f} ms  "
                      f"p99 {r['p99_ms']:7.1f} ms  (other work: {r['other_busy_cores']:.2f} cores)",
                      flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_load_options(parser, concurrency="1,2,4,8", seconds=12, rounds=3, warmup=2)
    parser.add_argument("--instances", type=int, default=1,
                        help="instances of stagecraft's model (sharing the cores through the core pool; ORT keeps one)")
    parser.add_argument("--schedule", default="dp")
    parser.add_argument("--search-budget", default="20")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "serve_bench"))
    parser.add_argument("--keep", action="store_true", help="keep the work folder (server logs)")
    parser.add_argument("--ort-server", help=argparse.SUPPRESS)  # internal: HTTP,GRPC,METRICS ports
    args = parser.parse_args()
    if args.ort_server:
        serve_ort(args)
        return
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    nets = args.models.split(",")
    work = Path(tempfile.mkdtemp(prefix="serve_bench_"))
    inputs = request_inputs(nets)
    onnx_files = {n: export_dynamic_batch(str(BUILD / "cli" / "stagecraft"), n, work) for n in nets}
    ours_ports = [free_port() for _ in range(3)]
    ort_ports = [free_port() for _ in range(3)]
    ours_url, ort_url = f"127.0.0.1:{ours_ports[1]}", f"127.0.0.1:{ort_ports[1]}"
    servers = []
    done = False
    try:
        # stagecraft's backend: plans (dp searched, cached) for every batch size before timing.
        warm = ",".join(str(b) for b in range(1, args.max_batch + 1))
        cmd = [str(ROOT / "scripts" / "serve.sh"), *nets, "--repo", str(work / "repo"),
               "--max-batch", str(args.max_batch), "--instances", str(args.instances),
               "--schedule", args.schedule, "--warmup", warm,
               "--search-budget", args.search_budget, "--backend-dir", str(BUILD / "serve" / "backends"),
               "--cache-dir", str(BUILD / "serve" / "cache"), "--port", str(ours_ports[0]),
               "--grpc-port", str(ours_ports[1]), "--metrics-port", str(ours_ports[2])]
        servers.append(subprocess.Popen(cmd, stdout=open(work / "stagecraft.log", "w"),
                                        stderr=subprocess.STDOUT, start_new_session=True))
        t0 = time.time()
        wait_ready(ours_url, nets, servers[-1], 3600)
        print(f"stagecraft: models ready in {time.time() - t0:.0f} s (plans for batch 1..{args.max_batch})")
        reference = alone(nets, onnx_files, inputs, args)
        # ONNX Runtime through PyTriton.
        specs = ",".join(f"ort_{n}={onnx_files[n]}" for n in nets)
        cmd = [sys.executable, __file__, "--ort-server", ",".join(map(str, ort_ports)), "--models", specs,
               "--max-batch", str(args.max_batch)]
        servers.append(subprocess.Popen(cmd, stdout=open(work / "ort.log", "w"), stderr=subprocess.STDOUT,
                                        start_new_session=True, env=stub_env()))
        wait_ready(ort_url, [f"ort_{n}" for n in nets], servers[-1], 600)
        agreement = {}
        for n in nets:
            ours = asyncio.run(output_of(ours_url, n, inputs[n]))
            theirs = asyncio.run(output_of(ort_url, f"ort_{n}", inputs[n]))
            agreement[n] = float(np.max(np.abs(ours - theirs)) / max(np.max(np.abs(theirs)), 1e-6))
        results = measure({"stagecraft": (ours_url, {n: n for n in nets}),
                           "onnxruntime": (ort_url, {n: f"ort_{n}" for n in nets})}, args, inputs)
        done = True
    finally:
        for server in servers:
            stop_group(server, timeout=60)
        if done and not args.keep:
            shutil.rmtree(work, ignore_errors=True)  # the exported models are large
        else:
            print(f"serve_bench: kept {work} (models, repository, server logs)")
    write(args, results, agreement, reference)


def write(args, results: list[dict], agreement: dict, reference: dict) -> None:
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    where = machine()
    load_avg = os.getloadavg()
    meta = {"machine": where, "command": " ".join(sys.argv), "max_batch": args.max_batch,
            "schedule": args.schedule, "seconds": args.seconds, "agreement": agreement,
            "loadavg_at_end": load_avg, "alone_ms": reference}
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    lines = ["# Served throughput: stagecraft's Triton backend vs ONNX Runtime in PyTriton", "",
             f"Machine: {where}. Load average at the end: {load_avg[0]:.2f}.",
             f"Command: `bench/serve_bench.py {' '.join(sys.argv[1:])}`", "",
             f"Same tritonserver (nvidia-pytriton), {args.instances} stagecraft instance(s) and one ORT instance, "
             f"dynamic batching up to {args.max_batch}, "
             f"batch-1 gRPC requests from asyncio clients, C in flight for {args.seconds:.0f} s per engine "
             f"in {args.rounds} blocks alternating between the engines (both servers up), after a "
             f"warm-up. stagecraft schedule: {args.schedule}. Outputs agree (max relative difference): "
             + ", ".join(f"{n} {e:.1e}" for n, e in agreement.items()) + ".",
             "Batch-1 median latency in-process, without a server: "
             + ", ".join(f"{n} stagecraft {r['stagecraft_ms']:.1f} ms, ONNX Runtime {r['onnxruntime_ms']:.1f} ms"
                         for n, r in reference.items()) + ".", "",
             "Other work: cores the rest of the machine kept busy in the half second before each "
             "block, mean per engine (stagecraft / ORT); rows with much of it are unreliable.", ""]
    busy = float(np.mean([r["other_busy_cores"] for r in results]))
    if busy > 0.25 * (os.cpu_count() or 1):
        lines += [f"**Warning: other work kept {busy:.1f} of the {os.cpu_count()} cores busy on average "
                  "during this run: the figures measure both engines under that contention (in "
                  "alternating blocks, so alike), not what they do on an idle machine. Rerun when "
                  "the machine is idle.**", ""]
    lines += [
             "| model | C | stagecraft req/s | p50 ms | p99 ms | ORT req/s | p50 ms | p99 ms | req/s ratio | other work |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    by = {(r["engine"], r["model"], r["concurrency"]): r for r in results}
    for net in args.models.split(","):
        for c in args.concurrency:
            s, o = by[("stagecraft", net, c)], by[("onnxruntime", net, c)]
            lines.append(f"| {net} | {c} | {s['rps']:.1f} | {s['p50_ms']:.1f} | {s['p99_ms']:.1f} | "
                         f"{o['rps']:.1f} | {o['p50_ms']:.1f} | {o['p99_ms']:.1f} | "
                         f"{s['rps'] / o['rps']:.2f}x | {s['other_busy_cores']:.1f} / {o['other_busy_cores']:.1f} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot_served(out.with_suffix(".png"), args.models.split(","), args.concurrency, by,
                f"Triton, dynamic batching <= {args.max_batch}: {where}")


if __name__ == "__main__":
    main()
