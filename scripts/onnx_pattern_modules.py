"""The tiny PyTorch modules of tests/onnx/patterns/ (scripts/make_onnx_patterns.py exports them):
each one a pattern that PyTorch's exporters write for real CNNs and vision transformers, named
after the models it comes from. Their classes are in onnx_pattern_classes.py."""
from __future__ import annotations


def modules():
    """name -> (module, input shape). The modules are made in this order, drawing their weights
    from torch's generator (make_onnx_patterns.py seeds it first)."""
    import onnx_pattern_classes as p  # imports torch

    return {
        "rel_pos_attention": (p.RelPosAttention(), (2, 3, 3, 4)),
        "bicubic": (p.Bicubic(), (2, 3, 9, 8)),
        "mutual_broadcast": (p.MutualBroadcast(), (2, 3, 5, 6)),
        "one_dimensional": (p.OneDimensional(), (2, 3, 6, 6)),
        "normalised_attention": (p.NormalisedAttention(), (2, 3, 6, 6)),
        "einsums": (p.Einsums(), (2, 3, 2, 3)),
        "encodings": (p.Encodings(), (2, 3, 2, 3)),
        "constant_tables": (p.ConstantTables(), (2, 3, 2, 3)),
        "pixel_shuffle": (p.PixelShuffle(), (2, 3, 5, 6)),
        "transformer_variants": (p.TransformerVariants(), (2, 3, 6, 6)),
        "vit_block": (p.VitBlock(), (2, 3, 8, 8)),
        "torch_attention": (p.TorchAttention(), (1, 3, 8, 6)),
        "channel_pooling": (p.ChannelPooling(), (2, 3, 9, 7)),
        "written_layer_norm": (p.WrittenLayerNorm(), (2, 3, 6, 5)),
        "reflect_pad": (p.ReflectPad(), (2, 3, 9, 9)),
        "space_to_depth": (p.SpaceToDepthStem(), (2, 3, 16, 12)),
        "split_attention": (p.SplitAttention(), (2, 3, 7, 7)),
        "selective_kernel": (p.SelectiveKernel(), (2, 3, 7, 7)),
        "weight_standardisation": (p.StdConv(), (1, 3, 7, 7)),
        "convnext_block": (p.ConvNextBlock(), (2, 3, 12, 12)),
        "gelu_forms": (p.GeluForms(), (2, 3, 6, 6)),
        "upsampling": (p.Upsampling(), (2, 3, 8, 8)),
        "partial_residual": (p.PartialResidual(), (1, 3, 6, 6)),
        "tf_same_padding": (p.TfSamePadding(), (1, 3, 9, 9)),
        "squeeze_excite": (p.SqueezeExcite(), (1, 3, 8, 8)),
        "hard_activations": (p.HardActivations(), (2, 3, 8, 8)),
        "reduce_head": (p.ReduceHead(), (2, 3, 8, 8)),
        "channel_shuffle": (p.ChannelShuffle(), (1, 3, 8, 8)),
        "same_padding": (p.SamePadding(), (1, 3, 11, 11)),
        "broadcast_constants": (p.BroadcastConstants(), (1, 3, 6, 6)),
        "reshapes": (p.Reshapes(), (2, 3, 6, 6)),
        "grouped_convs": (p.GroupedConvs(), (1, 3, 8, 8)),
        "shared_weights": (p.SharedWeights(), (1, 3, 6, 6)),
        "slice_and_concat": (p.SliceAndConcat(), (1, 3, 8, 8)),
        "dense_block": (p.DenseBlock(8), (1, 3, 8, 8)),
        "dense_block_growth12": (p.DenseBlock(12), (2, 3, 8, 8)),
    }
