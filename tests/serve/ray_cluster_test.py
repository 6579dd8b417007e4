"""stagecraft on Ray Serve (python/stagecraft/ray_serve.py) on a real Ray cluster on loopback:
a head and two worker nodes (ray.cluster_utils.Cluster, as Ray Serve's own tests make one), usage
statistics off, every address 127.0.0.1. tests/serve/test_ray_serve.sh runs this. Checks:
  - outputs over the handle API, HTTP .npy and HTTP KServe v2 JSON equal a Session's in-process;
  - two replicas (max one per node): requests reach replicas on two nodes;
  - bad requests (wrong shape, dtype, truncated bodies, a batch over max_batch, an unknown model,
    bad JSON) get one line (HTTP 400/404, RequestError) and the deployment keeps serving;
  - a worker node holding a replica is removed while bounded request loops flow (handle API and
    HTTP): no accepted request fails (the ingress retries), and the replica comes back on the node
    that had none;
  - autoscaling (min 1, max 2): one replica grows to two under load and shrinks back to one after;
  - a model whose output shape the data decides (an ONNX model ending in NonZero, as in-graph NMS)
    answers each request with its own shape, and refuses in one line a request whose samples'
    shapes differ;
  - docs/ray_serve.yaml is a valid Serve config whose application builds.
Small: squeezenet1_1 at 64x64, greedy schedule, replicas of one thread and one CPU.
"""
from __future__ import annotations

import argparse
import os
import signal
import shutil
import sys
import tempfile
import threading
import time

import numpy as np

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_DEDUP_LOGS", "1")
# Ray turns 127.0.0.1 in a cluster address into the machine's own address (the interface towards
# the internet) unless told that clusters stay on this machine: loopback only.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

import ray  # noqa: E402
import requests  # noqa: E402
from ray import serve  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

import stagecraft  # noqa: E402
from stagecraft import ray_serve as rs  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from servers import free_port  # noqa: E402
from tail_model import tail_input, tail_model, tail_reference  # noqa: E402

NET, SIZE, MAX_BATCH = "squeezenet1_1", 64, 4
LOOPBACK = "127.0.0.1"


def fail(message):
    print(f"FAIL: {message}", flush=True)
    raise SystemExit(1)


def check(condition, message):
    if not condition:
        fail(message)
    print(f"ok: {message}", flush=True)


def relative_error(a, b):
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-6))


def wait_for(what, predicate, seconds, every=0.5):
    deadline = time.time() + seconds
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    fail(f"{what}: not within {seconds:.0f} s")


def running_replicas(app, deployment):
    """(running replicas, target) of a deployment, from serve.status()."""
    status = serve.status().applications.get(app)
    if status is None or deployment not in status.deployments:
        return 0, 0
    d = status.deployments[deployment]
    counts = d.replica_states or {}
    running = int(counts.get("RUNNING", 0))
    return running, sum(int(v) for v in counts.values())


def replica_nodes(app, deployment):
    """Node ids of the deployment's ALIVE replica actors (the GCS actor table: Ray's state API
    would need the dashboard, which this cluster does not run)."""
    from ray._private import state
    name = f"ServeReplica:{app}:{deployment}"
    return [a["Address"]["NodeID"] for a in state.actors().values()
            if a.get("ActorClassName") == name and a.get("State") == "ALIVE"]


class Loops:
    """Bounded request loops (`threads` of each kind): each sends at most `limit` requests, until
    stopped; every request that does not come back with the right output is a failure."""

    def __init__(self, client, url, x, ref, threads=2, limit=5000):
        self.client, self.url, self.x, self.ref = client, url, x, ref
        self.stop, self.lock = threading.Event(), threading.Lock()
        self.done, self.failures, self.nodes = 0, [], []
        self.threads = [threading.Thread(target=self.handle_loop, args=(limit,)) for _ in range(threads)]
        self.threads += [threading.Thread(target=self.http_loop, args=(limit,)) for _ in range(threads)]

    def _record(self, y, node):
        with self.lock:
            self.done += 1
            self.nodes.append((time.time(), node))
            if y.shape != self.ref.shape or relative_error(y, self.ref) >= 1e-4:
                self.failures.append("wrong output")

    def _fail(self, e):
        with self.lock:
            self.failures.append(f"{type(e).__name__}: {rs._one_line(e)[:300]}")

    def handle_loop(self, limit):
        for _ in range(limit):
            if self.stop.is_set():
                return
            try:
                (y,), replica = self.client.infer(NET, self.x, with_replica=True)
                self._record(y, replica["node_id"])
            except Exception as e:  # noqa: BLE001 - every failure counts
                self._fail(e)

    def http_loop(self, limit):
        session = requests.Session()
        body = rs.encode_npy(self.x)
        for _ in range(limit):
            if self.stop.is_set():
                return
            try:
                r = session.post(self.url, data=body, headers={"Content-Type": "application/x-npy"},
                                 timeout=60)
                if r.status_code != 200:
                    raise RuntimeError(f"HTTP {r.status_code}: {r.text.strip()}")
                self._record(rs.decode_npy(r.content), r.headers["x-stagecraft-node"])
            except Exception as e:  # noqa: BLE001
                self._fail(e)

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join()


def expect_http_error(what, url, body, content_type, status, *needles):
    r = requests.post(url, data=body, headers={"Content-Type": content_type}, timeout=60)
    text = r.text
    one_line = text.endswith("\n") and "\n" not in text.rstrip("\n") and len(text.strip()) > 0
    check(r.status_code == status and one_line and all(n in text for n in needles),
          f"{what}: HTTP {r.status_code} '{text.strip()}'")


def bad_requests(client, url, base_url, x):
    good = rs.encode_npy(x)
    expect_http_error("wrong shape", url, rs.encode_npy(np.zeros((1, 3, 32, 32), np.float32)),
                      "application/x-npy", 400, "shape 1x3x32x32", "3x64x64")
    expect_http_error("wrong dtype", url, rs.encode_npy(x.astype(np.float64)), "application/x-npy",
                      400, "float64")
    expect_http_error("truncated .npy body", url, good[:len(good) // 2], "application/x-npy", 400,
                      ".npy")
    expect_http_error("batch over max_batch", url,
                      rs.encode_npy(np.zeros((MAX_BATCH + 1, 3, SIZE, SIZE), np.float32)),
                      "application/x-npy", 400, f"batch {MAX_BATCH + 1}", str(MAX_BATCH))
    expect_http_error("unknown model", base_url + "/v2/models/resnet9000/infer", good,
                      "application/x-npy", 404, "resnet9000", NET)
    expect_http_error("truncated JSON", url, b'{"inputs": [{"name": "input", "sha', "application/json",
                      400, "JSON")
    expect_http_error("JSON of FP64", url, (
        b'{"inputs": [{"name": "input", "shape": [1], "datatype": "FP64", "data": [1.0]}]}'),
        "application/json", 400, "FP64")
    expect_http_error("JSON with too few values", url, (
        b'{"inputs": [{"name": "input", "shape": [1, 3, 64, 64], "datatype": "FP32", "data": [1.0]}]}'),
        "application/json", 400, "1 values")
    try:
        client.infer(NET, np.zeros((1, 3, SIZE), np.float32))
        fail("handle API, wrong rank: no error")
    except rs.RequestError as e:
        check("\n" not in str(e) and "1x3x64" in str(e), f"handle API, wrong rank: RequestError '{e}'")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args()
    # SIGTERM (a timeout, ctest) unwinds like Ctrl-C, so that the Ray cluster is shut down.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    t_start = time.time()
    tmp = tempfile.mkdtemp(prefix="stagecraft_ray_")
    cache = os.path.join(tmp, "cache")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, SIZE, SIZE), dtype=np.float32)
    # The reference: the same model in this process, one thread.
    (ref,) = stagecraft.Session(NET, batch=2, input_size=SIZE, schedule="sequential",
                                cache_dir=cache, progress=False).run(x)

    config_file_builds()
    head_args = dict(num_cpus=1, include_dashboard=False, node_ip_address=LOOPBACK,
                     dashboard_host=LOOPBACK)
    cluster = Cluster(initialize_head=True, head_node_args=head_args)
    try:
        workers = [cluster.add_node(num_cpus=1, node_ip_address=LOOPBACK) for _ in range(2)]
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
        alive = [n for n in ray.nodes() if n["Alive"]]
        check(len(alive) == 3 and all(n["NodeManagerAddress"] == LOOPBACK for n in alive),
              f"cluster: head and two workers on {LOOPBACK} ({time.time() - t_start:.1f} s)")
        port = free_port()
        serve.start(proxy_location="HeadOnly", http_options={"host": LOOPBACK, "port": port})
        base_url = f"http://{LOOPBACK}:{port}/spread"
        url = f"{base_url}/v2/models/{NET}/infer"
        spread_and_failover(cluster, workers, x, ref, cache, base_url, url)
        autoscaling(x, ref, cache, port)
        data_shaped_outputs(tmp, cache, port)
    finally:
        try:
            serve.shutdown()
        except Exception as e:  # noqa: BLE001 - the cluster may be half gone after a failure
            print(f"serve.shutdown: {e}")
        ray.shutdown()
        cluster.shutdown()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"PASS ({time.time() - t_start:.0f} s)")


def config_file_builds():
    """docs/ray_serve.yaml is a valid Serve config whose application builds."""
    import yaml
    from ray.serve.schema import ServeDeploySchema
    path = os.path.join(ROOT, "docs", "ray_serve.yaml")
    schema = ServeDeploySchema.model_validate(yaml.safe_load(open(path)))
    apps = [a for a in schema.applications if a.import_path == "stagecraft.ray_serve:app_builder"]
    check(len(apps) == 1 and type(rs.app_builder(apps[0].args)).__name__ == "Application",
          f"docs/ray_serve.yaml: a valid Serve config, its application builds "
          f"({len(apps[0].args['models'])} models)")


def spread_and_failover(cluster, workers, x, ref, cache, base_url, url):
    model = dict(model=NET, input_size=SIZE, max_batch=MAX_BATCH, schedule="greedy", threads=1,
                 cache_dir=cache, num_replicas=2, max_replicas_per_node=1)
    t0 = time.time()
    serve.run(rs.app([model], retry_s=0.25), name="spread", route_prefix="/spread")
    deployment = rs.model_deployment_name(NET)
    check(running_replicas("spread", deployment)[0] == 2,
          f"app 'spread' up: 2 replicas of {NET} ({time.time() - t0:.1f} s)")
    client = rs.Client("spread")
    meta = client.metadata(NET)
    check(meta["threads"] == 1 and meta["omp_num_threads"] == "1" and "1 threads" in meta["device"]
          and "on 1 stream(s)" in meta["plan"] and meta["batch_sizes"] == [1, 2, 4]
          and sorted(meta["batch_runs"]) == list(range(1, MAX_BATCH + 1))
          and all(n <= sum(r) < n + r[-1] for n, r in meta["batch_runs"].items()),
          f"a replica: 1 CPU, OMP_NUM_THREADS=1, session '{meta['device']}', 1 stream, plans for "
          f"batch {meta['batch_sizes']} made in {meta['start_s']:.2f} s, batches run as "
          f"{meta['batch_runs']} (run ms {meta['run_ms']})")

    # The same outputs on every path.
    (y,) = client.infer(NET, x)
    check(relative_error(y, ref) < 1e-4, f"handle API equals the in-process Session "
          f"({relative_error(y, ref):.1e})")
    r = requests.post(url, data=rs.encode_npy(x), headers={"Content-Type": "application/x-npy"})
    yh = rs.decode_npy(r.content)
    check(r.status_code == 200 and relative_error(yh, ref) < 1e-4, "HTTP .npy equals it")
    body = {"inputs": [{"name": "input", "shape": list(x.shape), "datatype": "FP32",
                        "data": x.reshape(-1).tolist()}]}
    r = requests.post(url, json=body).json()
    yj = np.asarray(r["outputs"][0]["data"], np.float32).reshape(r["outputs"][0]["shape"])
    check(r["model_name"] == NET and relative_error(yj, ref) < 1e-4,
          f"HTTP KServe v2 JSON equals it (output '{r['outputs'][0]['name']}' {r['outputs'][0]['shape']})")

    # Requests reach replicas on more than one node.
    nodes = set()
    lock = threading.Lock()

    def burst():
        for _ in range(10):
            (_y,), replica = client.infer(NET, x[:1], with_replica=True)
            with lock:
                nodes.add(replica["node_id"])
    threads = [threading.Thread(target=burst) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    placed = replica_nodes("spread", deployment)
    check(len(nodes) == 2 and nodes == set(placed),
          f"60 requests answered by replicas on {len(nodes)} nodes (placed on {len(set(placed))})")

    bad_requests(client, url, base_url, x)
    (y,) = client.infer(NET, x)
    check(relative_error(y, ref) < 1e-4 and running_replicas("spread", deployment)[0] == 2,
          "after the bad requests: both replicas running, answers unchanged")

    # A worker node holding a replica removed while requests flow.
    by_id = {w.node_id: w for w in workers}
    victim = next(by_id[n] for n in placed if n in by_id)
    spare = next(n for n in [cluster.head_node, *workers] if n.node_id not in placed)
    with Loops(client, url, x, ref) as loops:
        time.sleep(3.0)
        before = loops.done
        t_kill = time.time()
        cluster.remove_node(victim, allow_graceful=False)
        print(f"removed worker node {victim.node_id[:8]} ({before} requests answered so far)",
              flush=True)

        def recovered():
            now = set(replica_nodes("spread", deployment))
            return running_replicas("spread", deployment)[0] == 2 and spare.node_id in now
        wait_for("a replacement replica on the node that had none", recovered, 120)
        t_back = time.time() - t_kill
        wait_for("requests answered by the replacement",
                 lambda: any(n == spare.node_id for _, n in loops.nodes), 60)
        time.sleep(2.0)
    answered_after = sum(1 for t, _ in loops.nodes if t > t_kill)
    check(not loops.failures and loops.done > before and answered_after > 0,
          f"worker removed under load (2 handle + 2 HTTP loops): {loops.done} requests answered, "
          f"{answered_after} after the removal, {len(loops.failures)} failed"
          + (f": {loops.failures[0]}" if loops.failures else ""))
    check(set(replica_nodes("spread", deployment)) == {n.node_id for n in
                                                      [cluster.head_node, *workers] if n is not victim},
          f"the lost replica came back on the remaining nodes in {t_back:.1f} s")
    stats = serve.get_app_handle("spread").stats.remote().result()
    print(f"ingress retried {stats['retried']} request(s) whose replica went away")
    serve.delete("spread")


def autoscaling(x, ref, cache, port):
    model = dict(model=NET, input_size=SIZE, max_batch=MAX_BATCH, schedule="greedy", threads=1,
                 cache_dir=cache, batch_wait_timeout_s=0.0,
                 autoscaling_config=dict(min_replicas=1, max_replicas=2, initial_replicas=1,
                                         target_ongoing_requests=1, metrics_interval_s=0.5,
                                         look_back_period_s=2.0, upscale_delay_s=1.0,
                                         downscale_delay_s=3.0))
    t0 = time.time()
    serve.run(rs.app([model]), name="auto", route_prefix="/auto")
    deployment = rs.model_deployment_name(NET)
    check(running_replicas("auto", deployment) == (1, 1),
          f"app 'auto' up with 1 replica ({time.time() - t0:.1f} s)")
    client = rs.Client("auto")
    url = f"http://{LOOPBACK}:{port}/auto/v2/models/{NET}/infer"
    peak = [1]
    with Loops(client, url, x, ref, threads=4) as loops:
        def grew():
            peak[0] = max(peak[0], running_replicas("auto", deployment)[0])
            return peak[0] >= 2
        wait_for("autoscaling up to 2 replicas under load", grew, 90)
        t_up = time.time() - t0
        time.sleep(2.0)
    check(not loops.failures and loops.done > 0,
          f"under load (8 loops, {loops.done} requests, {len(loops.failures)} failed) the "
          f"deployment grew to {peak[0]} replicas ({t_up:.1f} s after deploying)")
    t1 = time.time()
    wait_for("scaling back down to 1 replica after the load",
             lambda: running_replicas("auto", deployment) == (1, 1), 120)
    check(True, f"after the load: back to 1 replica in {time.time() - t1:.1f} s")
    (y,) = client.infer(NET, x)
    check(relative_error(y, ref) < 1e-4, "and it still answers")
    serve.delete("auto")


def data_shaped_outputs(tmp, cache, port):
    import onnx
    path = os.path.join(tmp, "tail.onnx")
    onnx.save(tail_model(), path)
    serve.run(rs.app([dict(model=path, name="tail", max_batch=4, schedule="sequential", threads=1,
                           cache_dir=cache)]), name="tail", route_prefix="/tail")
    client = rs.Client("tail")
    meta = client.metadata("tail")
    check(meta["per_sample"] and meta["outputs"][0]["shape"] == [-1, 2, -1],
          f"a model ending in NonZero: samples run one at a time, output {meta['outputs'][0]['shape']}")
    rng = np.random.default_rng(1)
    for count in (0, 3, 7):
        xt = tail_input(count, rng)
        (y,) = client.infer("tail", xt)
        check(y.shape == (1, 2, count) and np.array_equal(y, tail_reference(xt)),
              f"a request with {count} elements above 0.5 gets y of shape {list(y.shape)}, equal to numpy's")
    same = np.concatenate([tail_input(2, rng), tail_input(2, rng)])
    (y,) = client.infer("tail", same)
    check(np.array_equal(y, np.concatenate([tail_reference(same[:1]), tail_reference(same[1:])])),
          "two samples of one shape in a request: joined along the batch")
    r = requests.post(f"http://{LOOPBACK}:{port}/tail/v2/models/tail/infer",
                      data=rs.encode_npy(np.concatenate([tail_input(1, rng), tail_input(4, rng)])),
                      headers={"Content-Type": "application/x-npy"})
    check(r.status_code == 400 and "separate requests" in r.text and r.text.count("\n") <= 1,
          f"samples of different output shapes in one request: HTTP 400 '{r.text.strip()}'")
    serve.delete("tail")


if __name__ == "__main__":
    main()
