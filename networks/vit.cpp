// A vision transformer for the scheduler (ViT-Ti/16: 192 channels, 3 heads of 64, MLP 768, 12
// blocks; global average pooling instead of a class token, as timm's `vit_tiny_patch16_224` with
// global_pool='avg'), written so that its block is an Inception-like cell: the tokens stay the
// 14x14 map of the patch embedding ([N, C, 14, 14], token t = pixel t), so the query, key and
// value projections are three 1x1 convolutions reading the same layer norm (the same-input merge
// the DP makes for Inception's branches), the MLP is two 1x1 convolutions (GELU and the residual
// fused), and each head is its own branch — channel slice, scores Qᵀ·K scaled, softmax over the
// keys, V·Pᵀ — joined by a channel concatenation before the output projection (concurrent groups).
#include <cmath>

#include "networks/builder.h"
#include "networks/registry.h"

namespace stagecraft::networks {

namespace {

constexpr int64_t kPatch = 16;
constexpr int64_t kWidth = 192;
constexpr int64_t kHeads = 3;
constexpr int64_t kMlp = 4;
constexpr int kBlocks = 12;

graph::ReshapeAttrs full(std::vector<int64_t> dims) {
  graph::ReshapeAttrs r;
  r.full = true;
  r.dims = std::move(dims);
  return r;
}

ValueId layer_norm(NetBuilder& b, ValueId x, const std::string& name) {
  graph::LayerNormAttrs ln;
  ln.eps = 1e-6;
  return b.op(name, graph::OpKind::kLayerNorm, ln, {x});
}

// One head: Q, K, V [N, d, H, W] (channel slices of the projections) -> [N, d, H, W].
ValueId head(NetBuilder& b, ValueId q, ValueId k, ValueId v, int64_t n, int64_t d, int64_t h, int64_t w) {
  using graph::OpKind;
  const int64_t t = h * w;
  graph::TransposeAttrs swap;
  swap.perm = {0, 2, 1};
  const ValueId qt = b.op("qt", OpKind::kTranspose, swap, {b.op("q_rows", OpKind::kReshape, full({n, d, t}), {q})});
  const ValueId kr = b.op("k_rows", OpKind::kReshape, full({n, d, t}), {k});
  graph::ScaleAttrs scale;
  scale.factor = 1.0 / std::sqrt(static_cast<double>(d));
  const ValueId scores = b.op("scale", OpKind::kScale, scale, {b.op("qk", OpKind::kMatMul, graph::NoAttrs{}, {qt, kr})});
  graph::SoftmaxAttrs keys;
  keys.axis = 2;
  const ValueId p = b.op("softmax", OpKind::kSoftmax, keys, {scores});  // [N, T queries, T keys]
  const ValueId pt = b.op("pt", OpKind::kTranspose, swap, {p});
  const ValueId vr = b.op("v_rows", OpKind::kReshape, full({n, d, t}), {v});
  const ValueId out = b.op("pv", OpKind::kMatMul, graph::NoAttrs{}, {vr, pt});  // [N, d, T]
  graph::ReshapeAttrs map;
  map.dims = {d, h, w};
  return b.op("map", OpKind::kReshape, map, {out});
}

ValueId block(NetBuilder& b, ValueId x, int64_t n, int64_t h, int64_t w) {
  using graph::OpKind;
  const ValueId y = layer_norm(b, x, "norm1");
  const ValueId q = b.conv(y, square_conv(kWidth, 1, 1, 0, true), "q");
  const ValueId k = b.conv(y, square_conv(kWidth, 1, 1, 0, true), "k");
  const ValueId v = b.conv(y, square_conv(kWidth, 1, 1, 0, true), "v");
  const int64_t d = kWidth / kHeads;
  std::vector<ValueId> heads;
  for (int64_t i = 0; i < kHeads; ++i) {
    auto s = b.scope("head" + std::to_string(i));
    heads.push_back(head(b, b.slice(q, i * d, (i + 1) * d, "q"), b.slice(k, i * d, (i + 1) * d, "k"),
                         b.slice(v, i * d, (i + 1) * d, "v"), n, d, h, w));
  }
  x = b.add({x, b.conv(b.concat(heads, "heads"), square_conv(kWidth, 1, 1, 0, true), "proj")}, "residual1");
  const ValueId m = b.op("gelu", OpKind::kGelu, graph::NoAttrs{},
                         {b.conv(layer_norm(b, x, "norm2"), square_conv(kWidth * kMlp, 1, 1, 0, true), "fc1")});
  return b.add({x, b.conv(m, square_conv(kWidth, 1, 1, 0, true), "fc2")}, "residual2");
}

}  // namespace

graph::Graph build_vit_tiny(const NetworkOptions& options) {
  const int64_t size = options.input_size;
  NetBuilder b("vit_tiny", options.batch, kImageChannels, size, size);
  ValueId x = b.conv(b.input(), square_conv(kWidth, kPatch, kPatch, 0, true), "patch_embed");
  const int64_t h = size / kPatch, w = size / kPatch;
  // The position embedding: one constant per channel and token.
  graph::BinaryAttrs pos;
  pos.op = graph::BinaryOp::kAdd;
  pos.constant = {1, kWidth, h, w};
  x = b.op("pos_embed", graph::OpKind::kBinary, pos, {x});
  for (int i = 0; i < kBlocks; ++i) {
    auto s = b.scope("block" + std::to_string(i));
    x = block(b, x, options.batch, h, w);
  }
  x = b.flatten(b.global_avg_pool(layer_norm(b, x, "norm"), "pool"));
  return std::move(b).finish({b.linear(x, kImageNetClasses, true, "head")});
}

}  // namespace stagecraft::networks
