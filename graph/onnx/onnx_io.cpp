// ONNX import and export. See onnx_io.h for what is supported.
#include "graph/onnx/onnx_io.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "common/files.h"
#include "common/strings.h"
#include "graph/errors.h"

namespace stagecraft::graph {

namespace {

constexpr int64_t kMinOpset = 11;
constexpr int64_t kMaxOpset = 17;
constexpr int64_t kExportOpset = 13;
constexpr int64_t kExportIrVersion = 8;
constexpr float kRelu6Max = 6.0f;

std::string sanitize(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    if (c == ':' || c == '#' || c == ' ' || c == '\t' || c == '\n') c = '_';
  }
  return out;
}

// ---- Import -----------------------------------------------------------------------------------

class Importer {
 public:
  Importer(std::string source, const OnnxImportOptions& options)
      : source_(std::move(source)), options_(options) {}

  OnnxModel run(const std::string& bytes) {
    onnx::ModelProto model;
    if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
        !model.ParseFromString(bytes)) {
      throw FormatError(cat(source_, ": not an ONNX model (the protobuf does not parse)"));
    }
    opset_ = 0;
    for (const auto& op : model.opset_import()) {
      if (op.domain().empty() || op.domain() == "ai.onnx") opset_ = op.version();
    }
    if (opset_ < kMinOpset || opset_ > kMaxOpset) {
      throw FormatError(cat(source_, ": opset ", opset_, " is not supported (supported: ", kMinOpset,
                            " to ", kMaxOpset, ")"));
    }
    const onnx::GraphProto& g = model.graph();
    graph_ = Graph(g.name().empty() ? "onnx_model" : sanitize(g.name()));
    for (const auto& init : g.initializer()) constants_[init.name()] = init;
    for (const auto& node : g.node()) {
      for (const auto& out : node.output()) readers_[out];  // every produced name
      for (const auto& in : node.input()) ++readers_[in];
      for (const auto& in : node.input()) reader_kinds_[in].insert(node.op_type());
    }
    add_inputs(g);
    for (const auto& node : g.node()) import_node(node);
    for (const auto& out : g.output()) {
      auto it = values_.find(out.name());
      if (it == values_.end()) {
        throw FormatError(cat(source_, ": graph output '", out.name(), "' is not produced by any node"));
      }
      graph_.add_output(it->second);
    }
    if (graph_.outputs().empty()) throw FormatError(cat(source_, ": the model has no outputs"));
    return OnnxModel{std::move(graph_), std::move(weights_), opset_};
  }

 private:
  struct PendingPad {
    ValueId input;
    Pads pads;
  };

  [[noreturn]] void fail(const onnx::NodeProto& node, const std::string& what) const {
    throw FormatError(cat(source_, ": node '", node.name().empty() ? node.output(0) : node.name(),
                          "' (", node.op_type(), "): ", what));
  }

  void add_inputs(const onnx::GraphProto& g) {
    for (const auto& input : g.input()) {
      if (constants_.count(input.name())) continue;  // an initializer listed as input
      const auto& type = input.type().tensor_type();
      if (type.elem_type() != onnx::TensorProto::FLOAT) {
        throw FormatError(cat(source_, ": input '", input.name(), "' is not float32 (elem_type ",
                              type.elem_type(), ")"));
      }
      std::vector<int64_t> dims;
      for (int i = 0; i < type.shape().dim_size(); ++i) {
        const auto& d = type.shape().dim(i);
        if (d.has_dim_value() && d.dim_value() > 0) {
          dims.push_back(d.dim_value());
        } else if (i == 0 && options_.batch > 0) {
          dims.push_back(options_.batch);
        } else if (i == 0) {
          throw FormatError(cat(source_, ": input '", input.name(), "' has a symbolic batch "
                                "dimension '", d.dim_param(), "': give the batch size (--batch N)"));
        } else {
          throw FormatError(cat(source_, ": input '", input.name(), "' has a dynamic dimension ", i,
                                " ('", d.dim_param(), "'): only the batch may be symbolic"));
        }
      }
      if (options_.batch > 0 && !dims.empty()) dims[0] = options_.batch;
      if (dims.size() != 4 && dims.size() != 2) {
        throw FormatError(cat(source_, ": input '", input.name(), "' has rank ", dims.size(),
                              " (supported: 4 or 2)"));
      }
      values_[input.name()] = graph_.add_input(unique(sanitize(input.name())), make_desc(Shape(dims)));
    }
  }

  std::string unique(const std::string& base) {
    std::string name = base.empty() ? "op" : base;
    for (int i = 2; used_.count(name) || graph_.find_value(name) || graph_.find_op(name); ++i) {
      name = cat(base, "_", i);
    }
    used_.insert(name);
    return name;
  }

  // ---- Attributes and constants ----

  const onnx::AttributeProto* attr(const onnx::NodeProto& node, const char* name) const {
    for (const auto& a : node.attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  int64_t attr_int(const onnx::NodeProto& node, const char* name, int64_t fallback) const {
    const auto* a = attr(node, name);
    return a ? a->i() : fallback;
  }
  float attr_float(const onnx::NodeProto& node, const char* name, float fallback) const {
    const auto* a = attr(node, name);
    return a ? a->f() : fallback;
  }
  std::vector<int64_t> attr_ints(const onnx::NodeProto& node, const char* name) const {
    const auto* a = attr(node, name);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
  }
  std::string attr_string(const onnx::NodeProto& node, const char* name) const {
    const auto* a = attr(node, name);
    return a ? a->s() : std::string();
  }

  const onnx::TensorProto* constant(const std::string& name) const {
    auto it = constants_.find(name);
    return it == constants_.end() ? nullptr : &it->second;
  }

  std::vector<float> floats(const onnx::NodeProto& node, const onnx::TensorProto& t) const {
    if (t.data_type() != onnx::TensorProto::FLOAT) {
      fail(node, cat("initializer '", t.name(), "' is not float32 (data_type ", t.data_type(), ")"));
    }
    int64_t count = 1;
    for (int64_t d : t.dims()) count *= d;
    std::vector<float> v;
    if (t.has_raw_data()) {
      if (t.raw_data().size() != static_cast<size_t>(count) * sizeof(float)) {
        fail(node, cat("initializer '", t.name(), "' has ", t.raw_data().size(), " bytes for ",
                       count, " floats"));
      }
      v.resize(static_cast<size_t>(count));
      std::memcpy(v.data(), t.raw_data().data(), t.raw_data().size());
    } else {
      v.assign(t.float_data().begin(), t.float_data().end());
      if (static_cast<int64_t>(v.size()) != count) {
        fail(node, cat("initializer '", t.name(), "' holds ", v.size(), " values for ", count));
      }
    }
    return v;
  }

  std::vector<int64_t> ints(const onnx::NodeProto& node, const onnx::TensorProto& t) const {
    std::vector<int64_t> v;
    if (t.data_type() == onnx::TensorProto::INT64) {
      if (t.has_raw_data()) {
        v.resize(t.raw_data().size() / sizeof(int64_t));
        std::memcpy(v.data(), t.raw_data().data(), v.size() * sizeof(int64_t));
      } else {
        v.assign(t.int64_data().begin(), t.int64_data().end());
      }
    } else if (t.data_type() == onnx::TensorProto::INT32) {
      if (t.has_raw_data()) {
        std::vector<int32_t> v32(t.raw_data().size() / sizeof(int32_t));
        std::memcpy(v32.data(), t.raw_data().data(), v32.size() * sizeof(int32_t));
        v.assign(v32.begin(), v32.end());
      } else {
        v.assign(t.int32_data().begin(), t.int32_data().end());
      }
    } else {
      fail(node, cat("constant '", t.name(), "' must hold integers"));
    }
    return v;
  }

  std::optional<float> scalar(const onnx::NodeProto& node, size_t slot) const {
    if (static_cast<int>(slot) >= node.input_size() || node.input(static_cast<int>(slot)).empty()) {
      return std::nullopt;
    }
    const auto* t = constant(node.input(static_cast<int>(slot)));
    if (!t) fail(node, cat("input ", slot, " must be a constant"));
    const auto v = floats(node, *t);
    if (v.size() != 1) fail(node, cat("input ", slot, " must be a scalar"));
    return v[0];
  }

  ValueId input(const onnx::NodeProto& node, int slot) const {
    if (slot >= node.input_size() || node.input(slot).empty()) fail(node, cat("input ", slot, " is missing"));
    const std::string& name = node.input(slot);
    auto it = values_.find(name);
    if (it != values_.end()) return it->second;
    if (constants_.count(name)) {
      fail(node, cat("input '", name, "' is a constant where a tensor is expected (unsupported)"));
    }
    fail(node, cat("reads '", name, "', which no earlier node produces (the graph is not sorted, "
                   "has a cycle, or the value is missing)"));
  }

  void define(const onnx::NodeProto& node, int slot, ValueId value) {
    if (slot < node.output_size()) values_[node.output(slot)] = value;
  }

  ValueId add(const onnx::NodeProto& node, OpKind kind, OpAttrs attrs, std::vector<ValueId> inputs) {
    const std::string base = sanitize(node.name().empty() ? node.output(0) : node.name());
    try {
      const OpId id = graph_.add_op(unique(base), kind, std::move(attrs), std::move(inputs));
      last_op_ = id;
      return graph_.op(id).outputs[0];
    } catch (Error& e) {
      e.prepend(cat(source_, ": node '", node.name(), "' (", node.op_type(), "): "));
      throw;
    }
  }

  Pads pads_of(const onnx::NodeProto& node, const Hw& kernel, const Hw& stride, const Hw& dilation,
               const Shape& in) const {
    const std::string auto_pad = attr_string(node, "auto_pad");
    const auto p = attr_ints(node, "pads");
    if (auto_pad.empty() || auto_pad == "NOTSET") {
      if (p.empty()) return Pads{};
      if (p.size() != 4) fail(node, "pads must have 4 values for a 2-D window");
      return Pads{p[0], p[1], p[2], p[3]};
    }
    if (auto_pad == "VALID") return Pads{};
    if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
      fail(node, cat("auto_pad=", auto_pad, " is not supported"));
    }
    auto total = [](int64_t size, int64_t k, int64_t s, int64_t d) {
      const int64_t out = (size + s - 1) / s;
      return std::max<int64_t>(0, (out - 1) * s + (k - 1) * d + 1 - size);
    };
    const int64_t th = total(in[2], kernel.h, stride.h, dilation.h);
    const int64_t tw = total(in[3], kernel.w, stride.w, dilation.w);
    const bool upper = auto_pad == "SAME_UPPER";
    const int64_t top = upper ? th / 2 : th - th / 2, left = upper ? tw / 2 : tw - tw / 2;
    return Pads{top, left, th - top, tw - left};
  }

  Hw hw(const onnx::NodeProto& node, const char* name, int64_t fallback) const {
    const auto v = attr_ints(node, name);
    if (v.empty()) return Hw{fallback, fallback};
    if (v.size() != 2) fail(node, cat(name, " must have 2 values (2-D ops only)"));
    return Hw{v[0], v[1]};
  }

  // ---- Nodes ----

  void import_node(const onnx::NodeProto& node) {
    if (!node.domain().empty() && node.domain() != "ai.onnx") {
      fail(node, cat("domain '", node.domain(), "' is not supported"));
    }
    const std::string& t = node.op_type();
    if (t == "Constant") {
      const auto* value = attr(node, "value");
      if (!value || !value->has_t()) fail(node, "only tensor-valued constants are supported");
      constants_[node.output(0)] = value->t();
    } else if (t == "Conv") {
      conv(node);
    } else if (t == "BatchNormalization") {
      batch_norm(node);
    } else if (t == "Relu" || t == "Sigmoid") {
      define(node, 0, add(node, t == "Relu" ? OpKind::kRelu : OpKind::kSigmoid, NoAttrs{}, {input(node, 0)}));
    } else if (t == "Clip") {
      clip(node);
    } else if (t == "MaxPool" || t == "AveragePool") {
      pool(node);
    } else if (t == "GlobalAveragePool") {
      define(node, 0, add(node, OpKind::kGlobalAvgPool, NoAttrs{}, {input(node, 0)}));
    } else if (t == "Add" || t == "Sum") {
      std::vector<ValueId> ins;
      for (int i = 0; i < node.input_size(); ++i) ins.push_back(input(node, i));
      if (ins.size() == 1) {
        define(node, 0, ins[0]);
      } else {
        define(node, 0, add(node, OpKind::kAdd, AddAttrs{}, ins));
      }
    } else if (t == "Mul") {
      mul(node);
    } else if (t == "Concat") {
      const int64_t axis = attr_int(node, "axis", 1);
      if (axis != 1 && axis != -3) fail(node, cat("concatenation along axis ", axis, " (only channels, axis 1)"));
      std::vector<ValueId> ins;
      for (int i = 0; i < node.input_size(); ++i) ins.push_back(input(node, i));
      define(node, 0, add(node, OpKind::kConcat, NoAttrs{}, ins));
    } else if (t == "Flatten") {
      if (attr_int(node, "axis", 1) != 1) fail(node, "only axis 1 is supported");
      define(node, 0, add(node, OpKind::kFlatten, NoAttrs{}, {input(node, 0)}));
    } else if (t == "Reshape") {
      reshape(node);
    } else if (t == "Gemm" || t == "MatMul") {
      gemm(node);
    } else if (t == "Softmax") {
      const ValueId x = input(node, 0);
      const int64_t rank = static_cast<int64_t>(graph_.value(x).desc.shape.rank());
      int64_t axis = attr_int(node, "axis", opset_ >= 13 ? -1 : 1);
      if (axis < 0) axis += rank;
      if (rank != 2 || axis != 1) fail(node, "only softmax over the features of an N×C tensor is supported");
      define(node, 0, add(node, OpKind::kSoftmax, NoAttrs{}, {x}));
    } else if (t == "Dropout" || t == "Identity") {
      define(node, 0, input(node, 0));
    } else if (t == "Pad") {
      pad(node);
    } else if (t == "Split") {
      split(node);
    } else if (t == "Slice") {
      slice(node);
    } else {
      fail(node, "this op is not supported");
    }
  }

  void conv(const onnx::NodeProto& node) {
    ValueId x = kNoOp;
    Pads extra;
    if (auto it = pending_pads_.find(node.input(0)); it != pending_pads_.end()) {
      x = it->second.input;  // the Pad before it is folded into this convolution
      extra = it->second.pads;
    } else {
      x = input(node, 0);
    }
    const auto* w = node.input_size() > 1 ? constant(node.input(1)) : nullptr;
    if (!w) fail(node, "the weight (input 1) must be an initializer");
    if (w->dims_size() != 4) fail(node, "only 2-D convolutions (4-D weights) are supported");
    Conv2dAttrs a;
    a.out_channels = w->dims(0);
    a.groups = attr_int(node, "group", 1);
    a.in_channels = w->dims(1) * a.groups;
    a.kernel = Hw{w->dims(2), w->dims(3)};
    if (const auto k = attr_ints(node, "kernel_shape"); !k.empty() && Hw{k[0], k.size() > 1 ? k[1] : k[0]} != a.kernel) {
      fail(node, "kernel_shape does not match the weight");
    }
    a.stride = hw(node, "strides", 1);
    a.dilation = hw(node, "dilations", 1);
    a.padding = pads_of(node, a.kernel, a.stride, a.dilation, graph_.value(x).desc.shape);
    a.padding.top += extra.top;
    a.padding.left += extra.left;
    a.padding.bottom += extra.bottom;
    a.padding.right += extra.right;
    const onnx::TensorProto* b = node.input_size() > 2 && !node.input(2).empty() ? constant(node.input(2)) : nullptr;
    if (node.input_size() > 2 && !node.input(2).empty() && !b) fail(node, "the bias (input 2) must be an initializer");
    a.bias = b != nullptr;
    const ValueId y = add(node, OpKind::kConv2d, a, {x});
    OpWeights& ow = weights_[graph_.op(last_op_).name];
    ow.weight = floats(node, *w);
    if (b) ow.bias = floats(node, *b);
    define(node, 0, y);
  }

  void batch_norm(const onnx::NodeProto& node) {
    if (node.output_size() > 1 && !node.output(1).empty()) fail(node, "training outputs are not supported");
    const ValueId x = input(node, 0);
    OpWeights w;
    const char* names[] = {"scale", "bias", "mean", "var"};
    std::vector<float>* slots[] = {&w.gamma, &w.beta, &w.mean, &w.var};
    for (int i = 0; i < 4; ++i) {
      const auto* t = node.input_size() > i + 1 ? constant(node.input(i + 1)) : nullptr;
      if (!t) fail(node, cat("the ", names[i], " (input ", i + 1, ") must be an initializer"));
      *slots[i] = floats(node, *t);
    }
    BatchNormAttrs a;
    a.eps = attr_float(node, "epsilon", 1e-5f);
    define(node, 0, add(node, OpKind::kBatchNorm, a, {x}));
    weights_[graph_.op(last_op_).name] = std::move(w);
  }

  void clip(const onnx::NodeProto& node) {
    std::optional<float> lo, hi;
    if (opset_ >= 11) {
      lo = scalar(node, 1);
      hi = scalar(node, 2);
    } else {
      if (attr(node, "min")) lo = attr_float(node, "min", 0);
      if (attr(node, "max")) hi = attr_float(node, "max", 0);
    }
    const bool zero_low = lo && *lo == 0.0f;
    if (zero_low && hi && *hi == kRelu6Max) {
      define(node, 0, add(node, OpKind::kRelu6, NoAttrs{}, {input(node, 0)}));
    } else if (zero_low && (!hi || std::isinf(*hi))) {
      define(node, 0, add(node, OpKind::kRelu, NoAttrs{}, {input(node, 0)}));
    } else {
      fail(node, cat("only Clip(0, 6) and Clip(0, inf) are supported (got min ",
                     lo ? cat(*lo) : "none", ", max ", hi ? cat(*hi) : "none", ")"));
    }
  }

  void pool(const onnx::NodeProto& node) {
    if (node.output_size() > 1 && !node.output(1).empty()) fail(node, "the indices output is not supported");
    const ValueId x = input(node, 0);
    const Hw k = hw(node, "kernel_shape", 0);
    if (k.h < 1) fail(node, "kernel_shape is required");
    const Hw s = hw(node, "strides", 1);
    if (hw(node, "dilations", 1) != Hw{1, 1}) fail(node, "dilated pooling is not supported");
    if (attr_int(node, "storage_order", 0) != 0) fail(node, "storage_order 1 is not supported");
    const Pads p = pads_of(node, k, s, Hw{1, 1}, graph_.value(x).desc.shape);
    const bool ceil = attr_int(node, "ceil_mode", 0) != 0;
    if (node.op_type() == "MaxPool") {
      MaxPoolAttrs a;
      a.kernel = k, a.stride = s, a.padding = p, a.ceil_mode = ceil;
      define(node, 0, add(node, OpKind::kMaxPool, a, {x}));
    } else {
      AvgPoolAttrs a;
      a.kernel = k, a.stride = s, a.padding = p, a.ceil_mode = ceil;
      a.count_include_pad = attr_int(node, "count_include_pad", 0) != 0;
      define(node, 0, add(node, OpKind::kAvgPool, a, {x}));
    }
  }

  void mul(const onnx::NodeProto& node) {
    for (int slot : {1, 0}) {
      const auto* c = constant(node.input(slot));
      if (!c) continue;
      const auto v = floats(node, *c);
      if (v.size() != 1) fail(node, "only multiplication by a scalar constant is supported");
      ScaleAttrs a;
      a.factor = v[0];
      define(node, 0, add(node, OpKind::kScale, a, {input(node, 1 - slot)}));
      return;
    }
    fail(node, "only multiplication by a scalar constant is supported");
  }

  void reshape(const onnx::NodeProto& node) {
    const ValueId x = input(node, 0);
    const auto* s = node.input_size() > 1 ? constant(node.input(1)) : nullptr;
    if (!s) fail(node, "the target shape must be a constant");
    const Shape& in = graph_.value(x).desc.shape;
    std::vector<int64_t> target = ints(node, *s);
    int64_t known = 1, minus = -1;
    for (size_t i = 0; i < target.size(); ++i) {
      if (target[i] == 0 && i < in.rank()) target[i] = in[i];
      if (target[i] == -1) minus = static_cast<int64_t>(i);
      else known *= target[i];
    }
    if (minus >= 0 && known > 0) target[static_cast<size_t>(minus)] = in.numel() / known;
    if (Shape(target) == in) {
      define(node, 0, x);
    } else if (target.size() == 2 && target[0] == in[0] && target[1] * in[0] == in.numel()) {
      define(node, 0, add(node, OpKind::kFlatten, NoAttrs{}, {x}));
    } else {
      fail(node, cat("reshape of ", in.to_string(), " to ", Shape(target).to_string(),
                     " is not supported (only flattening to N×features)"));
    }
  }

  void gemm(const onnx::NodeProto& node) {
    const bool matmul = node.op_type() == "MatMul";
    const ValueId x = input(node, 0);
    if (!matmul && (attr_int(node, "transA", 0) != 0 || attr_float(node, "alpha", 1.0f) != 1.0f ||
                    attr_float(node, "beta", 1.0f) != 1.0f)) {
      fail(node, "only transA=0, alpha=1, beta=1 are supported");
    }
    const auto* b = node.input_size() > 1 ? constant(node.input(1)) : nullptr;
    if (!b || b->dims_size() != 2) fail(node, "the second input must be a 2-D initializer");
    const bool trans_b = !matmul && attr_int(node, "transB", 0) != 0;
    const int64_t out = trans_b ? b->dims(0) : b->dims(1);
    const int64_t in = trans_b ? b->dims(1) : b->dims(0);
    std::vector<float> w = floats(node, *b);
    if (!trans_b) {  // [in, out] -> [out, in]
      std::vector<float> t(w.size());
      for (int64_t i = 0; i < in; ++i)
        for (int64_t o = 0; o < out; ++o) t[static_cast<size_t>(o * in + i)] = w[static_cast<size_t>(i * out + o)];
      w = std::move(t);
    }
    const onnx::TensorProto* c = !matmul && node.input_size() > 2 && !node.input(2).empty() ? constant(node.input(2)) : nullptr;
    if (!matmul && node.input_size() > 2 && !node.input(2).empty() && !c) fail(node, "the bias (input 2) must be an initializer");
    LinearAttrs a;
    a.in_features = in;
    a.out_features = out;
    a.bias = c != nullptr;
    const ValueId y = add(node, OpKind::kLinear, a, {x});
    OpWeights& ow = weights_[graph_.op(last_op_).name];
    ow.weight = std::move(w);
    if (c) {
      ow.bias = floats(node, *c);
      if (static_cast<int64_t>(ow.bias.size()) != out) fail(node, "the bias must have one value per output");
    }
    define(node, 0, y);
  }

  void pad(const onnx::NodeProto& node) {
    const ValueId x = input(node, 0);
    const std::string mode = attr_string(node, "mode");
    if (!mode.empty() && mode != "constant") fail(node, cat("mode '", mode, "' is not supported"));
    std::vector<int64_t> p;
    float value = 0;
    if (opset_ >= 11) {
      const auto* t = node.input_size() > 1 ? constant(node.input(1)) : nullptr;
      if (!t) fail(node, "pads must be a constant");
      p = ints(node, *t);
      if (auto v = scalar(node, 2)) value = *v;
    } else {
      p = attr_ints(node, "pads");
      value = attr_float(node, "value", 0);
    }
    if (p.size() != 8 || p[0] != 0 || p[1] != 0 || p[4] != 0 || p[5] != 0) {
      fail(node, "only padding of H and W of a 4-D tensor is supported");
    }
    const Pads pads{p[2], p[3], p[6], p[7]};
    const auto& kinds = reader_kinds_[node.output(0)];
    const bool into_convs = value == 0.0f && !kinds.empty() && kinds.size() == 1 &&
                            *kinds.begin() == "Conv" && pads.top >= 0 && pads.left >= 0 &&
                            pads.bottom >= 0 && pads.right >= 0;
    if (into_convs) {  // folded into the convolutions that read it
      pending_pads_[node.output(0)] = PendingPad{x, pads};
      return;
    }
    PadAttrs a;
    a.pads = pads;
    a.value = value;
    define(node, 0, add(node, OpKind::kPad, a, {x}));
  }

  void slice(const onnx::NodeProto& node) {
    const ValueId x = input(node, 0);
    auto values = [&](int slot) -> std::vector<int64_t> {
      if (node.input_size() <= slot || node.input(slot).empty()) return {};
      const auto* t = constant(node.input(slot));
      if (!t) fail(node, cat("input ", slot, " must be a constant"));
      return ints(node, *t);
    };
    const auto starts = opset_ >= 10 ? values(1) : attr_ints(node, "starts");
    const auto ends = opset_ >= 10 ? values(2) : attr_ints(node, "ends");
    const auto axes = opset_ >= 10 ? values(3) : attr_ints(node, "axes");
    const auto steps = values(4);
    const int64_t channels = graph_.value(x).desc.shape[1];
    if (starts.size() != 1 || ends.size() != 1 || (!axes.empty() && axes != std::vector<int64_t>{1}) ||
        (!steps.empty() && steps != std::vector<int64_t>{1})) {
      fail(node, "only a channel slice (axes [1], step 1) is supported");
    }
    auto clamp = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + channels : v, 0, channels); };
    SliceAttrs a;
    a.begin = clamp(starts[0]);
    a.end = clamp(ends[0]);
    define(node, 0, add(node, OpKind::kSlice, a, {x}));
  }

  void split(const onnx::NodeProto& node) {
    const ValueId x = input(node, 0);
    if (attr_int(node, "axis", 0) != 1) fail(node, "only splits along channels (axis 1) are supported");
    std::vector<int64_t> sizes = attr_ints(node, "split");
    if (node.input_size() > 1 && !node.input(1).empty()) {
      const auto* t = constant(node.input(1));
      if (!t) fail(node, "split sizes must be a constant");
      sizes = ints(node, *t);
    }
    const int64_t channels = graph_.value(x).desc.shape[1];
    if (sizes.empty()) {
      const int64_t n = node.output_size();
      if (channels % n != 0) fail(node, "channels do not split evenly");
      sizes.assign(static_cast<size_t>(n), channels / n);
    }
    SplitAttrs a;
    a.sizes = sizes;
    add(node, OpKind::kSplit, a, {x});
    const Op& op = graph_.op(last_op_);
    for (int i = 0; i < node.output_size(); ++i) define(node, i, op.outputs.at(static_cast<size_t>(i)));
  }

  std::string source_;
  OnnxImportOptions options_;
  int64_t opset_ = 0;
  Graph graph_;
  WeightStore weights_;
  OpId last_op_ = kNoOp;
  std::map<std::string, ValueId> values_;
  std::map<std::string, onnx::TensorProto> constants_;
  std::map<std::string, int> readers_;
  std::map<std::string, std::set<std::string>> reader_kinds_;
  std::map<std::string, PendingPad> pending_pads_;
  std::set<std::string> used_;
};

// ---- Export -----------------------------------------------------------------------------------

class Exporter {
 public:
  Exporter(const Graph& graph, const WeightStore& weights) : g_(graph), w_(weights) {}

  std::string run() {
    model_.set_ir_version(kExportIrVersion);
    model_.set_producer_name("stagecraft");
    auto* opset = model_.add_opset_import();
    opset->set_domain("");
    opset->set_version(kExportOpset);
    graph_ = model_.mutable_graph();
    graph_->set_name(g_.name());
    for (ValueId v : g_.inputs()) value_info(graph_->add_input(), v);
    for (const Op& op : g_.ops()) export_op(op);
    for (ValueId v : g_.outputs()) value_info(graph_->add_output(), v);
    try {
      onnx::checker::check_model(model_);
    } catch (const std::exception& e) {
      throw FormatError(cat("exported ONNX model does not pass the ONNX checker: ", e.what()));
    }
    std::string bytes;
    model_.SerializeToString(&bytes);
    return bytes;
  }

 private:
  void value_info(onnx::ValueInfoProto* info, ValueId v) {
    info->set_name(g_.value(v).name);
    auto* t = info->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : g_.value(v).desc.shape.dims()) t->mutable_shape()->add_dim()->set_dim_value(d);
  }

  std::string floats(const std::string& name, const std::vector<float>& data, std::vector<int64_t> dims) {
    auto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float)));
    return name;
  }

  std::string int64s(const std::string& name, const std::vector<int64_t>& data) {
    auto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(data.size()));
    for (int64_t v : data) t->add_int64_data(v);
    return name;
  }

  onnx::NodeProto* node(const std::string& type, const std::string& name,
                        const std::vector<std::string>& inputs, const std::vector<std::string>& outputs) {
    auto* n = graph_->add_node();
    n->set_op_type(type);
    n->set_name(name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return n;
  }

  static void ints(onnx::NodeProto* n, const char* name, std::vector<int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void integer(onnx::NodeProto* n, const char* name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void real(onnx::NodeProto* n, const char* name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }

  const OpWeights& weights_of(const Op& op) {
    const OpWeights* w = w_.find(op.name);
    if (!w) throw FormatError(cat("cannot export op '", op.name, "': it has no weights"));
    return *w;
  }

  // The name an op with a fused activation writes to (the activation becomes its own node).
  static std::string pre_activation(Activation act, const std::string& out) {
    return act == Activation::kNone ? out : out + "/pre_activation";
  }

  // Emits the fused activation after the op's node (nodes must stay topologically sorted).
  void emit_activation(const Op& op, Activation act, const std::string& out) {
    const std::string pre = pre_activation(act, out);
    if (act == Activation::kRelu) node("Relu", op.name + "/relu", {pre}, {out});
    if (act == Activation::kSigmoid) node("Sigmoid", op.name + "/sigmoid", {pre}, {out});
    if (act == Activation::kRelu6) {
      node("Clip", op.name + "/relu6", {pre, clip_bound(0), clip_bound(kRelu6Max)}, {out});
    }
  }

  std::string clip_bound(float v) {
    const std::string name = v == 0 ? "stagecraft/clip_min" : "stagecraft/clip_max";
    if (!clip_.count(name)) {
      floats(name, {v}, {});
      clip_.insert(name);
    }
    return name;
  }

  void export_op(const Op& op) {
    std::vector<std::string> in;
    for (ValueId v : op.inputs) in.push_back(g_.value(v).name);
    const std::string out = g_.value(op.outputs[0]).name;
    switch (op.kind) {
      case OpKind::kConv2d: {
        const auto& a = op.attrs_as<Conv2dAttrs>();
        const auto& w = weights_of(op);
        in.push_back(floats(op.name + "/W", w.weight, {a.out_channels, a.in_channels / a.groups, a.kernel.h, a.kernel.w}));
        if (a.bias) in.push_back(floats(op.name + "/B", w.bias, {a.out_channels}));
        auto* n = node("Conv", op.name, in, {pre_activation(a.activation, out)});
        ints(n, "kernel_shape", {a.kernel.h, a.kernel.w});
        ints(n, "strides", {a.stride.h, a.stride.w});
        ints(n, "pads", {a.padding.top, a.padding.left, a.padding.bottom, a.padding.right});
        ints(n, "dilations", {a.dilation.h, a.dilation.w});
        integer(n, "group", a.groups);
        emit_activation(op, a.activation, out);
        return;
      }
      case OpKind::kBatchNorm: {
        const auto& w = weights_of(op);
        const int64_t c = static_cast<int64_t>(w.gamma.size());
        for (auto [suffix, data] : {std::pair{"/scale", &w.gamma}, {"/B", &w.beta}, {"/mean", &w.mean}, {"/var", &w.var}}) {
          in.push_back(floats(op.name + suffix, *data, {c}));
        }
        real(node("BatchNormalization", op.name, in, {out}), "epsilon",
             static_cast<float>(op.attrs_as<BatchNormAttrs>().eps));
        return;
      }
      case OpKind::kRelu:
        node("Relu", op.name, in, {out});
        return;
      case OpKind::kRelu6:
        node("Clip", op.name, {in[0], clip_bound(0), clip_bound(kRelu6Max)}, {out});
        return;
      case OpKind::kSigmoid:
        node("Sigmoid", op.name, in, {out});
        return;
      case OpKind::kMaxPool:
      case OpKind::kAvgPool: {
        const bool max = op.kind == OpKind::kMaxPool;
        auto* n = node(max ? "MaxPool" : "AveragePool", op.name, in, {out});
        Hw k, s;
        Pads p;
        bool ceil;
        if (max) {
          const auto& a = op.attrs_as<MaxPoolAttrs>();
          k = a.kernel, s = a.stride, p = a.padding, ceil = a.ceil_mode;
        } else {
          const auto& a = op.attrs_as<AvgPoolAttrs>();
          k = a.kernel, s = a.stride, p = a.padding, ceil = a.ceil_mode;
          integer(n, "count_include_pad", a.count_include_pad ? 1 : 0);
        }
        ints(n, "kernel_shape", {k.h, k.w});
        ints(n, "strides", {s.h, s.w});
        ints(n, "pads", {p.top, p.left, p.bottom, p.right});
        integer(n, "ceil_mode", ceil ? 1 : 0);
        return;
      }
      case OpKind::kGlobalAvgPool:
        node("GlobalAveragePool", op.name, in, {out});
        return;
      case OpKind::kAdd: {
        const Activation act = op.attrs_as<AddAttrs>().activation;
        node(in.size() == 2 ? "Add" : "Sum", op.name, in, {pre_activation(act, out)});
        emit_activation(op, act, out);
        return;
      }
      case OpKind::kConcat:
        integer(node("Concat", op.name, in, {out}), "axis", 1);
        return;
      case OpKind::kSplit: {
        std::vector<std::string> outs;
        for (ValueId v : op.outputs) outs.push_back(g_.value(v).name);
        in.push_back(int64s(op.name + "/split", op.attrs_as<SplitAttrs>().sizes));
        integer(node("Split", op.name, in, outs), "axis", 1);
        return;
      }
      case OpKind::kSlice: {
        const auto& a = op.attrs_as<SliceAttrs>();
        in.push_back(int64s(op.name + "/starts", {a.begin}));
        in.push_back(int64s(op.name + "/ends", {a.end}));
        in.push_back(int64s(op.name + "/axes", {1}));
        node("Slice", op.name, in, {out});
        return;
      }
      case OpKind::kIdentity:
        node("Identity", op.name, in, {out});
        return;
      case OpKind::kPad: {
        const auto& a = op.attrs_as<PadAttrs>();
        in.push_back(int64s(op.name + "/pads", {0, 0, a.pads.top, a.pads.left, 0, 0, a.pads.bottom, a.pads.right}));
        in.push_back(floats(op.name + "/value", {static_cast<float>(a.value)}, {}));
        node("Pad", op.name, in, {out});
        return;
      }
      case OpKind::kFlatten:
        integer(node("Flatten", op.name, in, {out}), "axis", 1);
        return;
      case OpKind::kLinear: {
        const auto& a = op.attrs_as<LinearAttrs>();
        const auto& w = weights_of(op);
        in.push_back(floats(op.name + "/W", w.weight, {a.out_features, a.in_features}));
        if (a.bias) in.push_back(floats(op.name + "/B", w.bias, {a.out_features}));
        integer(node("Gemm", op.name, in, {pre_activation(a.activation, out)}), "transB", 1);
        emit_activation(op, a.activation, out);
        return;
      }
      case OpKind::kSoftmax:
        integer(node("Softmax", op.name, in, {out}), "axis", 1);
        return;
      case OpKind::kScale:
        in.push_back(floats(op.name + "/factor", {static_cast<float>(op.attrs_as<ScaleAttrs>().factor)}, {}));
        node("Mul", op.name, in, {out});
        return;
    }
  }

  const Graph& g_;
  const WeightStore& w_;
  onnx::ModelProto model_;
  onnx::GraphProto* graph_ = nullptr;
  std::set<std::string> clip_;
};

}  // namespace

OnnxModel import_onnx_bytes(const std::string& bytes, const std::string& source,
                            const OnnxImportOptions& options) {
  return Importer(source, options).run(bytes);
}

OnnxModel import_onnx(const std::string& path, const OnnxImportOptions& options) {
  return import_onnx_bytes(read_text_file(path), path, options);
}

std::string export_onnx_bytes(const Graph& graph, const WeightStore& weights) {
  return Exporter(graph, weights).run();
}

void export_onnx(const Graph& graph, const WeightStore& weights, const std::string& path) {
  write_text_file(path, export_onnx_bytes(graph, weights));
}

}  // namespace stagecraft::graph
