#!/usr/bin/env python3
"""CPU engines on the same ONNX exports, in one process, interleaved: ONNX Runtime f32, OpenVINO
f32 and OpenVINO as users run it (its default precision: bf16 where the CPU has it natively),
stagecraft f32 and stagecraft bf16 (where the CPU has native bf16; else the row says why not);
with --int8 also ONNX Runtime int8 (static QDQ from onnxruntime.quantization, per-channel
weights), OpenVINO int8 (NNCF post-training quantisation) and stagecraft int8, each calibrated on
the same --calibration random inputs (other seeds than the timed and compared ones).

Per model: each engine's agreement with ONNX Runtime f32 over --samples random inputs (the cosine
of the input-dependent part of the outputs, i.e. each output minus the mean output over the
inputs — with random weights the raw outputs are dominated by what every input shares —, the
top-1 agreement of the raw outputs, and the largest error relative to ORT's largest value), then
latencies: per round each engine runs once untimed after a 100 ms pause, then --block timed runs;
medians over --rounds rounds, engines alternating. stagecraft runs its default dp schedule
(searched now, or from the schedule cache of --cache-dir). Prints the CPU and ISA; writes a
Markdown table (--out) and a bar chart of latency relative to ONNX Runtime (--plot).

Usage: PYTHONPATH=build/python:python .venv/bin/python bench/cpu_engines.py MODEL.onnx...
           [--rounds 6] [--block 3] [--samples 8] [--int8 [--calibration 16]] [--cache-dir DIR]
           [--search-budget 40] [--out FILE.md] [--plot FILE.png]
The script installs openvino, nncf and matplotlib into the project's virtual environment when
missing.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from pyenv import machine, ort_session, reexec_in_venv, timed_block  # noqa: E402

reexec_in_venv("cpu_engines", __file__, ["numpy", "onnxruntime", "openvino", "nncf", "matplotlib"],
               ["numpy", "onnxruntime", "openvino", "nncf", "matplotlib"])

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
import openvino as ov  # noqa: E402

import stagecraft  # noqa: E402

# The current model's stagecraft sessions by engine label: after timing, how many of their runs
# the thread limiter made with fewer threads (Session.limited_runs) is printed and noted.
SESSIONS: dict = {}


def say_schedule(path: str, label: str, s) -> None:
    """Which schedule a stagecraft session runs: its search's end-to-end verdict (dp against
    sequential), so that a pass shows when concurrent stages were kept."""
    stats = s.schedule.stats or {}
    verdict = stats.get("end_to_end") or ("from the schedule cache" if stats.get("from_cache") else "no end-to-end check")
    print(f"{Path(path).stem}: {label}: {verdict}", flush=True)


def agreement(got: list[np.ndarray], want: list[np.ndarray]) -> tuple[float, float, float]:
    """(min cosine of the input-dependent parts, top-1 agreement, max relative error)."""
    g = np.stack([x.reshape(-1) for x in got]).astype(np.float64)
    w = np.stack([x.reshape(-1) for x in want]).astype(np.float64)
    top1 = float(np.mean(np.argmax(g, axis=1) == np.argmax(w, axis=1)))
    err = float(np.abs(g - w).max() / max(np.abs(w).max(), 1e-30))
    gc, wc = g - g.mean(axis=0), w - w.mean(axis=0)
    cos = np.sum(gc * wc, axis=1) / np.maximum(np.linalg.norm(gc, axis=1) * np.linalg.norm(wc, axis=1), 1e-30)
    return float(cos.min()), top1, err


def int8_engines(path: str, name: str, shape: list[int], samples: int, cache_dir: str, runs: dict,
                 notes: dict, search_budget: float) -> None:
    """ONNX Runtime (static QDQ), OpenVINO (NNCF) and stagecraft int8, calibrated on the same inputs."""
    import tempfile

    import nncf
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    rng = np.random.default_rng(1000)
    calib = [rng.random(shape, dtype=np.float32) for _ in range(samples)]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter(calib)

        def get_next(self):
            x = next(self.items, None)
            return None if x is None else {name: x}

    qpath = str(Path(tempfile.mkdtemp()) / "model.qdq.onnx")
    quantize_static(path, qpath, Reader(), quant_format=QuantFormat.QDQ, per_channel=True)
    q = ort_session(qpath)
    runs["ORT int8"] = lambda x: q.run(None, {name: x})[0]
    core = ov.Core()
    ov_q = nncf.quantize(core.read_model(path), nncf.Dataset(calib), subset_size=samples)
    ov_int8 = core.compile_model(ov_q, "CPU", {"PERFORMANCE_HINT": "LATENCY"})
    runs["OpenVINO int8"] = lambda x, c=ov_int8: c(x)[0]
    try:
        # stagecraft calibrates on the same inputs: a calibration file from stagecraft.calibrate.
        cal = str(Path(tempfile.mkdtemp()) / "model.calib.yaml")
        stagecraft.calibrate(path, inputs=calib, path=cal, progress=False)
        s = stagecraft.Session(path, dtype="int8", calibration=cal, schedule="dp", cache_dir=cache_dir,
                               search_budget=search_budget, progress=False)
        runs["stagecraft int8"] = lambda x, s=s: s.run(x)[0]
        SESSIONS["stagecraft int8"] = s
        say_schedule(path, "stagecraft int8", s)
    except stagecraft.Error as e:
        notes["stagecraft int8"] = str(e)


def engines_of(path: str, cache_dir: str, search_budget: float) -> tuple[dict, dict, str, object]:
    """Callables running one input, notes (why an engine is missing), OpenVINO's default
    precision and the model's first input (ONNX Runtime's description)."""
    ref = ort_session(path)
    first = ref.get_inputs()[0]
    name = first.name
    runs = {"ORT f32": lambda x: ref.run(None, {name: x})[0]}
    core = ov.Core()
    latency = {"PERFORMANCE_HINT": "LATENCY"}
    ov_f32 = core.compile_model(path, "CPU", {**latency, "INFERENCE_PRECISION_HINT": "f32"})
    ov_default = core.compile_model(path, "CPU", latency)
    hint = ov_default.get_property("INFERENCE_PRECISION_HINT")
    precision = hint.to_string() if hasattr(hint, "to_string") else str(hint)
    runs["OpenVINO f32"] = lambda x, c=ov_f32: c(x)[0]
    runs["OpenVINO default"] = lambda x, c=ov_default: c(x)[0]
    notes = {}
    for label, dtype in (("stagecraft f32", "f32"), ("stagecraft bf16", "bf16")):
        try:
            s = stagecraft.Session(path, dtype=dtype, schedule="dp", cache_dir=cache_dir,
                                   search_budget=search_budget, progress=False)
        except stagecraft.UsageError as e:
            notes[label] = str(e)
            continue
        runs[label] = lambda x, s=s: s.run(x)[0]
        SESSIONS[label] = s
        say_schedule(path, label, s)
        notes.setdefault("backend", s.description)
    return runs, notes, precision, first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--block", type=int, default=3)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--cache-dir", default=".cache/cpu_engines")
    parser.add_argument("--out", default="")
    parser.add_argument("--plot", default="")
    parser.add_argument("--int8", action="store_true", help="also ORT QDQ, OpenVINO NNCF and stagecraft int8")
    parser.add_argument("--calibration", type=int, default=16, help="int8: calibration inputs")
    parser.add_argument("--search-budget", type=float, default=40.0,
                        help="seconds of stagecraft's dp schedule search per session")
    args = parser.parse_args()

    header = (f"CPU: {machine()}; onnxruntime {ort.__version__}, openvino {ov.__version__}; "
              f"{args.rounds} rounds x {args.block} runs per engine, interleaved")
    print(header, flush=True)
    labels = ["ORT f32", "OpenVINO f32", "OpenVINO default", "stagecraft f32", "stagecraft bf16"]
    if args.int8:
        labels += ["ORT int8", "OpenVINO int8", "stagecraft int8"]
    rows = []
    limits: list[tuple[str, dict]] = []
    for path in args.models:
        model = Path(path).stem
        runs, notes, precision, first = engines_of(path, args.cache_dir, args.search_budget)
        if "backend" in notes:
            print(f"{model}: stagecraft backend: {notes['backend']}", flush=True)
        for label, why in notes.items():
            if label != "backend":
                print(f"{model}: {label} not run: {why}", flush=True)
        shape = [d if isinstance(d, int) else 1 for d in first.shape]
        if args.int8:
            int8_engines(path, first.name, shape, args.calibration, args.cache_dir, runs, notes,
                         args.search_budget)
            if "stagecraft int8" in notes:
                print(f"{model}: stagecraft int8 not run: {notes['stagecraft int8']}", flush=True)
        rng = np.random.default_rng(0)
        xs = [rng.random(shape, dtype=np.float32) for _ in range(args.samples)]
        outputs = {}
        for k, f in list(runs.items()):
            try:
                outputs[k] = [np.asarray(f(x), dtype=np.float32) for x in xs]
            except Exception as e:  # an engine that cannot run the model is a row's gap, not the end
                print(f"{model}: {k} failed: {str(e).strip().splitlines()[0][:300]}", flush=True)
                del runs[k]
        agree = {k: agreement(v, outputs["ORT f32"]) for k, v in outputs.items()}
        times: dict[str, list[float]] = {k: [] for k in runs}
        x = xs[0]
        for _ in range(args.rounds):
            for k, f in runs.items():
                times[k] += timed_block(f, args.block, x)
        med = {k: statistics.median(v) for k, v in times.items()}
        limited = {k: s.limited_runs for k, s in SESSIONS.items() if s.limited_runs > 0}
        if limited:
            print(f"{model}: runs with fewer threads (the thread limiter saw cores held): "
                  + ", ".join(f"{k} {n}" for k, n in limited.items()), flush=True)
        limits.append((model, limited))
        SESSIONS.clear()
        rows.append((model, precision, med, agree))
        print(f"{model}: " + ", ".join(f"{k} {v:.1f} ms" for k, v in med.items())
              + f" (OpenVINO default ran {precision})", flush=True)

    def ratio(med: dict, a: str, b: str) -> str:
        return f"{med[a] / med[b]:.2f}x" if a in med and b in med else "-"

    pairs = [("stagecraft f32", "ORT f32"), ("stagecraft f32", "OpenVINO f32"),
             ("stagecraft bf16", "OpenVINO default")]
    if args.int8:
        pairs += [("stagecraft int8", "OpenVINO int8"), ("stagecraft int8", "OpenVINO default"),
                  ("stagecraft int8", "ORT int8")]
    short = {"stagecraft": "sc", "OpenVINO": "OV"}

    def named(label: str) -> str:
        engine, kind = label.split(" ", 1)
        return f"{short.get(engine, engine)} {kind}"

    lines = [header, "", "Latency (ms, medians) and ratios:", "",
             "| model | " + " | ".join(labels) + " | " + " | ".join(f"{named(a)} / {named(b)}" for a, b in pairs) + " |",
             "|---" * (len(labels) + len(pairs) + 1) + "|"]
    for model, precision, med, _ in rows:
        cells = [f"{med[k]:.1f}" if k in med else "-" for k in labels]
        cells[2] += f" ({precision})"
        lines.append(f"| {model} | " + " | ".join(cells) + " | " + " | ".join(ratio(med, a, b) for a, b in pairs) + " |")

    def geomean(a: str, b: str) -> str:
        rs = [med[a] / med[b] for _, _, med, _ in rows if a in med and b in med]
        return f"{math.exp(sum(math.log(r) for r in rs) / len(rs)):.2f}x" if rs else "-"

    lines.append("| geomean |" + " |" * len(labels) + " " + " | ".join(geomean(a, b) for a, b in pairs) + " |")
    lines += ["", f"Agreement with ORT f32 over {args.samples} random inputs: min cosine of the "
              "input-dependent part / top-1 agreement / max relative error:", "",
              "| model | " + " | ".join(labels[1:]) + " |", "|---" * len(labels) + "|"]
    for model, _, _, agree in rows:
        cells = [f"{agree[k][0]:.4f} / {100 * agree[k][1]:.0f}% / {agree[k][2]:.1e}" if k in agree else "-"
                 for k in labels[1:]]
        lines.append(f"| {model} | " + " | ".join(cells) + " |")
    limited_lines = [f"- {m}: " + ", ".join(f"{k} {n} runs" for k, n in d.items()) for m, d in limits if d]
    lines += ["", "Runs stagecraft made with fewer threads (its thread limiter took another engine's threads "
              "for another process's):", ""] + (limited_lines or ["- none"])
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(rows)) + 2, 4))
        width = 0.8 / len(labels)
        for i, k in enumerate(labels):
            ys = [med[k] / med["ORT f32"] if k in med else 0 for _, _, med, _ in rows]
            ax.bar([j + i * width for j in range(len(rows))], ys, width, label=k)
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(rows))])
        ax.set_xticklabels([r[0] for r in rows], rotation=20, ha="right")
        ax.set_ylabel("latency / ONNX Runtime f32 (lower is faster)")
        ax.set_title(machine(), fontsize=9)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
