"""The classes of the tiny PyTorch modules that scripts/onnx_pattern_modules.py lists. This
module imports torch: onnx_pattern_modules.modules() imports it only when called, so that
make_onnx_patterns.py can import onnx_pattern_modules before it sets up .venv with torch. Each
class's comment says which pattern it is and which models it comes from."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

C = 8


def bn_conv(cin, cout, k=3, stride=1, groups=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout))


class SqueezeExcite(nn.Module):  # efficientnet / regnet: x * sigmoid(fc(pool(x)))
    def __init__(self):
        super().__init__()
        self.conv = bn_conv(3, C)
        self.fc1 = nn.Conv2d(C, 4, 1)
        self.fc2 = nn.Conv2d(4, C, 1)

    def forward(self, x):
        x = F.silu(self.conv(x))
        s = x.mean((2, 3), keepdim=True)
        return x * torch.sigmoid(self.fc2(F.relu(self.fc1(s))))


class HardActivations(nn.Module):  # mobilenet_v3: hardswish, SE with hardsigmoid
    def __init__(self):
        super().__init__()
        self.conv = bn_conv(3, C)
        self.dw = bn_conv(C, C, groups=C)
        self.fc1 = nn.Conv2d(C, 4, 1)
        self.fc2 = nn.Conv2d(4, C, 1)

    def forward(self, x):
        x = F.hardswish(self.conv(x))
        x = F.relu6(self.dw(x))
        s = F.adaptive_avg_pool2d(x, 1)
        return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(s))))


class ReduceHead(nn.Module):  # mnasnet / shufflenet head: mean over H, W without keepdim
    def __init__(self):
        super().__init__()
        self.conv = bn_conv(3, C)
        self.fc = nn.Linear(C, 5)

    def forward(self, x):
        return self.fc(F.relu(self.conv(x)).mean([2, 3]))


class ChannelShuffle(nn.Module):  # shufflenet_v2 unit: chunk, branch, concat, shuffle
    def __init__(self):
        super().__init__()
        self.conv = bn_conv(3, C)
        self.branch = nn.Sequential(bn_conv(C // 2, C // 2, 1), nn.ReLU(),
                                    bn_conv(C // 2, C // 2, 3, groups=C // 2))

    def forward(self, x):
        x = F.relu(self.conv(x))
        a, b = x.chunk(2, dim=1)
        x = torch.cat((a, self.branch(b)), dim=1)
        n, c, h, w = x.size()
        return x.view(n, 2, c // 2, h, w).transpose(1, 2).contiguous().view(n, c, h, w)


class SamePadding(nn.Module):  # TF-style "same" padding computed from the input size (timm)
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, C, 3, 2)

    @staticmethod
    def pad_same(x, k, s, value=0.0):
        ih, iw = x.size()[-2:]
        ph = max((math.ceil(ih / s) - 1) * s + k - ih, 0)
        pw = max((math.ceil(iw / s) - 1) * s + k - iw, 0)
        return F.pad(x, [pw // 2, pw - pw // 2, ph // 2, ph - ph // 2], value=value)

    def forward(self, x):
        x = self.conv(self.pad_same(x, 3, 2))
        return F.max_pool2d(self.pad_same(x, 3, 2, value=-float("inf")), 3, 2)


class BroadcastConstants(nn.Module):  # per-channel affine, constant-first sub and div
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, C, 3, padding=1)
        self.scale = nn.Parameter(torch.rand(C) + 0.5)
        self.shift = nn.Parameter(torch.rand(C))

    def forward(self, x):
        x = self.conv(x) * self.scale[None, :, None, None] + self.shift.view(1, C, 1, 1)
        y = 1.0 - torch.sigmoid(x)
        z = 2.0 / (y + 0.5)
        return (z - x.mean((2, 3), keepdim=True)) / 4.0


class Reshapes(nn.Module):  # flatten / view / unsqueeze / squeeze around a classifier
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, C, 3, padding=1)
        self.fc = nn.Linear(C, C)

    def forward(self, x):
        x = F.adaptive_max_pool2d(self.conv(x), 1)
        v = self.fc(torch.flatten(x, 1))
        g = torch.sigmoid(v).unsqueeze(-1).unsqueeze(-1)
        return (x * g).squeeze(3).squeeze(2)


class GroupedConvs(nn.Module):  # resnext-like grouped conv (4 channels per group), residual
    def __init__(self):
        super().__init__()
        self.stem = bn_conv(3, 16)
        self.grouped = bn_conv(16, 16, 3, groups=4)
        self.dw = bn_conv(16, 16, 3, groups=16)

    def forward(self, x):
        x = F.relu(self.stem(x))
        return F.relu(x + self.dw(F.relu(self.grouped(x))))


class SharedWeights(nn.Module):  # equal constants deduplicated: Identity of an initializer
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, C, 3, padding=1)
        self.b = nn.Conv2d(C, C, 1)
        self.c = nn.Conv2d(C, C, 1)
        self.c.weight = self.b.weight
        with torch.no_grad():  # equal biases: the TorchScript exporter keeps one and
            self.b.bias.zero_()  # reads it through Identity nodes
            self.c.bias.zero_()

    def forward(self, x):
        x = F.relu(self.a(x))
        return self.c(F.relu(self.b(x))) + x


class SliceAndConcat(nn.Module):  # torchvision's transform_input: channel slices, scalars
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, C, 3, padding=1)

    def forward(self, x):
        r = torch.unsqueeze(x[:, 0], 1) * (0.229 / 0.5) + (0.485 - 0.5) / 0.5
        g = torch.unsqueeze(x[:, 1], 1) * (0.224 / 0.5) + (0.456 - 0.5) / 0.5
        b = torch.unsqueeze(x[:, 2], 1) * (0.225 / 0.5) + (0.406 - 0.5) / 0.5
        y = self.conv(torch.cat((r, g, b), 1))
        return F.dropout(y[:, :, 1:-1, 1:-1], 0.2, training=False)


class PartialResidual(nn.Module):  # rexnet / dpn: x[:, :k] + s, x[:, k:] (to INT64_MAX), and
    def __init__(self):              # an empty part x[:, C:]; leaky ReLU (CSP nets)
        super().__init__()
        self.a = nn.Conv2d(3, 6, 3, padding=1)
        self.b = nn.Conv2d(6, 10, 1)

    def forward(self, x):
        s = F.leaky_relu(self.a(x), 0.1)
        y = self.b(s)
        y = torch.cat([y[:, :6] + s, y[:, 6:]], dim=1)
        return torch.cat([y, y[:, 10:]], dim=1)


class TfSamePadding(nn.Module):  # timm's pad_same: max(..., 0) on traced sizes (Clip, Max)
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, C, 3, 2)

    @staticmethod
    def get_same_padding(x: int, k: int, s: int, d: int):
        return max((math.ceil(x / s) - 1) * s + (k - 1) * d + 1 - x, 0)

    def forward(self, x):
        ih, iw = x.size()[-2:]
        pad_h = self.get_same_padding(ih, 3, 2, 1)
        pad_w = self.get_same_padding(iw, 3, 2, 1)
        x = F.pad(x, [pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2])
        return self.conv(x)


class DenseBlock(nn.Module):  # densenet: pre-activation BN + ReLU, growing concatenations
    def __init__(self, growth):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.layers = nn.ModuleList(
            nn.Sequential(nn.BatchNorm2d(16 + i * growth), nn.ReLU(),
                          nn.Conv2d(16 + i * growth, 2 * growth, 1, bias=False),
                          nn.BatchNorm2d(2 * growth), nn.ReLU(),
                          nn.Conv2d(2 * growth, growth, 3, 1, 1, bias=False))
            for i in range(3))
        self.transition = nn.Sequential(nn.BatchNorm2d(16 + 3 * growth), nn.ReLU(),
                                        nn.Conv2d(16 + 3 * growth, 8, 1, bias=False),
                                        nn.AvgPool2d(2, 2))

    def forward(self, x):
        features = [self.stem(x)]
        for layer in self.layers:
            features.append(layer(torch.cat(features, 1)))
        return self.transition(torch.cat(features, 1))


class Upsampling(nn.Module):  # hrnet / FPN: nearest x2 fused by addition, bilinear to a size
    def __init__(self):
        super().__init__()
        self.fine = nn.Conv2d(3, 12, 3, 1, 1)
        self.coarse = nn.Conv2d(12, 12, 3, 2, 1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")

    def forward(self, x):
        fine = self.fine(x)
        fused = fine + self.up(self.coarse(fine))
        smooth = F.interpolate(fused, scale_factor=2.0, mode="bilinear", align_corners=False)
        return F.interpolate(smooth, size=(13, 11), mode="bilinear", align_corners=False)


class ConvNextBlock(nn.Module):  # convnext: channels-last LayerNorm, MLP with GELU, layer scale
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, C, 2, 2)
        self.norm0 = nn.LayerNorm(C, eps=1e-6)  # LayerNorm2d: permute, normalise, permute
        self.dw = nn.Conv2d(C, C, 7, padding=3, groups=C)
        self.norm = nn.LayerNorm(C, eps=1e-6)
        self.fc1 = nn.Linear(C, 4 * C)
        self.fc2 = nn.Linear(4 * C, C)
        self.gamma = nn.Parameter(torch.rand(C, 1, 1) + 0.5)

    def forward(self, x):
        x = self.stem(x)
        x = self.norm0(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        y = self.norm(self.dw(x).permute(0, 2, 3, 1))
        y = self.fc2(F.gelu(self.fc1(y))).permute(0, 3, 1, 2)
        return x + self.gamma * y


class GeluForms(nn.Module):  # GELU's erf and tanh forms; LayerNorm over features (a head)
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, C, 3, 1, 1)
        self.conv2 = nn.Conv2d(C, C, 3, 1, 1)
        self.norm = nn.LayerNorm(C)
        self.fc = nn.Linear(C, 5)

    def forward(self, x):
        x = F.gelu(self.conv1(x))
        x = F.gelu(self.conv2(x), approximate="tanh") + F.gelu(x * 0.5)
        return self.fc(self.norm(x.mean((2, 3))))


class StdConv(nn.Module):  # nf-nets: weight standardisation by a training-mode batch norm
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(C, 3, 3, 3))
        self.gain = nn.Parameter(torch.rand(C, 1, 1, 1) + 0.5)

    def forward(self, x):
        # As timm's ScaledStdConv2d: the gain is the batch norm's weight.
        w = F.batch_norm(self.weight.reshape(1, C, -1), None, None, weight=self.gain.view(-1),
                         training=True, momentum=0.0, eps=1e-6).reshape_as(self.weight)
        return F.relu(F.conv2d(x, w, None, 1, 1))


class SplitAttention(nn.Module):  # resnest: radix-2 split attention, softmax over the radix
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 2 * C, 3, 1, 1)
        self.fc1 = nn.Conv2d(C, 4, 1)
        self.fc2 = nn.Conv2d(4, 2 * C, 1)

    def forward(self, x):
        x = F.relu(self.conv(x))
        b = x.shape[0]
        xs = x.reshape(b, 2, C, x.shape[2], x.shape[3])
        gap = xs.sum(dim=1).mean((2, 3), keepdim=True)
        attn = self.fc2(F.relu(self.fc1(gap))).view(b, 1, 2, -1).transpose(1, 2)
        attn = F.softmax(attn, dim=1).reshape(b, -1).reshape(b, 2, C, 1, 1)
        return (xs * attn).sum(dim=1)


class SelectiveKernel(nn.Module):  # sk-nets: stacked paths (one dilated), softmax over paths
    def __init__(self):
        super().__init__()
        self.p1 = nn.Conv2d(3, C, 3, 1, 1)
        self.p2 = nn.Conv2d(3, C, 3, 1, 2, dilation=2)
        self.fc1 = nn.Conv2d(C, 4, 1)
        self.fc2 = nn.Conv2d(4, 2 * C, 1)

    def forward(self, x):
        paths = torch.stack([F.relu(self.p1(x)), F.relu(self.p2(x))], dim=1)
        s = paths.sum(1).mean((2, 3), keepdim=True)
        a = torch.softmax(self.fc2(F.relu(self.fc1(s))).view(x.shape[0], 2, C, 1, 1), dim=1)
        return (paths * a).sum(1)


class SpaceToDepthStem(nn.Module):  # tresnet: 4x4 space-to-depth as reshape/permute/reshape
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(48, C, 3, 1, 1)

    def forward(self, x):
        n, c, h, w = x.shape
        x = x.view(n, c, h // 4, 4, w // 4, 4).permute(0, 3, 5, 1, 2, 4).contiguous()
        return F.relu(self.conv(x.view(n, c * 16, h // 4, w // 4)))


class ReflectPad(nn.Module):  # tresnet's anti-aliasing blur: reflect padding, depthwise blur
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, C, 3, 1, 1)
        self.blur = nn.Conv2d(C, C, 3, 2, 0, groups=C, bias=False)
        self.down = nn.Conv2d(C, C, 2, 2, 0, groups=C, bias=False)

    def forward(self, x):  # asymmetric padding on the second path
        x = F.relu(self.conv(x))
        return self.blur(F.pad(x, (1, 1, 1, 1), mode="reflect")) + self.down(F.pad(x, (0, 1, 1, 0), mode="reflect"))


class WrittenLayerNorm(nn.Module):  # ConvNeXt's own channels_first LayerNorm, written out
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, C, 3, 1, 1)
        self.weight = nn.Parameter(torch.rand(C) + 0.5)
        self.bias = nn.Parameter(torch.rand(C) - 0.5)
        self.fc = nn.Linear(C, 4)

    def forward(self, x):
        x = self.conv(x)
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + 1e-6)
        x = self.weight[:, None, None] * x + self.bias[:, None, None]
        y = x.relu().mean((2, 3))  # and over the last axis of N x C, without scale or bias
        d = y - y.mean(-1, keepdim=True)
        return self.fc(d / torch.sqrt(d.pow(2).mean(-1, keepdim=True) + 1e-5))


class ChannelPooling(nn.Module):  # CBAM's spatial attention: mean and max over the channels
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, C, 3, 1, 1)
        self.att = nn.Conv2d(2, 1, 7, 1, 3)

    def forward(self, x):
        x = F.relu(self.conv(x))
        pooled = torch.cat([x.mean(1, keepdim=True), x.amax(1, keepdim=True)], 1)
        return x * torch.sigmoid(self.att(pooled)) + x.sum(dim=(1, 3), keepdim=True)


class VitBlock(nn.Module):  # timm's ViT: patches, class token, qkv, heads, SDPA, MLP
    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.heads = heads
        self.patch = nn.Conv2d(3, dim, 4, 4)
        self.cls = nn.Parameter(torch.randn(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, 5, dim) * 0.1)
        self.ln1, self.ln2, self.ln3 = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim)
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        n, t, c = x.shape
        qkv = self.qkv(self.ln1(x)).reshape(n, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        a = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(a.transpose(1, 2).reshape(n, t, c))
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return self.head(self.ln3(x)[:, 0])


class TorchAttention(nn.Module):  # torchvision's ViT: nn.MultiheadAttention, sequence first
    def __init__(self, dim=16, heads=4):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, 2, 2)
        self.ln = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.head = nn.Linear(dim, 6)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        y = self.ln(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return self.head(x.mean(1))


class TransformerVariants(nn.Module):  # DeiT's two tokens, LeViT's BatchNorm1d and subsampling, PoolFormer's GroupNorm
    def __init__(self, dim=8):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, 2, 2)
        self.gn = nn.GroupNorm(1, dim)
        self.tokens = nn.Parameter(torch.randn(1, 2, dim))
        self.fc = nn.Linear(dim, dim)
        self.bn = nn.BatchNorm1d(dim)
        self.head = nn.Linear(dim, 5)

    def forward(self, x):
        x = self.patch(x)
        x = x + self.gn(x)
        t = x.flatten(2).transpose(1, 2)
        t = torch.cat([self.tokens.expand(t.shape[0], -1, -1), t], dim=1)  # 2 + 9 = 11 tokens
        n, length, c = t.shape
        t = self.bn(self.fc(t).flatten(0, 1)).reshape(n, length, c)
        t = t[:, ::2]  # 6 of 11
        return self.head(t.mean(1))


class PixelShuffle(nn.Module):  # super-resolution heads: pixel (un)shuffle between convolutions
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.up = nn.PixelShuffle(2)
        self.down = nn.PixelUnshuffle(2)
        self.out = nn.Conv2d(16, 4, 1)

    def forward(self, x):
        y = self.up(F.relu(self.conv(x)))  # 16 -> 4 channels at twice the size
        return self.out(self.down(y + 0.5))


class ConstantTables(nn.Module):  # LeViT's bias table gathered by index, Swin's mask by slice assignment
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)
        self.table = nn.Parameter(torch.randn(4, 6))
        self.register_buffer("idx", torch.tensor([[0, 5, 2], [1, 1, 3]]))
        self.register_buffer("rows", torch.tensor([[3, 0, 2], [1, 2, 0]]))

    def forward(self, x):
        bias = self.table[:, self.idx] + self.table[self.rows, self.idx]  # [4, 2, 3] + [2, 3]
        mask = torch.zeros(1, 4, 2, 3)
        mask[:, :, 1:, :2] = -1.0
        return self.conv(x) + bias + mask


class Encodings(nn.Module):  # constant encodings (EdgeNeXt, ConViT) and repeated tokens (GCViT)
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)
        self.lin = nn.Linear(4, 4)
        self.register_buffer("freq", torch.arange(4).float() * 0.5)

    def forward(self, x):
        t = self.conv(x).flatten(2).transpose(1, 2)  # [N, 6, 4]
        pos = torch.cumsum(torch.ones(1, 6, 1), dim=1)
        attn = torch.softmax(self.lin.weight @ self.lin.weight.t(), -1)  # of constants
        t = (t + torch.sin(pos * self.freq) + torch.cos(pos)) @ attn
        r = t.repeat(1, 2, 1) + t.unsqueeze(1).expand(-1, 2, -1, -1).reshape(t.shape[0], 12, 4)
        return r.mean(1)


class Einsums(nn.Module):  # MaxViT's and MViTv2's contractions, a tanh head
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 1)
        self.rel = nn.Parameter(torch.randn(5, 4, 2))
        self.table = nn.Parameter(torch.randn(3, 6))

    def forward(self, x):
        t = self.conv(x).flatten(2).transpose(1, 2).reshape(x.shape[0], 6, 2, 4)  # [N, T, h, d]
        s = torch.einsum("nthd,nshd->nhts", t, t)  # two tensors, batch letters n and h
        r = torch.einsum("nthd,kdh->ntk", t, self.rel)  # by a constant
        c = torch.einsum("ij,jk->ik", self.table, self.table.t())  # of constants
        return torch.tanh(s.mean((1, 3)) + r.mean(2)) * (1.5 + torch.tanh(c.mean()))


class NormalisedAttention(nn.Module):  # XCiT's and EdgeNeXt's cross-covariance attention (F.normalize), their positional encodings (a convolution of a constant grid, tiled for the batch)
    def __init__(self, dim=8):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, 2, 2)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.temperature = nn.Parameter(torch.rand(2, 1, 1) + 0.5)
        self.pos = nn.Conv2d(4, dim, 1)
        self.head = nn.Linear(dim, 5)

    def forward(self, x):
        n = x.shape[0]
        t = self.patch(x)
        h, w = t.shape[2], t.shape[3]
        ys = torch.arange(1, h + 1, dtype=torch.float32).view(1, 1, h, 1).expand(1, 1, h, w)
        xs = torch.arange(1, w + 1, dtype=torch.float32).view(1, 1, 1, w).expand(1, 1, h, w)
        grid = torch.cat([torch.sin(ys), torch.cos(ys), torch.sin(xs), torch.cos(xs)], 1)
        t = (t + self.pos(grid).repeat(n, 1, 1, 1)).flatten(2).transpose(1, 2)  # [N, T, 8]
        q, k, v = self.qkv(t).reshape(n, -1, 3, 2, 4).permute(2, 0, 3, 4, 1)  # each [N, 2, 4, T]
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        attn = ((q @ k.transpose(-2, -1)) * self.temperature).softmax(-1)
        y = (attn @ v).permute(0, 3, 1, 2).reshape(n, -1, 8)
        return self.head(y.clamp(-0.5, 0.8).mean(1))


class OneDimensional(nn.Module):  # ECA attention (a Conv1d across channels), Next-ViT's token pooling (AvgPool1d), a BatchNorm1d head
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.eca = nn.Conv1d(1, 1, 3, padding=1, bias=False)
        self.pool = nn.AvgPool1d(2, 2)
        self.bn = nn.BatchNorm1d(8)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        y = self.conv(x)
        n = y.shape[0]
        gate = self.eca(y.mean((2, 3)).view(n, 1, -1)).sigmoid().view(n, -1, 1, 1)
        t = self.pool((y * gate.expand_as(y)).flatten(2))  # [N, 8, H·W / 2]
        return self.head(self.bn(t.amax(2)))


class MutualBroadcast(nn.Module):  # FocalNet's modulation: per-channel gates times a one-channel map, both broadcast
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        gate, level = y.mean((2, 3), keepdim=True), y[:, :1]  # [N, 8, 1, 1], [N, 1, H, W]
        return gate * level + (level - gate) / (1.5 + gate.sigmoid())


class Bicubic(nn.Module):  # CrossViT: its input resized for a second branch, the branches' heads stacked and averaged
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.heads = nn.ModuleList([nn.Linear(8, 5), nn.Linear(8, 5)])

    def forward(self, x):
        y = F.interpolate(self.conv(x), size=(7, 13), mode="bicubic", align_corners=False)
        z = F.interpolate(y, scale_factor=2.0, mode="bicubic", align_corners=False)
        pooled = [y.mean((2, 3)), z.mean((2, 3))]
        return torch.mean(torch.stack([h(p) for h, p in zip(self.heads, pooled)], dim=0), dim=0)


class RelPosAttention(nn.Module):  # MViTv2: relative positions per query row (an Einsum with a constant sharing a letter) added by a slice assignment to the whole scores
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 1)
        self.rel = nn.Parameter(torch.randn(3, 4, 8))  # [h, k, c]

    def forward(self, x):
        q = self.conv(x).permute(0, 2, 3, 1)  # [N, h, w, c]
        rel = torch.einsum("nhwc,hkc->nhwk", q, self.rel)
        attn = q @ q.transpose(-1, -2)  # [N, h, w, w]
        attn[:, :, 0:, 0:] = attn[:, :, 0:, 0:] + rel
        return attn.softmax(-1).mean((1, 2))
