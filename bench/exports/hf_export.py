"""Export Hugging Face transformers vision models (random weights, built from configs) to ONNX.

Usage (transformers 5.24 and onnxscript installed with pip, as bench/results/yolo_hf_vs_ort.md says):
  HF_HUB_OFFLINE=1 OUT_DIR=models .venv/bin/python bench/exports/hf_export.py [NAME ...] [--only ts|dynamo]
Writes OUT_DIR/NAME_ts.onnx (TorchScript exporter, opset 17) and NAME_dynamo.onnx (dynamo exporter),
and appends one JSON line per export to OUT_DIR/export_log.jsonl.
"""
import json, os, sys, time, traceback

import torch
import transformers as T

torch.set_num_threads(1)
torch.manual_seed(0)

OUT = os.environ.get("OUT_DIR", "models")


def build(name):
    if name == "resnet":  # ResNet-50 (default config)
        return T.ResNetForImageClassification(T.ResNetConfig())
    if name == "convnextv2":  # ConvNeXt V2 tiny (default config)
        return T.ConvNextV2ForImageClassification(T.ConvNextV2Config())
    if name == "dinov2":  # ViT-B/14 (default config, image_size 224)
        return T.Dinov2ForImageClassification(T.Dinov2Config())
    if name == "beit":  # BEiT-base/16 with relative position bias (as the released checkpoints)
        return T.BeitForImageClassification(T.BeitConfig(use_relative_position_bias=True))
    if name == "swinv2":  # Swin V2 tiny, window 7 (default config)
        return T.Swinv2ForImageClassification(T.Swinv2Config())
    if name == "segformer":  # MiT-b0 (default config)
        return T.SegformerForSemanticSegmentation(T.SegformerConfig())
    if name == "dpt":  # DPT ViT-B/16 (default config), image_size 224 instead of 384
        return T.DPTForDepthEstimation(T.DPTConfig(image_size=224))
    if name == "mobilevitv2":  # MobileViT V2 1.0 (default config)
        return T.MobileViTV2ForImageClassification(T.MobileViTV2Config())
    if name == "pvtv2":  # PVT v2 b0 (default config)
        return T.PvtV2ForImageClassification(T.PvtV2Config())
    if name == "levit":  # LeViT-128S (default config)
        return T.LevitForImageClassification(T.LevitConfig())
    if name == "detr":  # DETR with a transformers ResNet-50 backbone (no timm, no pretrained weights)
        bb = T.ResNetConfig(out_features=["stage1", "stage2", "stage3", "stage4"])
        return T.DetrForObjectDetection(T.DetrConfig(backbone_config=bb, use_timm_backbone=False,
                                                     use_pretrained_backbone=False))
    # Held-back-style extras: more families a user brings.
    if name == "yolos":  # YOLOS-Tiny-sized detection transformer at 224x224
        return T.YolosForObjectDetection(T.YolosConfig(hidden_size=192, num_attention_heads=3, intermediate_size=768,
                                                       image_size=[224, 224], num_detection_tokens=20))
    if name == "upernet":  # UperNet on a ConvNeXt-tiny backbone (semantic segmentation)
        bb = T.ConvNextConfig(hidden_sizes=[96, 192, 384, 768], depths=[3, 3, 9, 3],
                              out_features=["stage1", "stage2", "stage3", "stage4"])
        return T.UperNetForSemanticSegmentation(T.UperNetConfig(backbone_config=bb))
    if name == "depth_anything":  # Depth Anything on a DINOv2-small backbone
        bb = T.Dinov2Config(hidden_size=384, num_attention_heads=6, image_size=518,
                            out_features=["stage3", "stage6", "stage9", "stage12"], reshape_hidden_states=False)
        return T.DepthAnythingForDepthEstimation(T.DepthAnythingConfig(backbone_config=bb))
    if name == "efficientnet":  # EfficientNet-B0 (default config)
        return T.EfficientNetForImageClassification(T.EfficientNetConfig(image_size=224))
    if name == "cvt":  # CvT-13 (default config)
        return T.CvtForImageClassification(T.CvtConfig())
    if name == "regnet":  # RegNet (default config)
        return T.RegNetForImageClassification(T.RegNetConfig())
    if name == "deformable_detr":  # Deformable DETR, ResNet-50 backbone from transformers
        bb = T.ResNetConfig(out_features=["stage2", "stage3", "stage4"])
        return T.DeformableDetrForObjectDetection(T.DeformableDetrConfig(
            backbone_config=bb, use_timm_backbone=False, use_pretrained_backbone=False, num_queries=100))
    # More families, tried 2026-11-27 (session 11): plain and hierarchical transformers, mobile
    # CNNs, detectors of the DETR line, keypoints, depth and vision towers of multimodal models.
    if name == "vit":  # ViT-B/16 (default config)
        return T.ViTForImageClassification(T.ViTConfig())
    if name == "deit":  # DeiT-small distilled
        return T.DeiTForImageClassificationWithTeacher(T.DeiTConfig(hidden_size=384, num_attention_heads=6,
                                                                    intermediate_size=1536))
    if name == "swin":  # Swin tiny (default config)
        return T.SwinForImageClassification(T.SwinConfig())
    if name == "convnext":  # ConvNeXt tiny (default config)
        return T.ConvNextForImageClassification(T.ConvNextConfig())
    if name == "mobilenetv2":  # MobileNet V2 1.0 (default config)
        return T.MobileNetV2ForImageClassification(T.MobileNetV2Config())
    if name == "mobilevit":  # MobileViT small (default config)
        return T.MobileViTForImageClassification(T.MobileViTConfig(image_size=224))
    if name == "poolformer":  # PoolFormer S12 (default config)
        return T.PoolFormerForImageClassification(T.PoolFormerConfig())
    if name == "bit":  # BiT ResNetv2-50 (weight-standardised convolutions, group norm)
        return T.BitForImageClassification(T.BitConfig())
    if name == "focalnet":  # FocalNet tiny (default config)
        return T.FocalNetForImageClassification(T.FocalNetConfig())
    if name == "swiftformer":  # SwiftFormer XS (default config)
        return T.SwiftFormerForImageClassification(T.SwiftFormerConfig())
    if name == "hiera":  # Hiera tiny (default config)
        return T.HieraForImageClassification(T.HieraConfig())
    if name == "dinov2_registers":  # DINOv2-S with 4 registers
        return T.Dinov2WithRegistersForImageClassification(T.Dinov2WithRegistersConfig(
            hidden_size=384, num_attention_heads=6, image_size=224))
    if name == "glpn":  # GLPN depth estimation (default config: a MiT-b0-like encoder)
        return T.GLPNForDepthEstimation(T.GLPNConfig())
    if name == "rt_detr":  # RT-DETR with its ResNet-50-vd backbone (default config)
        return T.RTDetrForObjectDetection(T.RTDetrConfig())
    if name == "rt_detr_v2":  # RT-DETR v2 (default config)
        return T.RTDetrV2ForObjectDetection(T.RTDetrV2Config())
    if name == "d_fine":  # D-FINE (default config)
        return T.DFineForObjectDetection(T.DFineConfig())
    if name == "conditional_detr":  # Conditional DETR, transformers ResNet-50 backbone
        bb = T.ResNetConfig(out_features=["stage4"])
        return T.ConditionalDetrForObjectDetection(T.ConditionalDetrConfig(
            backbone_config=bb, use_timm_backbone=False, use_pretrained_backbone=False))
    if name == "mask2former":  # Mask2Former on a Swin-tiny backbone (default config)
        return T.Mask2FormerForUniversalSegmentation(T.Mask2FormerConfig())
    if name == "vitpose":  # ViTPose-B (default config: a ViT backbone, heatmap head)
        return T.VitPoseForPoseEstimation(T.VitPoseConfig())
    if name == "siglip_vision":  # SigLIP base vision tower (default config)
        return T.SiglipVisionModel(T.SiglipVisionConfig())
    if name == "clip_vision":  # CLIP ViT-B/32 vision tower (default config)
        return T.CLIPVisionModelWithProjection(T.CLIPVisionConfig())
    if name == "textnet":  # TextNet (default config)
        return T.TextNetForImageClassification(T.TextNetConfig())
    raise KeyError(name)


def randomize(model, seed=0):
    """Make the random weights exercise every op: transformers' _init_weights leaves biases, norm shifts,
    cls tokens, position embeddings and attention bias tables at zero, and with its small init some models'
    activations vanish (MobileViT V2's logits are exactly 0, LeViT's ~1e-7). So: PyTorch's default init for
    convolutions and linear layers, random norm scales/shifts, N(0, 0.02) for all-zero free parameters, and
    batch-norm running statistics measured on random inputs (so that each BN normalises as a trained one)."""
    g = torch.Generator().manual_seed(seed)
    bns = []
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Linear, torch.nn.ConvTranspose2d)):
                mod.reset_parameters()
            if isinstance(mod, (torch.nn.LayerNorm, torch.nn.GroupNorm, torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
                if getattr(mod, "weight", None) is not None:
                    mod.weight.copy_(1 + 0.1 * torch.randn(mod.weight.shape, generator=g))
                if getattr(mod, "bias", None) is not None:
                    mod.bias.copy_(0.1 * torch.randn(mod.bias.shape, generator=g))
            if isinstance(mod, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
                mod.reset_running_stats()
                mod.momentum = None  # cumulative average over the calibration batches
                bns.append(mod)
        for _, p in model.named_parameters():
            if p.numel() > 1 and p.abs().max() == 0 or p.numel() == 1 and p.item() == 0:
                p.copy_(0.02 * torch.randn(p.shape, generator=g))
        if bns:
            model.train()
            for _ in range(4):
                model(pixel_values=torch.randn(4, 3, 224, 224, generator=g))
    return model.eval()


# Input H, W of the models that do not take 224x224.
SIZES = {"vitpose": (256, 192)}

NAMES = ["resnet", "convnextv2", "dinov2", "beit", "swinv2", "segformer", "dpt", "mobilevitv2", "pvtv2",
         "levit", "detr"]


class Wrap(torch.nn.Module):
    """Returns the model's outputs as a tuple of tensors (ModelOutput -> tuple, Nones dropped)."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, pixel_values):
        out = self.m(pixel_values=pixel_values, return_dict=False)
        return tuple(o for o in out if isinstance(o, torch.Tensor))


def log(rec):
    with open(os.path.join(OUT, "export_log.jsonl"), "a") as f:
        f.write(json.dumps(rec) + "\n")
    print(json.dumps(rec), flush=True)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    only = None
    if "--only" in sys.argv:
        only = sys.argv[sys.argv.index("--only") + 1]
        args = [a for a in args if a != only]
    names = args or NAMES
    for name in names:
        x = torch.randn(1, 3, *SIZES.get(name, (224, 224)))  # example input for tracing only
        torch.manual_seed(0)
        try:
            model = randomize(build(name))
        except Exception as e:  # record a model this transformers cannot build (and go on)
            log({"model": name, "ok": False, "error": f"build: {type(e).__name__}: {e}"})
            continue
        if name == "dpt":  # centre the last conv before the head's final ReLU, else the depth map is all 0
            last = model.head.head[4]
            pre = []
            h = last.register_forward_hook(lambda m, i, o: pre.append(o.mean()))
            with torch.no_grad():
                model(pixel_values=torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1)))
                last.bias -= pre[0]
            h.remove()
        model = Wrap(model).eval()
        with torch.no_grad():
            ref = model(x)
        out_names = [f"output{i}" for i in range(len(ref))]
        shapes = [list(r.shape) for r in ref]
        kinds = ["ts", "dynamo"]
        for kind in kinds:
            if only and not kind.startswith(only):
                continue
            path = os.path.join(OUT, f"{name}_{kind}.onnx")
            t0 = time.time()
            rec = {"model": name, "exporter": kind, "path": path, "torch_out_shapes": shapes}
            try:
                with torch.no_grad():
                    if kind.startswith("ts"):
                        torch.onnx.export(model, (x,), path, opset_version=int(kind[2:] or 17), dynamo=False,
                                          input_names=["pixel_values"], output_names=out_names)
                    else:
                        prog = torch.onnx.export(model, (x,), dynamo=True, input_names=["pixel_values"],
                                                 output_names=out_names)
                        prog.save(path)
                rec["ok"] = True
            except Exception as e:  # record the export failure
                rec["ok"] = False
                rec["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
                rec["trace_tail"] = traceback.format_exc()[-3000:]
                if os.path.exists(path):
                    os.remove(path)
                if kind == "ts":  # extra: retry the TorchScript exporter at opset 18 (-> NAME_ts18.onnx)
                    kinds.insert(kinds.index("ts") + 1, "ts18")
            rec["seconds"] = round(time.time() - t0, 1)
            log(rec)


if __name__ == "__main__":
    main()
