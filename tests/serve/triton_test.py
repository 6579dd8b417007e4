"""A real Triton server with stagecraft's backend (tests/serve/test_triton.sh runs this).

Starts nvidia-pytriton's tritonserver through scripts/serve.sh on free loopback ports, in explicit
model control, with a repository of small models, then checks over HTTP and gRPC:
  - outputs equal `stagecraft run` on the same input (batch 2 over HTTP, batch 1 over gRPC; a
    built-in network and the same network from MODEL/1/model.onnx);
  - bad requests (wrong shape, data type, input name, a batch over max_batch_size) get one-line
    errors and the server keeps answering good ones;
  - a model ending in NonZero (a data-dependent tail, as in-graph NMS) answers with the output
    shapes each request's data gives;
  - a model with a bad config fails to load with its one-line reason, the server keeps serving;
  - a model with a reserved core serves beside the shared one;
  - while requests flow from several threads the model is reloaded and the other one unloaded and
    loaded again: no request of the flowing model fails;
  - the server's statistics count every successful inference.
Scale-out beyond one server is Ray Serve's (tests/serve/ray_cluster_test.py), or Triton's own on
Kubernetes (docs/ray_serve.md); there is no balancer of ours to test here.
Exits 77 with "SKIP: reason" only when tritonserver itself cannot run on this machine: a bare
server (an empty repository, no stagecraft) is started first; once it comes up, anything that
keeps the server with stagecraft's backend from coming up (serve.sh failing, the backend library
missing or not loading) is a failure.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from servers import free_port, stop_group  # noqa: E402
from tail_model import tail_input, tail_model, tail_reference  # noqa: E402
SIZE = 64  # squeezenet1_1 at 64x64: a few ms per run
MAX_BATCH = 4
SKIP = 77


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)
    print(f"ok: {message}")


def write_repo(repo, cli):
    common = ["--repo", repo, "--input-size", str(SIZE), "--max-batch", str(MAX_BATCH),
              "--schedule", "greedy", "--cache-dir", os.path.join(os.path.dirname(repo), "cache"),
              "--no-server"]
    serve = os.path.join(ROOT, "scripts", "serve.sh")
    subprocess.run([serve, "squeezenet1_1", "--name", "squeezenet", "--instances", "2"] + common,
                   check=True)
    subprocess.run([serve, "squeezenet1_1", "--name", "fast", "--reserve-cores", "1",
                    "--warmup", "1", "--batch-sizes", f"2,{MAX_BATCH}"] + common, check=True)
    subprocess.run([serve, "squeezenet1_1", "--name", "broken"] + common, check=True)
    # The same network as an ONNX file (same seeded weights): MODEL/1/model.onnx.
    onnx_file = os.path.join(os.path.dirname(repo), "squeezenet.onnx")
    subprocess.run([cli, "graph", "squeezenet1_1", "--input-size", str(SIZE), "--onnx", onnx_file],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run([serve, onnx_file, "--name", "from_onnx"] + common, check=True)
    # The same file with a symbolic batch, height and width (an exporter's dynamic axes): served at
    # SIZE, requests choose other sizes (a plan per shape).
    import onnx

    dynamic = onnx.load(onnx_file)
    for axis, name in ((0, "N"), (2, "H"), (3, "W")):
        dynamic.graph.input[0].type.tensor_type.shape.dim[axis].dim_param = name
    dynamic_file = os.path.join(os.path.dirname(repo), "squeezenet_dynamic.onnx")
    onnx.save(dynamic, dynamic_file)
    subprocess.run([serve, dynamic_file, "--name", "dynamic"] + common, check=True)
    tail_file = os.path.join(os.path.dirname(repo), "tail.onnx")
    onnx.save(tail_model(), tail_file)
    subprocess.run([serve, tail_file, "--name", "tail"] + common, check=True)
    with open(os.path.join(repo, "broken", "config.pbtxt"), "a") as f:
        f.write('parameters { key: "shedule" value: { string_value: "dp" } }\n')


def start_server(repo, backend_dir, ports, log_path):
    http, grpc, metrics = ports
    cmd = [os.path.join(ROOT, "scripts", "serve.sh"), "--repo", repo, "--backend-dir", backend_dir,
           "--port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics),
           "--", "--model-control-mode=explicit", "--exit-timeout-secs=10"]
    log = open(log_path, "w")
    # Own process group, so that the server (exec'd by serve.sh) is stopped with everything.
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def probe_bare_server(tmp):
    """Exits 77 (skip) when nvidia-pytriton's tritonserver, with an empty repository and none of
    our code, does not come up on this machine; returns when it does."""
    import pytriton

    binary = os.path.join(os.path.dirname(pytriton.__file__), "tritonserver", "bin", "tritonserver")
    if not os.access(binary, os.X_OK):
        print(f"SKIP: nvidia-pytriton installed no tritonserver binary at {binary}")
        sys.exit(SKIP)
    empty = os.path.join(tmp, "empty_repo")
    os.makedirs(empty, exist_ok=True)
    http, grpc, metrics = free_port(), free_port(), free_port()
    log_path = os.path.join(tmp, "bare_server.log")
    with open(log_path, "w") as log:
        bare = subprocess.Popen([binary, f"--model-repository={empty}", f"--http-port={http}",
                                 f"--grpc-port={grpc}", f"--metrics-port={metrics}",
                                 "--model-control-mode=explicit", "--exit-timeout-secs=5"],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        if not wait_live(bare, httpclient.InferenceServerClient(f"127.0.0.1:{http}"), 120):
            tail = open(log_path).read().strip().splitlines()[-5:]
            print("SKIP: tritonserver (nvidia-pytriton) does not start on this machine, even with no "
                  "model and no stagecraft: " + " | ".join(tail))
            sys.exit(SKIP)
        print("a bare tritonserver comes up here: from now on a server that does not is our failure")
    finally:
        stop_group(bare, timeout=15)


def wait_live(server, client, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if server.poll() is not None:
            return False
        try:
            if client.is_server_live():
                return True
        except Exception:
            pass
        time.sleep(0.5)
    return False


def reference(cli, x, tmp):
    """`stagecraft run` of squeezenet1_1 on x (N,3,S,S)."""
    src, dst = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
    np.save(src, x)
    subprocess.run([cli, "run", "squeezenet1_1", "--input-size", str(x.shape[2]), "--batch",
                    str(x.shape[0]), "--backend", "cpu", "--schedule", "sequential",
                    "--cache-dir", os.path.join(tmp, "cache"), "--input", src,
                    "--output", dst, "--warmup", "0", "--iters", "1"], check=True,
                   stdout=subprocess.DEVNULL)
    return np.load(dst)


def relative_error(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-6))


def http_infer(client, model, name, x, dtype="FP32", output=None):
    inp = httpclient.InferInput(name, list(x.shape), dtype)
    inp.set_data_from_numpy(x)
    result = client.infer(model, [inp])
    return result.as_numpy(output) if output else result


def expect_error(what, fn, *needles):
    try:
        fn()
    except InferenceServerException as e:
        message = str(e.message() if hasattr(e, "message") else e)
        one_line = "\n" not in message.strip()
        found = all(n in message for n in needles)
        check(one_line and found, f"{what}: error '{message.strip()}'")
        return
    fail(f"{what}: no error")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--backend", required=True, help="path of libtriton_stagecraft.so")
    args = parser.parse_args()
    backend_dir = os.path.dirname(os.path.dirname(os.path.abspath(args.backend)))
    tmp = tempfile.mkdtemp(prefix="stagecraft_serve_")
    repo = os.path.join(tmp, "models")
    log_path = os.path.join(tmp, "server.log")
    ports = (free_port(), free_port(), free_port())
    probe_bare_server(tmp)
    write_repo(repo, args.cli)
    server = start_server(repo, backend_dir, ports, log_path)
    try:
        run_checks(args, server, ports, tmp, log_path, repo)
    except BaseException as e:
        if not (isinstance(e, SystemExit) and e.code in (0, SKIP)):
            print("server log (last lines):")
            lines = [l for l in open(log_path).read().splitlines() if not l.startswith(("|", "+"))]
            print("\n".join("  " + l for l in lines[-25:]))
        raise
    finally:
        stop_group(server, timeout=30)
    shutil.rmtree(tmp, ignore_errors=True)
    print("PASS")


def run_checks(args, server, ports, tmp, log_path, repo):
    http = httpclient.InferenceServerClient(f"127.0.0.1:{ports[0]}", concurrency=4)
    grpc = grpcclient.InferenceServerClient(f"127.0.0.1:{ports[1]}")
    # A bare server came up on this machine (probe_bare_server): one that does not come up with
    # our backend directory and serve.sh is our failure.
    if not wait_live(server, http, 120):
        tail = open(log_path).read().strip().splitlines()[-5:]
        fail("tritonserver with stagecraft's backend (scripts/serve.sh) did not come up: " + " | ".join(tail))
    print(f"server live on HTTP {ports[0]}, gRPC {ports[1]}")
    t0 = time.time()
    http.load_model("squeezenet")
    http.load_model("fast")
    check(http.is_model_ready("squeezenet") and http.is_model_ready("fast"),
          f"models loaded ({time.time() - t0:.1f} s)")
    meta = http.get_model_metadata("squeezenet")
    in_name, out_name = meta["inputs"][0]["name"], meta["outputs"][0]["name"]
    check(meta["inputs"][0]["shape"] == [-1, 3, SIZE, SIZE] and meta["outputs"][0]["shape"] == [-1, 1000],
          f"auto-completed config: input '{in_name}' {meta['inputs'][0]['shape']}, "
          f"output '{out_name}' {meta['outputs'][0]['shape']}")

    # Outputs against `stagecraft run` on the same input.
    rng = np.random.default_rng(0)
    x2 = rng.standard_normal((2, 3, SIZE, SIZE), dtype=np.float32)
    ref2 = reference(args.cli, x2, tmp)
    y2 = http_infer(http, "squeezenet", in_name, x2, output=out_name)
    check(y2.shape == (2, 1000) and relative_error(y2, ref2) < 1e-4,
          f"HTTP batch 2 equals stagecraft run (relative error {relative_error(y2, ref2):.1e})")
    g_in = grpcclient.InferInput(in_name, [1, 3, SIZE, SIZE], "FP32")
    g_in.set_data_from_numpy(x2[1:2])
    y1 = grpc.infer("squeezenet", [g_in]).as_numpy(out_name)
    check(relative_error(y1, ref2[1:2]) < 1e-4,
          f"gRPC batch 1 equals stagecraft run (relative error {relative_error(y1, ref2[1:2]):.1e})")
    yf = http_infer(http, "fast", in_name, x2[:1], output=out_name)
    check(relative_error(yf, ref2[:1]) < 1e-4,
          "the model on its reserved core, batch 1 run on its plan of 2, gives the same output")
    http.load_model("from_onnx")
    yo = http_infer(http, "from_onnx", in_name, x2, output=out_name)
    check(relative_error(yo, ref2) < 1e-4,
          f"the network served from model.onnx equals stagecraft run (relative error {relative_error(yo, ref2):.1e})")

    # Dynamic axes: the config says -1 where the request chooses; each shape gets its own plan.
    http.load_model("dynamic")
    meta = http.get_model_metadata("dynamic")
    check(meta["inputs"][0]["shape"] == [-1, 3, -1, -1] and meta["outputs"][0]["shape"] == [-1, -1],
          f"a model with dynamic axes: input {meta['inputs'][0]['shape']}, output {meta['outputs'][0]['shape']}")
    yd = http_infer(http, "dynamic", in_name, x2, output=out_name)
    check(relative_error(yd, ref2) < 1e-4, "at the configured size it equals stagecraft run")
    x_big = rng.standard_normal((2, 3, SIZE + 16, SIZE + 16), dtype=np.float32)
    y_big = http_infer(http, "dynamic", in_name, x_big, output=out_name)
    ref_big = reference(args.cli, x_big, tmp)
    check(y_big.shape == (2, 1000) and relative_error(y_big, ref_big) < 1e-4,
          f"at {SIZE + 16}x{SIZE + 16} (a plan made for it) it equals stagecraft run of that size "
          f"(relative error {relative_error(y_big, ref_big):.1e})")
    expect_error("dynamic model, a dimension it fixes", lambda: http_infer(
        http, "dynamic", in_name, np.zeros((1, 4, SIZE, SIZE), np.float32)), in_name)
    http.unload_model("dynamic")

    # A data-dependent tail: each request's output has the shape its data gives.
    http.load_model("tail")
    meta = http.get_model_metadata("tail")
    check(meta["outputs"][0]["shape"] == [-1, 2, -1],
          f"a model ending in NonZero: output {meta['outputs'][0]['shape']}")
    for count in (0, 3, 7):
        xt = tail_input(count, rng)
        yt = http_infer(http, "tail", "x", xt, output="y")
        check(yt.shape == (1, 2, count) and np.array_equal(yt, tail_reference(xt)),
              f"a request with {count} elements above 0.5 gets y of shape {list(yt.shape)}, equal to numpy's")
    xt2 = np.full((2, 4, 6), 0.1, np.float32)
    xt2[0, 0, :2] = xt2[1, 1, :3] = 0.9
    expect_error("samples of one request with different output shapes",
                 lambda: http_infer(http, "tail", "x", xt2), "separate requests")
    http.unload_model("tail")

    # Bad requests: one-line errors, and the server keeps serving.
    expect_error("wrong shape", lambda: http_infer(
        http, "squeezenet", in_name, np.zeros((1, 3, 32, 32), np.float32)), in_name)
    expect_error("wrong data type", lambda: http_infer(
        http, "squeezenet", in_name, np.zeros((1, 3, SIZE, SIZE), np.float64), dtype="FP64"), in_name)
    expect_error("wrong input name", lambda: http_infer(
        http, "squeezenet", "image", x2[:1]), "image")
    expect_error("batch over max_batch_size", lambda: http_infer(
        http, "squeezenet", in_name, np.zeros((MAX_BATCH + 1, 3, SIZE, SIZE), np.float32)),
        str(MAX_BATCH))
    g_bad = grpcclient.InferInput(in_name, [1, 3, SIZE], "FP32")
    g_bad.set_data_from_numpy(np.zeros((1, 3, SIZE), np.float32))
    expect_error("gRPC wrong rank", lambda: grpc.infer("squeezenet", [g_bad]), in_name)
    expect_error("bad config fails to load", lambda: http.load_model("broken"),
                 "unknown parameter 'shedule'")
    y2_again = http_infer(http, "squeezenet", in_name, x2, output=out_name)
    check(np.array_equal(y2_again, y2) and http.is_server_live(),
          "after the bad requests the server answers as before")

    # Reload while requests flow: nothing lost.
    stop = threading.Event()
    failures, done = [], [0]
    lock = threading.Lock()

    def flow(seed):
        client = httpclient.InferenceServerClient(f"127.0.0.1:{ports[0]}")
        r = np.random.default_rng(seed)
        while not stop.is_set():
            n = int(r.integers(1, MAX_BATCH + 1))
            try:
                y = http_infer(client, "squeezenet", in_name, np.repeat(x2[:1], n, axis=0),
                               output=out_name)
                ok = y.shape == (n, 1000) and relative_error(y, np.repeat(ref2[:1], n, axis=0)) < 1e-4
                with lock:
                    done[0] += 1
                    if not ok:
                        failures.append("wrong output")
            except Exception as e:  # noqa: BLE001 - every failure is counted
                with lock:
                    failures.append(str(e))

    stats_before = http.get_inference_statistics("squeezenet")["model_stats"][0]["inference_count"]
    threads = [threading.Thread(target=flow, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    http.load_model("squeezenet")  # reload while serving
    time.sleep(0.5)
    http.unload_model("fast")
    http.load_model("fast")
    http.load_model("squeezenet")  # and once more
    time.sleep(1.0)
    stop.set()
    for t in threads:
        t.join()
    check(not failures and done[0] > 0,
          f"{done[0]} requests while reloading, {len(failures)} failed"
          + (f": {failures[0]}" if failures else ""))
    check(http.is_model_ready("fast") and http.is_model_ready("squeezenet"), "both models ready after the reloads")
    # Before the reloads: 2 + 1 + 2 samples answered (errors are refused before the backend).
    check(int(stats_before) == 5, f"statistics: {stats_before} inferences counted before the reloads, 5 sent")
    log = open(log_path).read()
    check("1 reserved" in log and "core(s) shared by the models" in log,
          "server log: the core pool and the reserved core")
    check(all(f"planned batch {b}," in log for b in (1, 2)),
          "server log: a plan per batch size, made on first use")


if __name__ == "__main__":
    main()
