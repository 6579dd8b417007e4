#!/usr/bin/env python3
"""Serves models with stagecraft on Ray Serve on a local Ray cluster (scripts/serve_ray.sh runs this).

Starts a Ray cluster of one node in this process (loopback only, usage statistics off, no
dashboard), runs the application of python/stagecraft/ray_serve.py with one model deployment per
MODEL and serves HTTP on 127.0.0.1:PORT until Ctrl-C or SIGTERM, then shuts everything down.
With --address, deploys onto a running cluster instead (`ray start --head ...` and workers).

    serve_ray.py MODEL... [--replicas N | --autoscale MIN:MAX] [--threads T] [--max-batch B]
                 [--schedule dp|greedy|sequential|FILE] [--input-size S] [--cache-dir DIR]
                 [--port 8000] [--num-cpus C] [--address HOST:PORT] [--app stagecraft]
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# Ray turns 127.0.0.1 into the machine's outward address unless clusters stay on this machine.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="+", help="built-in network names or .onnx/.yaml files")
    p.add_argument("--replicas", type=int, default=1)
    p.add_argument("--autoscale", help="MIN:MAX replicas (Ray Serve autoscaling)")
    p.add_argument("--target-ongoing", type=float, default=2.0,
                   help="autoscaling: requests in flight per replica it aims at")
    p.add_argument("--threads", type=int, default=1, help="threads (and Ray CPUs) per replica")
    p.add_argument("--max-batch", type=int, default=8)
    p.add_argument("--schedule", default="dp")
    p.add_argument("--input-size", type=int)
    p.add_argument("--cache-dir", default=os.path.expanduser("~/.cache/stagecraft/ray_serve"))
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--num-cpus", type=int, default=os.cpu_count() or 1,
                   help="CPUs of the local cluster's node")
    p.add_argument("--address", help="a running Ray cluster to deploy onto (default: start one)")
    p.add_argument("--app", default="stagecraft", help="application name")
    return p.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    if args.replicas < 1 or args.threads < 1 or args.max_batch < 1:
        sys.exit("serve_ray: --replicas, --threads and --max-batch must be >= 1")
    autoscaling = None
    if args.autoscale:
        try:
            lo, hi = (int(v) for v in args.autoscale.split(":"))
            assert 0 <= lo <= hi and hi >= 1
        except (ValueError, AssertionError):
            sys.exit(f"serve_ray: --autoscale '{args.autoscale}': expected MIN:MAX, 0 <= MIN <= MAX")
        autoscaling = {"min_replicas": lo, "max_replicas": hi, "initial_replicas": max(lo, 1),
                       "target_ongoing_requests": args.target_ongoing}
    import ray
    from ray import serve
    from stagecraft import ray_serve

    models = [ray_serve.ModelConfig(m, max_batch=args.max_batch, schedule=args.schedule,
                                    input_size=args.input_size, cache_dir=args.cache_dir,
                                    threads=args.threads, num_replicas=args.replicas,
                                    autoscaling_config=autoscaling) for m in args.models]
    if args.address:
        ray.init(address=args.address, log_to_driver=False)
    else:
        ray.init(num_cpus=args.num_cpus, include_dashboard=False, _node_ip_address="127.0.0.1",
                 log_to_driver=False)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    try:
        serve.start(proxy_location="HeadOnly", http_options={"host": "127.0.0.1", "port": args.port})
        t0 = time.time()
        serve.run(ray_serve.app(models), name=args.app, route_prefix="/")
        names = ", ".join(m.name for m in models)
        print(f"serve_ray: {names} ready in {time.time() - t0:.0f} s: POST "
              f"http://127.0.0.1:{args.port}/v2/models/{models[0].name}/infer (KServe v2 JSON or "
              f".npy); Ctrl-C stops", flush=True)
        while not stop:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        serve.shutdown()
        ray.shutdown()


if __name__ == "__main__":
    main()
