"""Export Ultralytics YOLO models (random weights, built from yaml configs) to ONNX.

Run:
  OUT_DIR=models .venv/bin/python bench/exports/yolo_export.py [NAME ...]
(ultralytics 8.4 and torchvision installed with pip; bench/results/yolo_hf_vs_ort.md has the commands)
Writes OUT_DIR/<name>.onnx and OUT_DIR/exports.json (opset etc.).
"""

import json
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("YOLO_CONFIG_DIR", os.path.join(os.environ.get("OUT_DIR", "models"), "ultralytics_cfg"))

import onnx  # noqa: E402
import torch  # noqa: E402
from ultralytics import RTDETR, YOLO  # noqa: E402

OUT = Path(os.environ.get("OUT_DIR", "models"))
WORK = OUT / "work"

# Export modes: Ultralytics' export arguments beyond COMMON. e2e is the NMS-free one-to-one head
# (end2end, output 1x300x6) of YOLOv10 / YOLO26.
MODES = {"static": {}, "dynamic": {"dynamic": True}, "nms": {"nms": True},
         "nms_dynamic": {"nms": True, "dynamic": True}, "e2e": {"nms": False}}
# model -> (Ultralytics yaml, its modes): the requested detect / segment / pose exports, in-graph
# NMS of every task and with dynamic axes, and the other families as a user would bring them.
MODELS = {
    "yolov8n_det": ("yolov8n.yaml", "static dynamic nms"),
    "yolo11n_det": ("yolo11n.yaml", "static dynamic nms nms_dynamic"),
    "yolo11n_seg": ("yolo11n-seg.yaml", "static dynamic nms"),
    "yolo11n_pose": ("yolo11n-pose.yaml", "static dynamic nms"),
    "yolov8n_seg": ("yolov8n-seg.yaml", "static dynamic nms"),
    "yolov8n_pose": ("yolov8n-pose.yaml", "static dynamic nms"),
    "yolov10n_det": ("yolov10n.yaml", "static dynamic nms e2e"),
    "yolo11n_obb": ("yolo11n-obb.yaml", "static nms"),
    "yolo11n_cls": ("yolo11n-cls.yaml", "static dynamic"),
    "yolo12n_det": ("yolo12n.yaml", "static"),
    "yolov9t_det": ("yolov9t.yaml", "static"),
    "yolov5nu_det": ("yolov5nu.yaml", "static"),
    "yolov6n_det": ("yolov6n.yaml", "static"),
    "yolov3tinyu_det": ("yolov3-tinyu.yaml", "static"),
    "rtdetr_l_det": ("rtdetr-l.yaml", "static"),
    "yolo26n_det": ("yolo26n.yaml", "static e2e"),
    # YOLO26's other tasks (one-to-one heads by default), and more v8 / RT-DETR family members.
    "yolo26n_seg": ("yolo26n-seg.yaml", "static nms"),
    "yolo26n_pose": ("yolo26n-pose.yaml", "static"),
    "yolo26n_obb": ("yolo26n-obb.yaml", "static"),
    "yolo26n_cls": ("yolo26n-cls.yaml", "static"),
    "yolo26n_depth": ("yolo26n-depth.yaml", "static"),
    "yolo26n_sem": ("yolo26n-sem.yaml", "static"),
    "yolo26n_p2": ("yolo26n-p2.yaml", "static"),
    "yolov8n_p6": ("yolov8n-p6.yaml", "static"),
    "yolov8n_ghost": ("yolov8n-ghost.yaml", "static"),
    "yolov8n_rtdetr": ("yolov8n-rtdetr.yaml", "static"),
    "yolov9c_seg": ("yolov9c-seg.yaml", "static"),
    "rtdetr_resnet50": ("rtdetr-resnet50.yaml", "static"),
}
# name ("yolo11n_det_nms") -> (yaml, export arguments beyond COMMON)
VARIANTS = {f"{model}_{mode}": (yaml, MODES[mode])
            for model, (yaml, modes) in MODELS.items() for mode in modes.split()}

COMMON = dict(format="onnx", imgsz=640, dynamic=False, simplify=False, device="cpu", batch=1)


def export(name, yaml, extra):
    work = WORK / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    cwd = os.getcwd()
    os.chdir(work)
    try:
        torch.manual_seed(0)
        model = RTDETR(yaml) if "rtdetr" in yaml else YOLO(yaml)
        kw = {**COMMON, **extra}
        t = time.time()
        f = model.export(**kw)
        dt = time.time() - t
    finally:
        os.chdir(cwd)
    dst = OUT / f"{name}.onnx"
    shutil.move(str(Path(work) / f if not os.path.isabs(f) else f), dst)
    m = onnx.load(str(dst))
    opset = {o.domain or "ai.onnx": o.version for o in m.opset_import}
    return dict(
        name=name, yaml=yaml, task=model.task, kwargs=kw, file=str(dst), bytes=dst.stat().st_size,
        opset=opset, export_s=round(dt, 1), ir_version=m.ir_version,
        inputs=[(i.name, [d.dim_value or d.dim_param for d in i.type.tensor_type.shape.dim]) for i in m.graph.input],
        outputs=[(o.name, [d.dim_value or d.dim_param for d in o.type.tensor_type.shape.dim]) for o in m.graph.output],
    )


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    names = sys.argv[1:] or list(VARIANTS)
    index = OUT / "exports.json"
    results = json.loads(index.read_text()) if index.exists() else {}
    for n in names:
        yaml, extra = VARIANTS[n]
        try:
            results[n] = export(n, yaml, extra)
            print(f"OK   {n}: {results[n]['bytes']} bytes opset {results[n]['opset']}", flush=True)
        except Exception as e:  # record and continue
            results[n] = dict(name=n, yaml=yaml, error=f"{type(e).__name__}: {e}")
            print(f"FAIL {n}: {type(e).__name__}: {e}", flush=True)
    index.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
