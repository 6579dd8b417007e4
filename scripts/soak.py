#!/usr/bin/env python3
"""A soak of both servers: the Triton backend (nvidia-pytriton's tritonserver with
libtriton_stagecraft.so, started by scripts/serve.sh) and the Ray Serve application
(python/stagecraft/ray_serve.py, on a Ray cluster of one node started here), side by side on
loopback, for --seconds.

Bounded request loops (--loops per server; each sends requests one after another until the end,
each request with a timeout) mix valid requests — random inputs, and inputs full of NaN, Inf or
denormals, batches 1..max_batch — with malformed and hostile ones: wrong shapes and dtypes,
truncated bodies, batches over max_batch, unknown models, garbage and bad JSON. Then, with the
loops stopped, each server is probed alone with batch-1 requests alternating normal / NaN / Inf /
denormal inputs, for the cost of the hostile values. Reports:
  - valid requests that failed (must be 0) — NaN/Inf/denormal requests are valid: answered 200;
  - bad requests not answered with one line (a 4xx and a one-line message; must be 0);
  - resident memory of the server processes (tritonserver; Ray's model replica, ingress and HTTP
    proxy) after warm-up and at the end (growth must be <= --rss-limit, default 5%);
  - the cost of NaN/Inf/denormal requests against normal ones (median latency ratio; target
    <= 1.2x, reported, and checked only with --check-cost: a timing is no test assertion).
Exits 1 when a check fails, 77 with "SKIP: reason" when a server cannot be installed or run here.

    scripts/soak.sh [--seconds 600] [--servers triton,ray] [--model squeezenet1_1]
                    [--input-size 224] [--out bench/results/soak.md]
"""
from __future__ import annotations

import argparse
import io
import json
import os
import signal
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from pyenv import machine  # noqa: E402
from servers import free_port, stop_group  # noqa: E402

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # keep Ray on 127.0.0.1
SKIP = 77
HOSTILE = ("nan", "inf", "denormal")


def rss_kib(pid: int) -> int:
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def values(kind: str, shape, rng) -> np.ndarray:
    if kind == "normal":
        return rng.standard_normal(shape, dtype=np.float32)
    fill = {"nan": np.nan, "inf": np.inf, "denormal": 1e-40}[kind]
    return np.full(shape, fill, np.float32)


def one_line(text: str) -> bool:
    return bool(text.strip()) and "\n" not in text.strip()


# ---- The two servers: how to make each kind of request, and how to read the answer -------------

class Server:
    name = ""
    pids: list[int] = []

    def __init__(self, args, shape):
        self.args, self.shape = args, tuple(shape)  # shape: one sample (C, H, W)

    def request(self, kind: str, rng) -> tuple[str, bytes, dict, int]:
        """(url, body, headers, expected batch or -1 for a bad request)."""
        raise NotImplementedError

    def answer_ok(self, status: int, headers, body: bytes, batch: int) -> bool:
        raise NotImplementedError

    def error_line(self, status: int, body: bytes) -> str | None:
        """The one-line message of a refused request, None when it is not one."""
        raise NotImplementedError


class TritonServer(Server):
    name = "triton"

    def __init__(self, args, shape, work: Path):
        super().__init__(args, shape)
        import tritonclient.http as th
        self.th = th
        backend = Path(args.backend).resolve()
        backend_dir = work / "backends"
        (backend_dir / "stagecraft").mkdir(parents=True)
        os.symlink(backend, backend_dir / "stagecraft" / "libtriton_stagecraft.so")
        repo = work / "triton_repo"
        serve = str(ROOT / "scripts" / "serve.sh")
        subprocess.run([serve, args.model, "--name", "soak", "--repo", str(repo), "--max-batch",
                        str(args.max_batch), "--schedule", "greedy", "--input-size",
                        str(args.input_size), "--cache-dir", str(work / "cache"), "--no-server"],
                       check=True, stdout=subprocess.DEVNULL)
        self.port = free_port()
        self.log = work / "triton.log"
        cmd = [serve, "--repo", str(repo), "--backend-dir", str(backend_dir), "--port", str(self.port),
               "--grpc-port", str(free_port()), "--metrics-port", str(free_port()),
               "--backend-cores", str(args.triton_cores)]
        self.proc = subprocess.Popen(cmd, stdout=open(self.log, "w"), stderr=subprocess.STDOUT,
                                     start_new_session=True)
        client = th.InferenceServerClient(f"127.0.0.1:{self.port}")
        deadline = time.time() + 180
        while time.time() < deadline:
            if self.proc.poll() is not None:
                tail = " | ".join(self.log.read_text().strip().splitlines()[-4:])
                raise RuntimeError(f"tritonserver exited ({self.proc.returncode}): {tail}")
            try:
                if client.is_model_ready("soak"):
                    break
            except Exception:  # noqa: BLE001 - not up yet
                pass
            time.sleep(0.5)
        else:
            raise RuntimeError("tritonserver: model 'soak' not ready after 180 s")
        self.pids = [self.proc.pid]  # serve.sh execs tritonserver
        self.url = f"http://127.0.0.1:{self.port}/v2/models/soak/infer"

    def _body(self, x: np.ndarray, dtype: str = "FP32", name: str = "input"):
        inp = self.th.InferInput(name, list(x.shape), dtype)
        inp.set_data_from_numpy(x)
        body, json_size = self.th.InferenceServerClient.generate_request_body([inp])
        headers = {"Content-Type": "application/octet-stream"}
        if json_size is not None:
            headers["Inference-Header-Content-Length"] = str(json_size)
        return body, headers

    def request(self, kind, rng):
        n = int(rng.integers(1, self.args.max_batch + 1))
        url = self.url
        if kind in ("normal", *HOSTILE):
            body, headers = self._body(values(kind, (n, *self.shape), rng))
            return url, body, headers, n
        x = rng.standard_normal((1, *self.shape), dtype=np.float32)
        if kind == "wrong_shape":
            body, headers = self._body(np.zeros((1, self.shape[0], 7, 9), np.float32))
        elif kind == "wrong_dtype":
            body, headers = self._body(x.astype(np.float64), "FP64")
        elif kind == "truncated":
            body, headers = self._body(x)
            body = body[:int(rng.integers(1, len(body)))]
        elif kind == "over_batch":
            body, headers = self._body(np.zeros((self.args.max_batch + 1, *self.shape), np.float32))
        elif kind == "unknown_model":
            body, headers = self._body(x)
            url = url.replace("/soak/", "/no_such_model/")
        elif kind == "wrong_name":
            body, headers = self._body(x, name="image")
        elif kind == "garbage":
            body, headers = rng.bytes(int(rng.integers(1, 4096))), {"Content-Type": "application/json"}
        else:  # bad_json
            body, headers = b'{"inputs": [{"name": "input", "shape": [1, 3', {"Content-Type": "application/json"}
        return url, body, headers, -1

    def answer_ok(self, status, headers, body, batch):
        if status != 200:
            return False
        size = int(headers.get("Inference-Header-Content-Length", len(body)))
        out = json.loads(body[:size])["outputs"][0]
        return out["shape"][0] == batch

    def error_line(self, status, body):
        # Triton's own HTTP front end answers a body that is not JSON with 500 (its choice, before
        # any backend sees the request); the report lists the statuses per kind.
        if not 400 <= status < 600:
            return None
        try:
            message = json.loads(body)["error"]
        except (ValueError, KeyError, TypeError):
            return None
        return message if one_line(message) else None

    def stop(self):
        stop_group(self.proc, timeout=30)


class RayServer(Server):
    name = "ray"

    def __init__(self, args, shape, work: Path):
        super().__init__(args, shape)
        import ray
        from ray import serve
        from stagecraft import ray_serve as rs
        self.ray, self.serve, self.rs = ray, serve, rs
        ray.init(num_cpus=max(2, args.ray_threads), include_dashboard=False,
                 _node_ip_address="127.0.0.1", log_to_driver=False)
        self.port = free_port()
        serve.start(proxy_location="HeadOnly", http_options={"host": "127.0.0.1", "port": self.port})
        model = rs.ModelConfig(args.model, name="soak", input_size=args.input_size,
                               max_batch=args.max_batch, schedule="greedy",
                               cache_dir=str(work / "cache"), threads=args.ray_threads)
        serve.run(rs.app([model]), name="soak", route_prefix="/")
        meta = rs.Client("soak").metadata("soak")
        from ray._private import state
        proxies = [a["Pid"] for a in state.actors().values()
                   if a.get("ActorClassName", "").endswith("ProxyActor") and a.get("State") == "ALIVE"]
        ingress = [a["Pid"] for a in state.actors().values()
                   if a.get("ActorClassName") == "ServeReplica:soak:stagecraft_ingress"
                   and a.get("State") == "ALIVE"]
        self.pids = [meta["pid"], *ingress, *proxies]
        self.url = f"http://127.0.0.1:{self.port}/v2/models/soak/infer"

    def request(self, kind, rng):
        n = int(rng.integers(1, self.args.max_batch + 1))
        npy = {"Content-Type": "application/x-npy"}
        if kind in ("normal", *HOSTILE):
            x = values(kind, (n, *self.shape), rng)
            if kind == "normal" and rng.random() < self.args.json_share:
                body = {"inputs": [{"name": "input", "shape": list(x.shape), "datatype": "FP32",
                                    "data": x.reshape(-1).tolist()}]}
                return self.url, json.dumps(body).encode(), {"Content-Type": "application/json"}, n
            return self.url, self.rs.encode_npy(x), npy, n
        x = rng.standard_normal((1, *self.shape), dtype=np.float32)
        url = self.url
        if kind == "wrong_shape":
            body = self.rs.encode_npy(np.zeros((1, self.shape[0], 7, 9), np.float32))
        elif kind == "wrong_dtype":
            body = self.rs.encode_npy(x.astype(np.float64))
        elif kind == "truncated":
            full = self.rs.encode_npy(x)
            body = full[:int(rng.integers(1, len(full)))]
        elif kind == "over_batch":
            body = self.rs.encode_npy(np.zeros((self.args.max_batch + 1, *self.shape), np.float32))
        elif kind == "unknown_model":
            body, url = self.rs.encode_npy(x), url.replace("/soak/", "/no_such_model/")
        elif kind == "wrong_name":
            body = json.dumps({"inputs": [{"name": "image", "shape": [1], "datatype": "FP32",
                                           "data": [0.0]}]}).encode()
            return url, body, {"Content-Type": "application/json"}, -1
        elif kind == "garbage":
            return url, rng.bytes(int(rng.integers(1, 4096))), {"Content-Type": "application/json"}, -1
        else:  # bad_json
            return url, b'{"inputs": [{"name": "input", "shape": [1, 3', {"Content-Type": "application/json"}, -1
        return url, body, npy, -1

    def answer_ok(self, status, headers, body, batch):
        if status != 200:
            return False
        if headers.get("content-type", "").startswith("application/json"):
            return json.loads(body)["outputs"][0]["shape"][0] == batch
        return np.load(io.BytesIO(body)).shape[0] == batch

    def error_line(self, status, body):
        if status not in (400, 404):
            return None
        text = body.decode(errors="replace")
        return text.strip() if one_line(text) else None

    def stop(self):
        try:
            self.serve.shutdown()
        finally:
            self.ray.shutdown()


# ---- Load --------------------------------------------------------------------------------------

BAD = ("wrong_shape", "wrong_dtype", "truncated", "over_batch", "unknown_model", "wrong_name",
       "garbage", "bad_json")


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.valid = self.valid_failed = self.bad = self.bad_wrong = 0
        self.by_kind: dict[str, int] = {}
        self.statuses: dict[str, set] = {}
        self.examples: list[str] = []
        self.messages: dict[str, str] = {}

    def note(self, kind: str, ok: bool, text: str, status: int = 0):
        with self.lock:
            self.statuses.setdefault(kind, set()).add(status)
            self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
            if kind in BAD:
                self.bad += 1
                self.bad_wrong += not ok
                if ok:
                    self.messages.setdefault(kind, text)
            else:
                self.valid += 1
                self.valid_failed += not ok
            if not ok and len(self.examples) < 5:
                self.examples.append(f"{kind}: {text[:200]}")


def loop(server: Server, seed: int, end: float, tally: Tally, bad_share: float, limit: int):
    import requests
    rng = np.random.default_rng(seed)
    session = requests.Session()
    for _ in range(limit):
        if time.time() >= end:
            return
        r = rng.random()
        if r < bad_share:
            kind = BAD[int(rng.integers(len(BAD)))]
        elif r < bad_share + 0.15:
            kind = HOSTILE[int(rng.integers(len(HOSTILE)))]
        else:
            kind = "normal"
        url, body, headers, batch = server.request(kind, rng)
        try:
            resp = session.post(url, data=body, headers=headers, timeout=60)
            if batch < 0:
                line = server.error_line(resp.status_code, resp.content)
                tally.note(kind, line is not None,
                           line if line is not None else f"HTTP {resp.status_code} {resp.content[:200]!r}",
                           resp.status_code)
            else:
                ok = server.answer_ok(resp.status_code, resp.headers, resp.content, batch)
                tally.note(kind, ok, "" if ok else f"HTTP {resp.status_code} {resp.content[:200]!r}",
                           resp.status_code)
        except Exception as e:  # noqa: BLE001 - a timeout or a dropped connection is a failure
            tally.note(kind, False, f"{type(e).__name__}: {e}")
            session = requests.Session()


def probe_cost(server: Server, rounds: int, seed: int = 7) -> dict:
    """Median latency (ms) of batch-1 requests of each kind, kinds alternating, the server alone."""
    import requests
    rng = np.random.default_rng(seed)
    session = requests.Session()
    times: dict[str, list[float]] = {k: [] for k in ("normal", *HOSTILE)}
    bodies = {}
    for k in times:
        saved = server.args.max_batch
        server.args.max_batch = 1  # batch-1 requests
        bodies[k] = server.request(k, rng)
        server.args.max_batch = saved
    for i in range(rounds + 3):
        for k, (url, body, headers, _) in bodies.items():
            t = time.perf_counter()
            resp = session.post(url, data=body, headers=headers, timeout=60)
            dt = (time.perf_counter() - t) * 1e3
            if resp.status_code != 200:
                raise RuntimeError(f"{server.name}: probe '{k}' answered HTTP {resp.status_code}")
            if i >= 3:  # after a warm-up
                times[k].append(dt)
    med = {k: float(np.median(v)) for k, v in times.items()}
    return {"median_ms": med, "ratio": {k: med[k] / med["normal"] for k in HOSTILE}}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=600)
    p.add_argument("--servers", default="triton,ray")
    p.add_argument("--model", default="squeezenet1_1")
    p.add_argument("--input-size", type=int, default=224)
    p.add_argument("--max-batch", type=int, default=4)
    p.add_argument("--loops", type=int, default=2, help="request loops per server")
    p.add_argument("--limit", type=int, default=1_000_000, help="requests per loop at most")
    p.add_argument("--bad-share", type=float, default=0.3)
    p.add_argument("--json-share", type=float, default=0.05, help="valid Ray requests sent as JSON")
    p.add_argument("--warmup", type=float, help="seconds before the first memory sample "
                   "(default: a fifth of --seconds, at most 60)")
    p.add_argument("--rss-limit", type=float, default=5.0, help="percent")
    p.add_argument("--probe-rounds", type=int, default=40)
    p.add_argument("--check-cost", action="store_true", help="fail when a hostile/normal ratio > 1.2")
    p.add_argument("--backend", help="libtriton_stagecraft.so (default: $BUILD/serve/backends/...)")
    p.add_argument("--triton-cores", type=int, default=1, help="the Triton backend's core pool")
    p.add_argument("--ray-threads", type=int, default=1, help="threads of the Ray replica")
    p.add_argument("--out", help="write the report (markdown) here")
    args = p.parse_args()
    # SIGTERM (a timeout, ctest) unwinds like Ctrl-C, so that the Ray cluster is shut down.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    build = Path(os.environ.get("STAGECRAFT_BUILD_DIR", ROOT / "build"))
    args.backend = args.backend or str(build / "serve" / "backends" / "stagecraft" /
                                       "libtriton_stagecraft.so")
    servers_wanted = args.servers.split(",")
    if "triton" in servers_wanted and not Path(args.backend).exists():
        print(f"soak: no Triton backend at {args.backend} (build it, or --backend PATH)")
        sys.exit(2)
    warmup = args.warmup if args.warmup is not None else min(60.0, args.seconds / 5)
    work = Path(tempfile.mkdtemp(prefix="stagecraft_soak_"))
    import stagecraft
    shape = stagecraft.Model(args.model, batch=1, input_size=args.input_size).inputs[0].shape[1:]
    servers: list[Server] = []
    failures = []
    try:
        for name in servers_wanted:
            t0 = time.time()
            try:
                servers.append({"triton": TritonServer, "ray": RayServer}[name](args, shape, work))
            except ImportError as e:
                print(f"SKIP: {name}: {e}")
                sys.exit(SKIP)
            print(f"{name}: up in {time.time() - t0:.0f} s (pids {servers[-1].pids})", flush=True)
        tallies = {s.name: Tally() for s in servers}
        start = time.time()
        end = start + args.seconds
        threads = [threading.Thread(target=loop, args=(s, 100 * i + j, end, tallies[s.name],
                                                        args.bad_share, args.limit))
                   for i, s in enumerate(servers) for j in range(args.loops)]
        for t in threads:
            t.start()
        time.sleep(min(warmup, args.seconds))
        rss_warm = {s.name: sum(rss_kib(p) for p in s.pids) for s in servers}
        samples = {s.name: [] for s in servers}
        while any(t.is_alive() for t in threads):
            for s in servers:
                samples[s.name].append(sum(rss_kib(p) for p in s.pids))
            time.sleep(min(5.0, max(0.5, args.seconds / 60)))
        for t in threads:
            t.join()
        soak_s = time.time() - start
        rss_end = {s.name: sum(rss_kib(p) for p in s.pids) for s in servers}
        costs = {s.name: probe_cost(s, args.probe_rounds) for s in servers}
        alive = {s.name: all(rss_kib(p) > 0 for p in s.pids) for s in servers}
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(work, ignore_errors=True)

    rows = []
    for s in servers:
        t = tallies[s.name]
        growth = 100.0 * (rss_end[s.name] - rss_warm[s.name]) / max(rss_warm[s.name], 1)
        peak = max(samples[s.name] or [rss_end[s.name]])
        cost = costs[s.name]
        worst = max(cost["ratio"].values())
        rows.append((s, t, growth, peak, cost, worst))
        if t.valid_failed:
            failures.append(f"{s.name}: {t.valid_failed} of {t.valid} valid requests failed: {t.examples}")
        if t.bad_wrong:
            failures.append(f"{s.name}: {t.bad_wrong} of {t.bad} bad requests not answered with one "
                            f"line: {t.examples}")
        if growth > args.rss_limit:
            failures.append(f"{s.name}: resident memory grew {growth:.1f}% after warm-up "
                            f"(limit {args.rss_limit}%)")
        if not alive[s.name]:
            failures.append(f"{s.name}: a server process is gone")
        if args.check_cost and worst > 1.2:
            failures.append(f"{s.name}: hostile values cost {worst:.2f}x a normal request (> 1.2x)")
    report = render(args, rows, soak_s, warmup, rss_warm, rss_end)
    print(report)
    if args.out:
        Path(args.out).write_text(report)
    for f in failures:
        print(f"FAIL: {f}")
    if failures:
        sys.exit(1)
    print("PASS")


def render(args, rows, soak_s, warmup, rss_warm, rss_end) -> str:
    cmd = "scripts/soak.sh " + " ".join(sys.argv[1:])
    lines = ["# Soak of both servers: Triton backend and Ray Serve app", "",
             f"Machine: {machine()}. Load average at the end: {os.getloadavg()[0]:.2f}.",
             f"Command: `{cmd}`", "",
             f"{args.model} at {args.input_size}x{args.input_size}, max_batch {args.max_batch}, greedy "
             f"schedule; {args.loops} request loops per server for {soak_s:.0f} s, both servers at once "
             f"on loopback; {args.bad_share:.0%} bad requests, 15% NaN/Inf/denormal-filled valid ones. "
             f"Memory: the servers' resident set after {warmup:.0f} s of warm-up and at the end "
             f"(Triton: tritonserver; Ray: model replica + ingress + HTTP proxy).", "",
             "| server | valid requests | failed | bad requests | not one line | RSS after warm-up | "
             "RSS at end | growth | peak |",
             "|---|---|---|---|---|---|---|---|---|"]
    for s, t, growth, peak, cost, worst in rows:
        lines.append(f"| {s.name} | {t.valid} | {t.valid_failed} | {t.bad} | {t.bad_wrong} | "
                     f"{rss_warm[s.name] / 1024:.0f} MiB | {rss_end[s.name] / 1024:.0f} MiB | "
                     f"{growth:+.1f}% | {peak / 1024:.0f} MiB |")
    lines += ["", f"Cost of hostile values (batch-1 requests, kinds alternating, each server alone "
              f"after the soak, {args.probe_rounds} rounds; median ms; target <= 1.2x):", "",
              "| server | normal | NaN | Inf | denormal | worst ratio |", "|---|---|---|---|---|---|"]
    for s, t, growth, peak, cost, worst in rows:
        m = cost["median_ms"]
        lines.append(f"| {s.name} | {m['normal']:.1f} | {m['nan']:.1f} ({cost['ratio']['nan']:.2f}x) | "
                     f"{m['inf']:.1f} ({cost['ratio']['inf']:.2f}x) | {m['denormal']:.1f} "
                     f"({cost['ratio']['denormal']:.2f}x) | {worst:.2f}x "
                     f"{'(met)' if worst <= 1.2 else '(MISSED)'} |")
    lines += ["", "Bad requests by kind and a message each server answered:", ""]
    for s, t, *_ in rows:
        for kind in BAD:
            if kind in t.by_kind:
                codes = "/".join(str(c) for c in sorted(t.statuses.get(kind, ())))
                lines.append(f"- {s.name} {kind} ({t.by_kind[kind]}, HTTP {codes}): "
                             f"`{t.messages.get(kind, '-')}`")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
