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

# name -> (yaml, export kwargs beyond the common ones)
VARIANTS = {
    # requested
    "yolov8n_det_static": ("yolov8n.yaml", {}),
    "yolo11n_det_static": ("yolo11n.yaml", {}),
    "yolo11n_det_dynamic": ("yolo11n.yaml", {"dynamic": True}),
    "yolo11n_det_nms": ("yolo11n.yaml", {"nms": True}),
    "yolo11n_seg_static": ("yolo11n-seg.yaml", {}),
    "yolo11n_pose_static": ("yolo11n-pose.yaml", {}),
    "yolov8n_seg_static": ("yolov8n-seg.yaml", {}),
    "yolov8n_pose_static": ("yolov8n-pose.yaml", {}),
    "yolov10n_det_static": ("yolov10n.yaml", {}),
    # extras
    "yolov8n_det_dynamic": ("yolov8n.yaml", {"dynamic": True}),
    "yolov8n_det_nms": ("yolov8n.yaml", {"nms": True}),
    # in-graph NMS of the other tasks, and with dynamic axes
    "yolo11n_seg_nms": ("yolo11n-seg.yaml", {"nms": True}),
    "yolo11n_pose_nms": ("yolo11n-pose.yaml", {"nms": True}),
    "yolov8n_seg_nms": ("yolov8n-seg.yaml", {"nms": True}),
    "yolov8n_pose_nms": ("yolov8n-pose.yaml", {"nms": True}),
    "yolo11n_det_nms_dynamic": ("yolo11n.yaml", {"nms": True, "dynamic": True}),
    # other families, as a user would bring them
    "yolo12n_det_static": ("yolo12n.yaml", {}),
    "yolov9t_det_static": ("yolov9t.yaml", {}),
    "yolov5nu_det_static": ("yolov5nu.yaml", {}),
    "yolov6n_det_static": ("yolov6n.yaml", {}),
    "yolov3tinyu_det_static": ("yolov3-tinyu.yaml", {}),
    "yolo11n_obb_nms": ("yolo11n-obb.yaml", {"nms": True}),
    "yolo11n_cls_dynamic": ("yolo11n-cls.yaml", {"dynamic": True}),
    "rtdetr_l_det_static": ("rtdetr-l.yaml", {}),
    "yolo11n_cls_static": ("yolo11n-cls.yaml", {}),
    "yolo11n_obb_static": ("yolo11n-obb.yaml", {}),
    "yolo26n_det_static": ("yolo26n.yaml", {}),
    # NMS-free one-to-one head (end2end, output 1x300x6): nms=False
    "yolov10n_det_e2e": ("yolov10n.yaml", {"nms": False}),
    "yolo26n_det_e2e": ("yolo26n.yaml", {"nms": False}),
}

COMMON = dict(format="onnx", imgsz=640, dynamic=False, simplify=False, device="cpu", batch=1)


def export(name, yaml, extra):
    work = WORK / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    cwd = os.getcwd()
    os.chdir(work)
    try:
        torch.manual_seed(0)
        model = RTDETR(yaml) if yaml.startswith("rtdetr") else YOLO(yaml)
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
