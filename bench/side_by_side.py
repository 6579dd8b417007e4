#!/usr/bin/env python3
"""stagecraft against ONNX Runtime and PyTorch on the CPU, model for model, in one process run.

Each torchvision model (random weights, batch-norm statistics calibrated on random images, as in
scripts/model_zoo.py) is exported to ONNX once (TorchScript exporter, opset 17, cached under
--work); then, for every model, the engines run the same input interleaved round by round
(stagecraft, ONNX Runtime, PyTorch eager, torch.compile), so that a machine's slow phase hits all
of them alike. Outputs are compared with ONNX Runtime's. Writes a Markdown table, the raw JSON
and a bar plot of latency relative to ONNX Runtime.

stagecraft runs through its Python package (build/python, made by ./scripts/test.sh), as a user's
`stagecraft.Session(model)` would: default layout and schedule unless --layout/--schedule say.

Usage: bench/side_by_side.py [--models a,b] [--rounds 8] [--block 5] [--out bench/results] [--no-compile]
       [--int8]   (also inception_v3 int8: stagecraft --dtype int8 against ORT's QDQ model)
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "scripts"))
from pyenv import ROOT, machine, reexec_in_venv  # noqa: E402
from model_zoo import PAUSE_S, WARMUP, time_interleaved  # noqa: E402

PACKAGES = ["numpy", "onnx", "onnxruntime", "onnxscript", "torch", "torchvision", "matplotlib", "timm"]
DEFAULT_MODELS = ["inception_v3", "googlenet", "resnet50", "squeezenet1_0", "densenet121",
                  "mobilenet_v2", "resnext50_32x4d", "timm/inception_resnet_v2"]


def median(v: list[float]) -> float:
    return statistics.median(v) if v else float("nan")


def rel_err(a, b) -> float:
    import numpy as np
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def engines_for(name: str, onnx_path: Path, model, x, args):
    """name -> callable running one inference on x (returns the output as numpy)."""
    import torch
    import stagecraft
    from model_zoo import ort_session  # scripts/ is on sys.path (set at import)

    engines = {}
    t0 = time.perf_counter()
    kwargs = {}
    if args.layout:
        kwargs["layout"] = args.layout
    if args.schedule:
        kwargs["schedule"] = args.schedule
    sess = stagecraft.Session(str(onnx_path), cache_dir=str(args.work / "cache"), **kwargs)
    setup_s = time.perf_counter() - t0
    engines["stagecraft"] = lambda: sess.run(x)[0]
    ort = ort_session(onnx_path)
    ort_name = ort.get_inputs()[0].name
    engines["onnxruntime"] = lambda: ort.run(None, {ort_name: x})[0]
    torch.set_num_threads(os.cpu_count() or 1)
    tx = torch.from_numpy(x)

    def eager():
        with torch.inference_mode():
            return model(tx).numpy()
    engines["torch eager"] = eager
    if not args.no_compile:
        try:
            compiled = torch.compile(model)
            with torch.inference_mode():
                compiled(tx)  # compiles now, outside the timed rounds

            def comp():
                with torch.inference_mode():
                    return compiled(tx).numpy()
            engines["torch.compile"] = comp
        except Exception as e:  # noqa: BLE001 - a missing compiler is reported, not fatal
            print(f"  torch.compile unavailable for {name}: {str(e).splitlines()[0][:160]}")
    return engines, setup_s, sess


def quantised_onnx(fp32: Path, x, work: Path) -> Path:
    """ORT's own static int8 (QDQ) model of `fp32`, calibrated on a few random inputs."""
    import numpy as np
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process
    out = work / (fp32.stem + "_qdq.onnx")
    if out.exists():
        return out
    pre = work / (fp32.stem + "_pre.onnx")
    quant_pre_process(str(fp32), str(pre))
    import onnxruntime as ort
    name = ort.InferenceSession(str(pre), providers=["CPUExecutionProvider"]).get_inputs()[0].name

    class Reader(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(1)
            self.data = iter([{name: rng.standard_normal(x.shape).astype(np.float32)} for _ in range(8)])

        def get_next(self):
            return next(self.data, None)

    quantize_static(str(pre), str(out), Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS))
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--block", type=int, default=5, help="timed runs of one engine in a row per round")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--work", type=Path, default=ROOT / ".cache" / "side_by_side")
    parser.add_argument("--layout", default=None, help="stagecraft layout (default: the backend's)")
    parser.add_argument("--schedule", default=None, help="stagecraft schedule (default: Session's)")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--int8", action="store_true", help="add inception_v3 int8 vs ORT QDQ")
    args = parser.parse_args()
    reexec_in_venv("side_by_side", __file__, PACKAGES, ["numpy", "onnx", "onnxruntime", "torch",
                                                       "torchvision", "matplotlib"])
    sys.path.insert(0, str(ROOT / "build" / "python"))
    sys.path.insert(0, str(ROOT / "python"))
    try:
        import stagecraft
    except ImportError as e:
        sys.exit(f"side_by_side: the stagecraft package is not built ({e}); run ./scripts/test.sh")
    import numpy as np
    import onnxruntime
    import torch
    from model_zoo import calibrated_model, export, input_size, ort_session

    args.work.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in [m for m in args.models.split(",") if m]:
        size = input_size(name)
        print(f"{name}: exporting / loading", flush=True)
        model = calibrated_model(name, size)
        path = export(model, name, size, "ts", args.work)
        x = np.random.default_rng(0).standard_normal((1, 3, size, size)).astype(np.float32)
        engines, setup_s, sess = engines_for(name, path, model, x, args)
        want = engines["onnxruntime"]()
        errors = {k: rel_err(fn(), want) for k, fn in engines.items() if k != "onnxruntime"}
        samples = time_interleaved(engines, args.rounds, args.block)
        row = {"model": name, "input": list(x.shape), "setup_s": setup_s,
               "plan": sess.description,
               "median_ms": {k: median(v) for k, v in samples.items()},
               "samples_ms": samples, "max_rel_err": errors}
        rows.append(row)
        print("  " + ", ".join(f"{k} {median(v):.1f} ms" for k, v in samples.items()), flush=True)
        del engines, sess
    if args.int8:
        name = "inception_v3"
        size = input_size(name)
        model = calibrated_model(name, size)
        path = export(model, name, size, "ts", args.work)
        x = np.random.default_rng(0).standard_normal((1, 3, size, size)).astype(np.float32)
        qdq = quantised_onnx(path, x, args.work)
        fp32 = stagecraft.Session(str(path), cache_dir=str(args.work / "cache"))
        # Both int8 models calibrated on the same kind of samples as the input (N(0, 1)): the
        # generated calibration inputs (uniform in [-1, 1)) clip a third of such an input.
        samples = [np.random.default_rng(i + 1).standard_normal(x.shape).astype(np.float32)
                   for i in range(8)]
        calib = args.work / "inception_v3_normal.calib.yaml"
        stagecraft.calibrate(str(path), inputs=samples, path=str(calib))
        s8 = stagecraft.Session(str(path), dtype="int8", calibration=str(calib),
                                cache_dir=str(args.work / "cache"))
        ort32, ort8 = ort_session(path), ort_session(qdq)
        n32, n8 = ort32.get_inputs()[0].name, ort8.get_inputs()[0].name
        engines = {"stagecraft f32": lambda: fp32.run(x)[0], "stagecraft int8": lambda: s8.run(x)[0],
                   "onnxruntime f32": lambda: ort32.run(None, {n32: x})[0],
                   "onnxruntime int8 (QDQ)": lambda: ort8.run(None, {n8: x})[0]}
        want = engines["onnxruntime f32"]()
        errors = {k: rel_err(fn(), want) for k, fn in engines.items() if k != "onnxruntime f32"}
        samples = time_interleaved(engines, args.rounds, args.block)
        rows.append({"model": "inception_v3 int8", "input": list(x.shape),
                     "median_ms": {k: median(v) for k, v in samples.items()},
                     "samples_ms": samples, "max_rel_err": errors})
        print("  " + ", ".join(f"{k} {median(v):.1f} ms" for k, v in samples.items()), flush=True)
    write(args, rows, onnxruntime.__version__, torch.__version__, stagecraft)
    return 0


def write(args, rows, ort_version: str, torch_version: str, stagecraft) -> None:
    import math
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / "side_by_side"
    cmd = "bench/side_by_side.py " + " ".join(sys.argv[1:])
    info = {"date": str(datetime.date.today()), "machine": machine(), "onnxruntime": ort_version,
            "torch": torch_version, "command": cmd, "rounds": args.rounds, "block": args.block,
            "stagecraft_backend": rows[0].get("plan", "") if rows else ""}
    (stem.with_suffix(".json")).write_text(json.dumps({"info": info, "rows": rows}, indent=1) + "\n")
    fp32 = [r for r in rows if "onnxruntime" in r["median_ms"]]
    engines = []
    for r in fp32:
        for k in r["median_ms"]:
            if k not in engines:
                engines.append(k)
    lines = ["# stagecraft, ONNX Runtime and PyTorch on the CPU, side by side", "",
             f"- date: {info['date']}; machine: {info['machine']}",
             f"- ONNX Runtime {ort_version} (CPU provider, all graph optimisations, "
             f"{os.cpu_count()} intra-op threads); torch {torch_version} "
             f"({os.cpu_count()} threads); batch 1, f32, torchvision models with random weights "
             "and calibrated batch-norm statistics, TorchScript exporter (opset 17)",
             f"- {args.rounds} interleaved rounds after {WARMUP} warm-up runs each, each round a "
             f"{PAUSE_S * 1e3:.0f} ms pause, one untimed and {args.block} timed runs of every engine in a "
             "row (an engine timed right after another paid for the other's spinning worker threads: "
             "ONNX Runtime's pool burns a core for about 60 ms after a run); medians; "
             "ratio = engine / ONNX Runtime (below 1: faster than ORT)",
             f"- stagecraft: `Session(model.onnx)` (schedule dp, measured cost model, the backend's "
             f"default layout unless the command says): {info['stagecraft_backend']}",
             f"- command: `{cmd}`", "",
             "| model | " + " | ".join(f"{e} ms" for e in engines) + " | stagecraft / ORT | max rel err vs ORT |",
             "|---|" + "---|" * (len(engines) + 2)]
    ratios = []
    for r in fp32:
        m = r["median_ms"]
        ratio = m["stagecraft"] / m["onnxruntime"]
        ratios.append(ratio)
        cells = [f"{m[e]:.1f}" if e in m else "-" for e in engines]
        lines.append(f"| {r['model']} | " + " | ".join(cells) +
                     f" | {ratio:.2f}x | {r['max_rel_err'].get('stagecraft', float('nan')):.1e} |")
    if ratios:
        geo = math.exp(sum(math.log(v) for v in ratios) / len(ratios))
        lines += ["", f"Geometric mean stagecraft / ORT: **{geo:.2f}x** over {len(ratios)} models."]
    for r in rows:
        if r not in fp32:
            lines += ["", f"## {r['model']}", "", "| engine | median ms | max rel err vs ORT f32 |",
                      "|---|---|---|"]
            for k, v in r["median_ms"].items():
                lines.append(f"| {k} | {v:.1f} | {r['max_rel_err'].get(k, 0.0):.1e} |")
    (stem.with_suffix(".md")).write_text("\n".join(lines) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(1.4 * len(fp32) + 2, 4))
        width = 0.8 / max(len(engines), 1)
        for i, e in enumerate(engines):
            vals = [r["median_ms"].get(e, float("nan")) / r["median_ms"]["onnxruntime"] for r in fp32]
            ax.bar([j + i * width for j in range(len(fp32))], vals, width, label=e)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks([j + width * (len(engines) - 1) / 2 for j in range(len(fp32))])
        ax.set_xticklabels([r["model"] for r in fp32], rotation=20)
        ax.set_ylabel("latency / ONNX Runtime (lower is faster)")
        ax.set_title(info["machine"], fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(stem.with_suffix(".png"), dpi=110)
    except ImportError:
        print("side_by_side: matplotlib missing: no plot")
    print(f"wrote {stem}.md, .json, .png")


if __name__ == "__main__":
    sys.exit(main())
