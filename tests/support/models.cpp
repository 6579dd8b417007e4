#include <cmath>
#include "support/models.h"

#include "common/strings.h"
#include "graph/passes.h"
#include "networks/builder.h"
#include "networks/registry.h"
#include "profiler/analytic_cost_model.h"

namespace stagecraft::testing {

executor::Backend& cpu_backend() {
  static std::unique_ptr<executor::Backend> backend = executor::make_backend("cpu");
  return *backend;
}

using networks::NetBuilder;
using networks::square_conv;

Model model_of(const graph::Graph& raw, uint64_t seed, const graph::InferenceOptions& passes) {
  graph::PassLog log;
  graph::Graph g = graph::prepare_for_inference(raw, &log, passes);
  return Model{g, graph::fold_weights(raw, graph::random_weights(raw, seed), log)};
}

Model network(const std::string& name, int64_t size, int64_t batch,
              const graph::InferenceOptions& passes) {
  networks::NetworkOptions options;
  options.input_size = size;
  options.batch = batch;
  return model_of(networks::build_network(name, options), 1, passes);
}

graph::Conv2dAttrs int8_test_conv(int64_t in_channels, int64_t out_channels) {
  graph::Conv2dAttrs a;
  a.in_channels = in_channels;
  a.out_channels = out_channels;
  a.kernel = graph::Hw::square(3);
  a.stride = graph::Hw::square(2);
  a.padding = graph::Pads{1, 1, 1, 1};
  a.bias = true;
  a.activation = graph::Activation::kRelu6;
  return a;
}

graph::Graph every_op_graph(int64_t batch) {
  NetBuilder b("every_op", batch, 8, 13, 13);
  auto x = b.input();
  auto c = b.conv(x, square_conv(16, 3, 2, 1, true), "conv");
  auto n = b.bn(c, 1e-3, "bn");
  auto r6 = b.relu6(n, "relu6");
  auto mp = b.max_pool(r6, 2, 2, 0, /*ceil_mode=*/true, "maxpool");  // 7 -> 4 only with ceil
  auto ap = b.avg_pool(r6, 3, 2, 1, /*count_include_pad=*/false, false, "avgpool_ex");
  auto ap2 = b.avg_pool(r6, 3, 2, 1, /*count_include_pad=*/true, false, "avgpool_in");
  auto sum = b.add({mp, ap, ap2}, "add3");
  auto parts = b.split(sum, {4, 12}, "split");
  auto sl = b.slice(sum, 2, 10, "slice");
  auto pad = b.pad(sl, graph::Pads{-1, 0, 1, 2}, "pad");
  graph::ScaleAttrs half;
  half.factor = 0.5;
  auto scaled = b.op("scale", graph::OpKind::kScale, half, {pad});
  auto sg = b.sigmoid(b.conv(scaled, square_conv(4, 1), "conv1x1"), "sigmoid");
  networks::ConvSpec dw = square_conv(12, 3, 1, 1);
  dw.groups = 12;
  auto depthwise = b.relu(b.conv(parts[1], dw, "depthwise"), "relu");
  auto cat = b.concat({parts[0], depthwise}, "concat");
  auto gap = b.global_avg_pool(cat, "gap");
  auto fc = b.linear(b.flatten(gap, "flatten"), 10, true, "fc");
  auto sm = b.softmax(fc, "softmax");
  auto flat2 = b.flatten(sg, "flatten_sg");
  return std::move(b).finish({sm, flat2});
}

graph::Graph channel_tail_graph(int64_t batch, int64_t width, int64_t size) {
  NetBuilder b("channel_tail", batch, 3, size, size);
  auto x = b.input();
  auto c = b.relu(b.conv(x, square_conv(width, 3, 1, 1, true), "stem"), "stem_relu");
  auto p = b.relu(b.conv(c, square_conv(width, 1, 1, 0, true), "pointwise"), "pw_relu");
  auto sum2 = b.relu(b.add({c, p}, "add2"), "add2_relu");  // binary add + activation
  networks::ConvSpec dw = square_conv(width, 3, 1, 1);
  dw.groups = width;
  auto d = b.conv(sum2, dw, "depthwise");
  auto n = b.bn(d, 1e-3, "bn");
  auto sum3 = b.relu(b.add({n, c, p}, "add3"), "add3_relu");  // n-ary add + activation
  auto grouped_in = b.conv(sum3, square_conv(32, 1), "to32");
  networks::ConvSpec grouped = square_conv(32, 3, 1, 1);
  grouped.groups = 8;  // 4 channels per group, as ResNeXt's first stage
  auto g = b.relu(b.conv(grouped_in, grouped, "grouped"), "grouped_relu");
  auto mp = b.max_pool(sum3, 3, 1, 1, false, "maxpool");
  auto ap = b.avg_pool(sum3, 3, 1, 1, /*count_include_pad=*/false, false, "avgpool");
  auto parts = b.split(b.add({mp, ap}, "pool_sum"), {width / 3, width - width / 3}, "split");
  auto cat = b.concat({parts[1], g, parts[0]}, "concat");
  auto gap = b.global_avg_pool(cat, "gap");
  auto fc = b.linear(b.flatten(gap, "flatten"), 10, true, "fc");
  return std::move(b).finish({fc, cat});
}

graph::Graph dense_block_graph(int64_t batch, int64_t stem, int64_t growth, int layers) {
  NetBuilder b("dense_block", batch, 3, 8, 8);
  const auto bn_relu = [&](graph::ValueId x, const std::string& name) {
    return b.relu(b.bn(x, 1e-5, name + "/bn"), name + "/relu");
  };
  std::vector<graph::ValueId> features{b.conv(b.input(), square_conv(stem, 3, 1, 1), "stem")};
  graph::ValueId second_cat = features[0];
  for (int i = 1; i <= layers; ++i) {
    const std::string name = cat("layer", i);
    const graph::ValueId in = features.size() == 1 ? features[0] : b.concat(features, name + "/cat");
    if (features.size() == 2) second_cat = in;
    auto h = b.conv(bn_relu(in, name + "/1"), square_conv(2 * growth, 1), name + "/conv1");
    features.push_back(b.conv(bn_relu(h, name + "/2"), square_conv(growth, 3, 1, 1), name + "/conv2"));
  }
  auto all = b.concat(features, "block/cat");
  auto t = b.conv(bn_relu(all, "transition"), square_conv(stem, 1), "transition/conv");
  return std::move(b).finish({b.avg_pool(t, 2, 2, 0, true, false, "transition/pool"), second_cat});
}

// conv -> layer_norm -> gelu -> conv -> gelu_tanh -> pool -> flatten -> layer_norm (features).
graph::Graph channel_norms_graph(int64_t batch, int64_t channels) {
  using graph::OpKind;
  NetBuilder b("norms", batch, 3, 7, 5);
  auto c = b.conv(b.input(), square_conv(channels, 3, 1, 1, true), "c1");
  graph::LayerNormAttrs ln;
  ln.eps = 1e-6;
  auto n = b.op("ln", OpKind::kLayerNorm, ln, {c});
  auto g = b.op("gelu", OpKind::kGelu, graph::NoAttrs{}, {n});
  auto c2 = b.conv(g, square_conv(channels, 1), "c2");
  auto t = b.op("gelu_tanh", OpKind::kGeluTanh, graph::NoAttrs{}, {c2});
  graph::ReshapeAttrs flat;
  flat.dims = {channels};
  auto f = b.op("flat", OpKind::kReshape, flat, {b.global_avg_pool(t, "pool")});
  return std::move(b).finish({b.op("ln_features", OpKind::kLayerNorm, graph::LayerNormAttrs{}, {f}), n});
}

graph::Graph vit_graph(int64_t batch, int64_t width, int64_t heads, int blocks) {
  using graph::OpKind;
  NetBuilder b("vit", batch, 3, 8, 8);
  const int64_t c = width, d = width / heads;
  const auto full = [](std::vector<int64_t> dims) {
    graph::ReshapeAttrs r;
    r.full = true;
    r.dims = std::move(dims);
    return r;
  };
  const auto perm = [](std::vector<int64_t> p) {
    graph::TransposeAttrs t;
    t.perm = std::move(p);
    return t;
  };
  const auto linear = [](int64_t in, int64_t out) {
    graph::LinearAttrs a;
    a.in_features = in;
    a.out_features = out;
    return a;
  };
  auto x = b.op("tokens", OpKind::kTranspose, perm({0, 2, 1}),
                {b.op("flat", OpKind::kReshape, full({batch, c, 4}), {b.conv(b.input(), square_conv(c, 4, 4, 0, true), "patch")})});
  graph::ConcatConstantAttrs cls;
  cls.count = 1;
  x = b.op("cls", OpKind::kConcatConstant, cls, {x});
  graph::BinaryAttrs pos;
  pos.op = graph::BinaryOp::kAdd;
  pos.constant = {1, 5, c};
  x = b.op("pos", OpKind::kBinary, pos, {x});
  for (int i = 0; i < blocks; ++i) {
    const std::string p = "b" + std::to_string(i) + "_";
    auto qkv = b.op(p + "qkv", OpKind::kLinear, linear(c, 3 * c),
                    {b.op(p + "ln1", OpKind::kLayerNorm, graph::LayerNormAttrs{}, {x})});
    auto split = b.op(p + "heads", OpKind::kTranspose, perm({2, 0, 3, 1, 4}),
                      {b.op(p + "qkv5", OpKind::kReshape, full({batch, 5, 3, heads, d}), {qkv})});
    std::vector<graph::ValueId> qkv3;
    for (int64_t k = 0; k < 3; ++k) {
      graph::NarrowAttrs n;
      n.axis = 0;
      n.begin = k;
      n.end = k + 1;
      qkv3.push_back(b.op(p + "part" + std::to_string(k), OpKind::kReshape, full({batch, heads, 5, d}),
                          {b.op(p + "narrow" + std::to_string(k), OpKind::kNarrow, n, {split})}));
    }
    graph::ScaleAttrs scale;
    scale.factor = 1.0 / std::sqrt(static_cast<double>(d));
    auto kt = b.op(p + "kt", OpKind::kTranspose, perm({0, 1, 3, 2}), {qkv3[1]});
    auto scores = b.op(p + "scale", OpKind::kScale, scale, {b.op(p + "qk", OpKind::kMatMul, graph::NoAttrs{}, {qkv3[0], kt})});
    graph::SoftmaxAttrs keys;
    keys.axis = 3;
    auto attn = b.op(p + "pv", OpKind::kMatMul, graph::NoAttrs{}, {b.op(p + "softmax", OpKind::kSoftmax, keys, {scores}), qkv3[2]});
    auto merged = b.op(p + "merge", OpKind::kReshape, full({batch, 5, c}),
                       {b.op(p + "unheads", OpKind::kTranspose, perm({0, 2, 1, 3}), {attn})});
    x = b.op(p + "res1", OpKind::kAdd, graph::AddAttrs{}, {x, b.op(p + "proj", OpKind::kLinear, linear(c, c), {merged})});
    auto h = b.op(p + "gelu", OpKind::kGelu, graph::NoAttrs{},
                  {b.op(p + "fc1", OpKind::kLinear, linear(c, 2 * c),
                        {b.op(p + "ln2", OpKind::kLayerNorm, graph::LayerNormAttrs{}, {x})})});
    x = b.op(p + "res2", OpKind::kAdd, graph::AddAttrs{}, {x, b.op(p + "fc2", OpKind::kLinear, linear(2 * c, c), {h})});
  }
  graph::NarrowAttrs first;
  first.axis = 1;
  first.end = 1;
  auto token = b.op("cls_out", OpKind::kReshape, full({batch, c}), {b.op("take_cls", OpKind::kNarrow, first, {x})});
  graph::ReduceAttrs tokens;
  tokens.axes = {1};
  auto mean = b.op("mean_tokens", OpKind::kReduceMean, tokens, {x});
  return std::move(b).finish({b.op("head", OpKind::kLinear, linear(c, 10), {token}), mean});
}

graph::Graph modern_ops_graph(int64_t batch, int64_t width) {
  using graph::BinaryAttrs;
  using graph::BinaryOp;
  using graph::OpKind;
  NetBuilder b("modern_ops", batch, 3, 9, 9);
  auto x = b.input();
  auto c = b.conv(x, square_conv(width, 3, 1, 1, true), "stem");
  graph::HardSigmoidAttrs onnx_default;
  onnx_default.alpha = 0.2;
  auto hs = b.op("hard_sigmoid", OpKind::kHardSigmoid, onnx_default, {c});
  auto hw = b.op("hard_swish", OpKind::kHardSwish, graph::NoAttrs{}, {b.conv(hs, square_conv(width, 1), "pw1")});
  auto si = b.op("silu", OpKind::kSilu, graph::NoAttrs{}, {b.conv(hw, square_conv(width, 3, 1, 1), "c2")});
  // Squeeze and excitation: global pool, N×C, two linear layers, back to N×C×1×1, gate.
  graph::ReshapeAttrs flat;
  flat.dims = {width};
  auto squeezed = b.op("se_flat", OpKind::kReshape, flat, {b.global_avg_pool(si, "se_pool")});
  auto fc1 = b.relu(b.linear(squeezed, 8, true, "se_fc1"), "se_relu");
  auto fc2 = b.linear(fc1, width, true, "se_fc2");
  graph::ReshapeAttrs unflat;
  unflat.dims = {width, 1, 1};
  auto gate = b.sigmoid(b.op("se_unflat", OpKind::kReshape, unflat, {fc2}), "se_gate");
  BinaryAttrs mul;
  mul.op = BinaryOp::kMul;
  auto excited = b.op("se_mul", OpKind::kBinary, mul, {si, gate});
  // Constants: per-channel scale and shift, a constant-first subtraction and division.
  BinaryAttrs scale;
  scale.op = BinaryOp::kMul;
  scale.constant = {1, width, 1, 1};
  auto scaled = b.op("channel_scale", OpKind::kBinary, scale, {excited});
  BinaryAttrs shift = scale;
  shift.op = BinaryOp::kAdd;
  shift.constant = {width, 1, 1};  // NumPy: trailing dimensions align
  shift.activation = graph::Activation::kRelu;
  auto shifted = b.op("channel_shift", OpKind::kBinary, shift, {scaled});
  BinaryAttrs minus;
  minus.op = BinaryOp::kSub;
  minus.constant = {1, 1, 1, 1};
  minus.constant_first = true;
  auto reversed = b.op("one_minus", OpKind::kBinary, minus, {shifted});
  BinaryAttrs over;
  over.op = BinaryOp::kDiv;
  over.constant = {1, width, 1, 1};
  over.constant_first = true;
  BinaryAttrs plus_two;
  plus_two.op = BinaryOp::kAdd;
  plus_two.constant = {1, 1, 1, 1};
  graph::LeakyReluAttrs leaky;
  leaky.alpha = 0.1;
  auto positive = b.op("away_from_zero", OpKind::kBinary, plus_two,
                       {b.relu(b.op("leaky", OpKind::kLeakyRelu, leaky, {reversed}), "reversed_relu")});
  auto divided = b.op("c_over_x", OpKind::kBinary, over, {positive});
  graph::ChannelShuffleAttrs shuffle;
  shuffle.groups = 2;
  // ShuffleNet's unit ending: a concatenation read by the shuffle alone (folded into it).
  auto joined = b.concat({divided, si}, "shuffle_cat");
  auto shuffled = b.op("shuffle", OpKind::kChannelShuffle, shuffle, {joined});
  auto pooled = b.op("gmp", OpKind::kGlobalMaxPool, graph::NoAttrs{}, {shuffled});
  graph::ReshapeAttrs flat_both;
  flat_both.dims = {2 * width};
  auto out = b.op("flat", OpKind::kReshape, flat_both, {pooled});
  return std::move(b).finish({out, hw});
}

std::vector<executor::HostTensor> inputs_of(const graph::Graph& g, uint64_t seed) {
  std::vector<executor::HostTensor> inputs;
  for (graph::ValueId v : g.inputs()) {
    inputs.push_back(executor::random_host_tensor(g.value(v).desc.shape, seed + v));
  }
  return inputs;
}

scheduler::Schedule analytic_schedule(const graph::Graph& g, scheduler::Strategy strategy,
                                      scheduler::DpMode mode) {
  static profiler::AnalyticCostModel model(profiler::find_device_spec("v100"));
  scheduler::SearchOptions options;
  options.strategy = strategy;
  options.mode = mode;
  return scheduler::make_scheduler(options)->schedule(g, model);
}

const std::vector<NetworkCase>& network_cases() {
  static const std::vector<NetworkCase> cases = {
      {"inception_v3", 75, 1},   {"googlenet", 64, 2},       {"squeezenet1_0", 64, 1},
      {"squeezenet1_1", 64, 2},  {"resnet50", 64, 1},        {"nasnet_a_mobile", 64, 1},
      {"nasnet_a_large", 64, 1}, {"randwire", 64, 1},        {"randwire_small", 64, 2},
      {"randwire_regular", 64, 1}, {"vit_tiny", 64, 2}};
  return cases;
}

namespace {

graph::Conv2dAttrs se_conv_attrs(int64_t in, int64_t out, int64_t k, graph::Activation act) {
  graph::Conv2dAttrs a;
  a.in_channels = in;
  a.out_channels = out;
  a.kernel = graph::Hw::square(k);
  a.padding = graph::Pads::same(k / 2);
  a.bias = true;
  a.activation = act;
  return a;
}

}  // namespace

// A squeeze-and-excitation block (global avg pool -> conv + SiLU -> conv + hard sigmoid -> binary
// mul broadcast) after a hard-swish convolution, a residual addition with a fused SiLU, every new
// standalone activation, channel shuffles (4 groups, and 16: no channel moves), global max
// pooling, reshapes (pooled N×C×1×1 to N×C, and a spatial tensor to other dimensions), a linear
// layer with a fused hard swish and a binary op with a constant and a fused hard sigmoid. Not
// prepared for inference, so that no pass fuses the standalone activations away.
graph::Graph se_block_graph(int64_t batch) {
  using graph::Activation;
  using graph::OpKind;
  networks::NetBuilder b("se_block", batch, 16, 9, 9);
  const auto x = b.input();
  const auto feat = b.op("stem", OpKind::kConv2d, se_conv_attrs(16, 16, 3, Activation::kHardSwish), {x});
  const auto squeeze = b.op("se_reduce", OpKind::kConv2d, se_conv_attrs(16, 8, 1, Activation::kSilu),
                            {b.global_avg_pool(feat, "se_pool")});
  const auto gate = b.op("se_expand", OpKind::kConv2d, se_conv_attrs(8, 16, 1, Activation::kHardSigmoid), {squeeze});
  graph::BinaryAttrs mul;
  mul.op = graph::BinaryOp::kMul;
  const auto excited = b.op("se_mul", OpKind::kBinary, mul, {feat, gate});
  const auto sum = b.op("residual", OpKind::kAdd, graph::AddAttrs{Activation::kSilu}, {excited, x});
  graph::LeakyReluAttrs leaky;
  leaky.alpha = 0.2;
  graph::HardSigmoidAttrs onnx;
  onnx.alpha = 0.2;
  auto y = b.op("leaky", OpKind::kLeakyRelu, leaky, {sum});
  y = b.op("hard_swish", OpKind::kHardSwish, graph::NoAttrs{}, {y});
  const auto silu = b.op("silu", OpKind::kSilu, graph::NoAttrs{}, {y});
  const auto hsig = b.op("hard_sigmoid", OpKind::kHardSigmoid, onnx, {silu});
  graph::BinaryAttrs offset;
  offset.op = graph::BinaryOp::kSub;
  offset.constant = {16, 1, 1};
  offset.constant_first = true;
  offset.activation = Activation::kHardSigmoid;
  const auto centred = b.op("c_minus_x", OpKind::kBinary, offset, {hsig});
  graph::ChannelShuffleAttrs shuffle4, shuffle16;
  shuffle4.groups = 4;
  shuffle16.groups = 16;
  const auto shuffled = b.op("shuffle16", OpKind::kChannelShuffle, shuffle16,
                             {b.op("shuffle4", OpKind::kChannelShuffle, shuffle4, {centred})});
  graph::ReshapeAttrs flat, spatial;
  flat.dims = {16};
  spatial.dims = {4, 9, 36};
  const auto pooled = b.op("pooled_flat", OpKind::kReshape, flat,
                           {b.op("gmp", OpKind::kGlobalMaxPool, graph::NoAttrs{}, {shuffled})});
  graph::LinearAttrs fc;
  fc.in_features = 16;
  fc.out_features = 10;
  fc.activation = Activation::kHardSwish;
  const auto logits = b.op("fc", OpKind::kLinear, fc, {pooled});
  const auto reshaped = b.op("respatial", OpKind::kReshape, spatial, {silu});
  return std::move(b).finish({logits, reshaped, shuffled});
}

}  // namespace stagecraft::testing
