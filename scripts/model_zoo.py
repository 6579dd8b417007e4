#!/usr/bin/env python3
"""The model zoo check: every torchvision classification CNN, exported with both PyTorch
exporters, run through stagecraft and ONNX Runtime on the same input.

For each model: random weights, batch-norm statistics calibrated on random images (a few forward
passes in training mode with cumulative averages), then `torch.onnx.export(..., dynamo=False)`
(TorchScript, opset 17) and `dynamo=True` (opset 18), models cached under .cache/model_zoo/. Each
export is run by ONNX Runtime (CPU provider, all graph optimisations, one session thread per core)
and by `stagecraft run MODEL.onnx --input x.npy --output y.npy` on the same input: whether it
loads, and the largest relative error (max |a - b| / max |b|, b = ONNX Runtime). Latencies come
from one process: the same model as a `stagecraft.Session` (the Python package in build/python,
the plan `run` builds) and the ONNX Runtime session, timed in alternating blocks (per round each
engine runs once untimed, then `--block` timed runs), medians and their ratio. Timing a fresh
`stagecraft run` process against a warm ONNX Runtime session measured first-touch memory and this
VM's slow phases rather than the engines. Transformers (ViT, Swin, MaxViT) are left out unless
named; `--models vision` is the vision list: every classification CNN, ConvNeXt, ViT, Swin,
EfficientNetV2, torchvision's segmentation models (`segmentation/NAME`, their "out" map) and timm
models of the same families (`timm/NAME`).

The script sets up (once) the project's virtual environment with torch, torchvision, onnx,
onnxscript, onnxruntime and numpy (scripts/common.sh, .venv/) and re-runs itself in it.

Usage: scripts/model_zoo.py [--models a,b,...|vision] [--exporters ts,dynamo] [--iters N]
                            [--schedule sequential|dp] [--out bench/results/model_zoo.md]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pyenv import ROOT, machine, reexec_in_venv, torch_export  # noqa: E402

PACKAGES = ["numpy", "onnx", "onnxruntime", "onnxscript", "torch", "torchvision", "timm"]
# Models of the timm library (pytorch-image-models) are named "timm/NAME"; they are outside the
# families the check is about (reported as "other"), the way a user's own model would be.
TIMM = "timm/"
DEFAULT_OUT = ROOT / "bench" / "results" / "model_zoo.md"

# Input resolution of models whose default is not 224.
RESOLUTION = {
    "inception_v3": 299,
    "efficientnet_b1": 240, "efficientnet_b2": 288, "efficientnet_b3": 300, "efficientnet_b4": 380,
    "efficientnet_b5": 456, "efficientnet_b6": 528, "efficientnet_b7": 600,
    "efficientnet_v2_s": 384, "efficientnet_v2_m": 480, "efficientnet_v2_l": 480,
}
# The families the issue names; everything else torchvision lists is reported as "other".
FAMILIES = ("alexnet", "vgg", "resnet", "resnext", "wide_resnet", "densenet", "squeezenet",
            "googlenet", "inception_v3", "mobilenet_v2", "mobilenet_v3", "mnasnet", "shufflenet_v2",
            "efficientnet", "regnet")
TRANSFORMERS = ("vit_", "swin_", "maxvit")
# torchvision's segmentation models are named "segmentation/NAME" (their "out" map is compared).
SEGMENTATION = "segmentation/"
# The vision list of the vision-models issue: every classification CNN plus these.
VISION_EXTRA = ["convnext_tiny", "convnext_small", "vit_b_16", "swin_t", "efficientnet_v2_s",
                "segmentation/fcn_resnet50", "segmentation/deeplabv3_mobilenet_v3_large",
                "segmentation/lraspp_mobilenet_v3_large",
                "timm/convnext_nano", "timm/inception_next_tiny", "timm/nf_resnet26", "timm/resnest14d",
                "timm/skresnet18", "timm/inception_v4", "timm/efficientnetv2_rw_t", "timm/regnety_016",
                "timm/deit_tiny_patch16_224", "timm/vit_small_patch16_224", "timm/swin_tiny_patch4_window7_224",
                "timm/efficientvit_b0", "timm/levit_128s", "timm/poolformer_s12", "timm/pvt_v2_b0",
                "timm/mobilevit_xxs", "timm/deit_small_distilled_patch16_224",
                "timm/edgenext_xx_small", "timm/xcit_nano_12_p16_224", "timm/ecaresnet26t", "timm/repvit_m1",
                "timm/nextvit_small", "timm/focalnet_tiny_srf", "timm/botnet26t_256", "timm/crossvit_tiny_240", "timm/mvitv2_tiny"]


def classification_models(selected: list[str] | None) -> list[str]:
    import torchvision
    listed = torchvision.models.list_models(module=torchvision.models)
    names = [n for n in listed if not n.startswith(TRANSFORMERS)]
    if selected and "vision" in selected:  # the preset: every CNN and the extra vision models
        selected = names + VISION_EXTRA + [n for n in selected if n != "vision"]
    if selected:
        names += [n for n in selected if n in listed and n.startswith(TRANSFORMERS)]
        segmentation = set(torchvision.models.list_models(module=torchvision.models.segmentation))
        names += [n for n in selected if n.startswith(SEGMENTATION) and n[len(SEGMENTATION):] in segmentation]
        timm_names = [n for n in selected if n.startswith(TIMM)]
        if timm_names:
            import timm
            known = set(timm.list_models())
            unknown = [n for n in timm_names if n[len(TIMM):] not in known]
            if unknown:
                sys.exit(f"model_zoo: unknown timm models {unknown} (see timm.list_models())")
            names += timm_names
        unknown = [n for n in selected if n not in names]
        if unknown:
            sys.exit(f"model_zoo: unknown models {unknown} (known: {', '.join(names)})")
        names = list(dict.fromkeys(selected))  # the order given
    return names


def input_size(name: str) -> int:
    """Height = width of the model's input: its default resolution."""
    if name.startswith(TIMM):
        import timm
        return int(timm.create_model(name[len(TIMM):], pretrained=False).pretrained_cfg["input_size"][-1])
    return RESOLUTION.get(name, 224)


def calibrated_model(name: str, size: int):
    """Random weights (none all zero); batch-norm statistics from a few batches of random images."""
    import torch
    import torchvision
    torch.manual_seed(0)
    if name.startswith(TIMM):
        import timm
        model = timm.create_model(name[len(TIMM):], pretrained=False)
    elif name.startswith(SEGMENTATION):
        inner = getattr(torchvision.models.segmentation, name[len(SEGMENTATION):])(
            weights=None, weights_backbone=None, aux_loss=False)

        class OutMap(torch.nn.Module):  # the segmentation map alone (the models return a dict)
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, x):
                return self.m(x)["out"]

        model = OutMap(inner)
    else:
        kwargs = {"weights": None}
        if name in ("googlenet", "inception_v3"):
            kwargs["aux_logits"] = False
            kwargs["init_weights"] = True
        model = getattr(torchvision.models, name)(**kwargs)
    # Weights initialised to zero (torchvision's ViT heads, some layer scales) would make every
    # output 0 and hide any difference: small random values instead.
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 1 and p.numel() > 1 and not p.any():
                p.normal_(0.0, 0.02)
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average
    if bns:
        model.train()
        with torch.no_grad():
            for _ in range(4):
                model(torch.randn(8, 3, size, size))
    return model.eval()


def float64_output(model, x):
    """The model's output on `x` computed in float64 by PyTorch (a copy of the model): the exact
    result both fp32 engines are measured against. None when the model cannot run in float64."""
    import copy
    import torch
    try:
        with torch.no_grad():
            return copy.deepcopy(model).double()(torch.from_numpy(x).double()).numpy()
    except Exception as e:  # noqa: BLE001 - the row then has no float64 column
        print(f"model_zoo: no float64 reference ({str(e).splitlines()[0][:120]})", file=sys.stderr)
        return None


def within_fp32_error(row: dict) -> bool:
    """Whether stagecraft agrees with ONNX Runtime as closely as fp32 allows: within 1e-4 of it, or
    (deep networks, where fp32 rounding alone is larger) no farther from the float64 result than
    FP32_SPREAD times ONNX Runtime's own distance from it."""
    if row["rel_err"] <= 1e-4:
        return True
    return "err64" in row and row["err64"] <= FP32_SPREAD * row["ort_err64"]


# ONNX Runtime this far from PyTorch's float64 result runs another model than PyTorch's (an export
# cached before the model's weights or calibration changed): no float64 columns then.
STALE_EXPORT = 1e-2

# Two fp32 implementations of one network round differently; each is some distance e from the
# exact result and they differ from each other by up to about 2e.
FP32_SPREAD = 2.0


def export(model, name: str, size: int, exporter: str, folder: Path) -> Path:
    import torch
    path = folder / f"{name.replace('/', '_')}_{exporter}.onnx"
    if path.exists():
        return path
    x = torch.randn(1, 3, size, size)
    tmp = folder / f".{name.replace('/', '_')}_{exporter}.tmp.onnx"
    torch_export(model, x, tmp, exporter)
    data = Path(str(tmp) + ".data")
    if data.exists():  # external weights: rename both, the model refers to the data file by name
        import onnx
        m = onnx.load(str(tmp), load_external_data=True)
        onnx.save(m, str(path), save_as_external_data=True, location=path.name + ".data")
        tmp.unlink()
        data.unlink()
    else:
        tmp.rename(path)
    return path


def ort_session(path: Path):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = os.cpu_count() or 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def time_ort(session, x, iters: int) -> list[float]:
    name = session.get_inputs()[0].name
    for _ in range(3):
        session.run(None, {name: x})
    samples = []
    for _ in range(iters):
        t0 = time.perf_counter()
        session.run(None, {name: x})
        samples.append((time.perf_counter() - t0) * 1e3)
    return samples


WARMUP = 3
PAUSE_S = 0.1  # longer than ONNX Runtime's spinning after a run (about 60 ms here)


def time_interleaved(engines: dict, rounds: int, block: int) -> dict[str, list[float]]:
    """Each round runs every engine for one untimed run and `block` timed ones in a row, after a
    pause of PAUSE_S.

    Blocks after a pause, not single runs: an engine's idle worker threads spin after its run
    (measured here: ONNX Runtime's pool burns a whole core for about 60 ms after each run;
    stagecraft's stream workers and OpenMP teams about nothing), so an engine timed right after
    another one paid for the other's spinning. The pause lets that end, one untimed run per block
    warms the engine's caches again, and rounds alternate the engines so that the machine's slow
    and fast phases fall on all of them alike.
    """
    for fn in engines.values():
        for _ in range(WARMUP):
            fn()
    samples = {k: [] for k in engines}
    for _ in range(rounds):
        for k, fn in engines.items():
            time.sleep(PAUSE_S)
            fn()
            for _ in range(block):
                t0 = time.perf_counter()
                fn()
                samples[k].append((time.perf_counter() - t0) * 1e3)
    return samples


def run_stagecraft(binary: Path, path: Path, x_file: Path, y_file: Path, schedule: str,
                   cache: Path) -> str:
    """`stagecraft run` as a user calls it; "" when it wrote y_file, else its last error line."""
    cmd = [str(binary), "run", str(path), "--input", str(x_file), "--output", str(y_file),
           "--iters", "1", "--warmup", "0", "--schedule", schedule, "--cache-dir", str(cache)]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        lines = (result.stderr.strip() or result.stdout.strip()).splitlines()
        return lines[-1] if lines else f"exit {result.returncode}"
    return ""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", help="comma-separated torchvision model names (default: all CNNs); "
                                    "timm/NAME for a model of the timm library, segmentation/NAME "
                                    "for torchvision's segmentation models; 'vision' for the vision list")
    p.add_argument("--exporters", default="ts,dynamo", help="ts, dynamo or both (default both)")
    p.add_argument("--iters", type=int, default=20,
                   help="timed runs per engine (default 20), in rounds of --block")
    p.add_argument("--block", type=int, default=5, help="timed runs of one engine in a row per round")
    p.add_argument("--schedule", default="sequential",
                   help="stagecraft's schedule: sequential (default) or dp (searched, slower)")
    p.add_argument("--stagecraft", default=str(ROOT / "build" / "cli" / "stagecraft"))
    p.add_argument("--out", default=str(DEFAULT_OUT))
    p.add_argument("--update", action="store_true",
                   help="replace only these models' rows in the existing table (--out's .json), "
                        "keeping the others (each row says when and at which commit it was measured)")
    args = p.parse_args()
    reexec_in_venv("model_zoo", __file__, PACKAGES, PACKAGES)
    sys.path.insert(0, str(ROOT / "build" / "python"))
    sys.path.insert(0, str(ROOT / "python"))
    try:
        import stagecraft
    except ImportError as e:
        sys.exit(f"model_zoo: the stagecraft package is not built ({e}); run ./scripts/test.sh")
    import numpy as np
    import onnxruntime
    import torch
    import torchvision

    binary = Path(args.stagecraft)
    if not binary.exists():
        sys.exit(f"model_zoo: {binary} does not exist: build first (./scripts/test.sh)")
    torch.set_num_threads(os.cpu_count() or 1)
    folder = ROOT / ".cache" / "model_zoo"
    folder.mkdir(parents=True, exist_ok=True)
    cache = folder / "stagecraft-cache"
    exporters = [e for e in args.exporters.split(",") if e]
    names = classification_models(args.models.split(",") if args.models else None)
    rows = []
    json_out = Path(args.out).with_suffix(".json")
    earlier = json.loads(json_out.read_text()) if args.update and json_out.exists() else []
    measured = f"{datetime.date.today()} {git_commit()}"

    def save() -> None:  # after every model: a partial run still leaves a table
        table = merge_rows(earlier, rows)
        write_report(Path(args.out), table, args, onnxruntime.__version__, torch.__version__,
                     torchvision.__version__)
        json_out.write_text(json.dumps(table, indent=1) + "\n")

    work = Path(tempfile.mkdtemp(prefix="model_zoo."))
    for name in names:
        size = input_size(name)
        family = next((f for f in FAMILIES if name.startswith(f)), "other")
        if name.startswith(TRANSFORMERS) or name.startswith(("convnext", SEGMENTATION)):
            family = "transformer" if name.startswith(TRANSFORMERS) else "vision"
        try:
            model = calibrated_model(name, size)
        except Exception as e:  # noqa: BLE001 - reported in the table
            rows.append(dict(model=name, family=family, exporter="-", loads="no",
                             note=f"model: {str(e).splitlines()[0][:150]}"))
            continue
        x = np.random.default_rng(1).standard_normal((1, 3, size, size)).astype(np.float32)
        exact = float64_output(model, x)
        for exporter in exporters:
            row = dict(model=name, family=family, exporter=exporter, size=size, measured=measured)
            print(f"model_zoo: {name} ({exporter}, {size}x{size})", file=sys.stderr, flush=True)
            try:
                path = export(model, name, size, exporter, folder)
            except Exception as e:  # noqa: BLE001
                row.update(loads="export failed", note=str(e).splitlines()[0][:200])
                rows.append(row)
                continue
            x_file, y_file = work / "x.npy", work / "y.npy"
            np.save(x_file, x)
            session = ort_session(path)
            want = session.run(None, {session.get_inputs()[0].name: x})[0]
            error = run_stagecraft(binary, path, x_file, y_file, args.schedule, cache)
            if error:
                row.update(loads="no", note=error)
                rows.append(row)
                continue
            try:
                sc = stagecraft.Session(path, schedule=args.schedule, cache_dir=cache)
            except Exception as e:  # noqa: BLE001  (the CLI loaded it: a Python-side failure)
                row.update(loads="no", note=f"stagecraft.Session: {str(e).splitlines()[0][:200]}")
                rows.append(row)
                continue
            ort_input = {session.get_inputs()[0].name: x}
            samples = time_interleaved({"ort": lambda: session.run(None, ort_input),
                                        "stagecraft": lambda: sc.run(x)},
                                       max(1, args.iters // args.block), args.block)
            sc = None  # its plan's memory and threads go before the next model
            row["ort_ms"] = statistics.median(samples["ort"])
            got = np.load(y_file).reshape(want.shape)
            row.update(loads="yes", stagecraft_ms=statistics.median(samples["stagecraft"]),
                       rel_err=float(np.abs(got - want).max() / max(1e-12, np.abs(want).max())))
            if exact is not None:  # each engine's distance from the float64 result
                scale = max(1e-300, float(np.abs(exact).max()))
                ort_err64 = float(np.abs(want.reshape(exact.shape) - exact).max() / scale)
                if ort_err64 > STALE_EXPORT:
                    row["note"] = (f"float64 reference not comparable: ONNX Runtime is {ort_err64:.1e} from it "
                                   f"(an export cached from another model? delete {path.name} to export again)")
                else:
                    row.update(err64=float(np.abs(got.reshape(exact.shape) - exact).max() / scale),
                               ort_err64=ort_err64)
            rows.append(row)
            print(f"  rel err {row['rel_err']:.2e}, stagecraft {row['stagecraft_ms']:.2f} ms, "
                  f"ORT {row['ort_ms']:.2f} ms", file=sys.stderr, flush=True)
        save()
    save()
    bad = [r for r in rows if r["family"] != "other" and r.get("loads") != "yes"]
    return 1 if bad else 0


def git_commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def merge_rows(earlier: list[dict], rows: list[dict]) -> list[dict]:
    """`earlier` with the rows of the same (model, exporter) replaced by `rows`, new ones last."""
    fresh = {(r["model"], r["exporter"]): r for r in rows}
    models = {r["model"] for r in rows}
    table = []
    for r in earlier:
        key = (r["model"], r.get("exporter"))
        if key in fresh:
            table.append(fresh.pop(key))
        elif r["model"] not in models:  # a model run now keeps no stale row of its own
            table.append(r)
    return table + [r for r in rows if (r["model"], r["exporter"]) in fresh]


def write_report(out: Path, rows: list[dict], args, ort_version: str, torch_version: str,
                 tv_version: str) -> None:
    lines = [
        "# Model zoo: torchvision CNNs through both PyTorch exporters, stagecraft vs ONNX Runtime",
        "",
        f"- date: {datetime.date.today()}; machine: {machine()}",
        f"- torch {torch_version}, torchvision {tv_version}, ONNX Runtime {ort_version} (CPU provider, "
        f"all graph optimisations, {os.cpu_count()} threads); stagecraft `run --schedule {args.schedule}` "
        f"(default layout), batch 1, f32",
        f"- command{' of the last update' if args.update else ''}: `python3 scripts/model_zoo.py"
        f"{' --models ' + args.models if args.models else ''} "
        f"--exporters {args.exporters} --iters {args.iters} --block {args.block} --schedule {args.schedule}"
        f"{' --update' if args.update else ''}"
        f"{'' if Path(args.out) == DEFAULT_OUT else ' --out ' + str(Path(args.out).relative_to(ROOT) if Path(args.out).is_relative_to(ROOT) else args.out)}`"
        + ("; the other rows come from earlier runs (see `measured`: date and commit)" if args.update else ""),
        "- weights random, batch-norm statistics calibrated on random images; error = max|a - b| / "
        "max|b| against ONNX Runtime on one random input (output of `stagecraft run`); latencies are "
        "medians in one process (`stagecraft.Session` and the ORT session in alternating blocks: one "
        "untimed and --block timed runs of each per round)",
        "- float64 columns: each engine's error against the model run in float64 by PyTorch (same "
        "weights, same input): how far fp32 rounding alone takes a plain engine on this model. "
        f"`fp32` is yes when the error against ONNX Runtime is <= 1e-4 or stagecraft's float64 error "
        f"is <= {FP32_SPREAD:g}x ONNX Runtime's (deep networks amplify rounding beyond 1e-4 in any fp32 engine)",
        "",
        "| model | exporter | input | loads | max rel err | stagecraft vs f64 | ORT vs f64 | fp32 | "
        "stagecraft ms | ORT ms | stagecraft / ORT | measured | note |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        loaded = "rel_err" in r
        cells = [r["model"], r["exporter"], str(r.get("size", "")), r.get("loads", ""),
                 f"{r['rel_err']:.1e}" if loaded else "",
                 f"{r['err64']:.1e}" if "err64" in r else "",
                 f"{r['ort_err64']:.1e}" if "ort_err64" in r else "",
                 ("yes" if within_fp32_error(r) else "**no**") if loaded else "",
                 f"{r['stagecraft_ms']:.2f}" if loaded else "",
                 f"{r['ort_ms']:.2f}" if "ort_ms" in r else "",
                 f"{r['stagecraft_ms'] / r['ort_ms']:.2f}x" if loaded else "",
                 r.get("measured", ""), r.get("note", "").replace("|", "/")]
        lines.append("| " + " | ".join(cells) + " |")
    listed = [r for r in rows if r.get("family") != "other"]
    loaded = [r for r in listed if r.get("loads") == "yes"]
    if loaded:
        worst_err = max(loaded, key=lambda r: r["rel_err"])
        worst_ratio = max(loaded, key=lambda r: r["stagecraft_ms"] / r["ort_ms"])
        geo = statistics.geometric_mean([r["stagecraft_ms"] / r["ort_ms"] for r in loaded])
        lines += ["", f"Summary: {len(loaded)} of {len(listed)} exports of the listed families load; "
                  f"largest error {worst_err['rel_err']:.1e} ({worst_err['model']} {worst_err['exporter']}); "
                  f"slowest against ORT {worst_ratio['stagecraft_ms'] / worst_ratio['ort_ms']:.2f}x "
                  f"({worst_ratio['model']} {worst_ratio['exporter']}); geometric mean {geo:.2f}x; "
                  f"{sum(within_fp32_error(r) for r in loaded)} of {len(loaded)} within fp32 error"
                  + (f" (outside: {', '.join(r['model'] + ' ' + r['exporter'] for r in loaded if not within_fp32_error(r))})"
                     if not all(within_fp32_error(r) for r in loaded) else "") + "."]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"model_zoo: wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
