// ONNX export: a graph and its weights as an opset-17 model checked by the ONNX checker. Fused
// activations become their own nodes after the op; binary ops with a constant get it as an
// initializer; a channel shuffle becomes Reshape -> Transpose -> Reshape (what PyTorch writes).
#include <cmath>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <map>
#include <set>

#include "common/files.h"
#include "common/strings.h"
#include "graph/activation_kinds.h"
#include "graph/errors.h"
#include "graph/onnx/onnx_io.h"

namespace stagecraft::graph {

namespace {

constexpr int64_t kExportOpset = 17;
constexpr int64_t kExportIrVersion = 8;
constexpr float kRelu6Max = 6.0f;

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
  static void text(onnx::NodeProto* n, const char* name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
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
    if (act == Activation::kNone) return;
    activation(op.name + "/" + std::string(to_string(act)), act, pre_activation(act, out), out);
  }

  // The nodes computing `act` from `in` into `out`.
  void activation(const std::string& name, Activation act, const std::string& in, const std::string& out) {
    static const std::map<Activation, std::string> kOneNode = {
        {Activation::kRelu, "Relu"}, {Activation::kSigmoid, "Sigmoid"}, {Activation::kHardSwish, "HardSwish"},
        {Activation::kTanh, "Tanh"}, {Activation::kSqrt, "Sqrt"}};
    switch (act) {
      case Activation::kNone:
        node("Identity", name, {in}, {out});
        return;
      case Activation::kRelu:
      case Activation::kSigmoid:
      case Activation::kHardSwish:
      case Activation::kTanh:
      case Activation::kSqrt:  // one ONNX node of the same name
        node(kOneNode.at(act), name, {in}, {out});
        return;
      case Activation::kRelu6:
        node("Clip", name, {in, clip_bound(0), clip_bound(kRelu6Max)}, {out});
        return;
      case Activation::kHardSigmoid: {
        auto* n = node("HardSigmoid", name, {in}, {out});
        real(n, "alpha", static_cast<float>(kHardSigmoidAlpha));
        real(n, "beta", static_cast<float>(kHardSigmoidBeta));
        return;
      }
      case Activation::kSilu:  // as exporters write it: x * sigmoid(x)
        node("Sigmoid", name + "/sigmoid", {in}, {name + "/gate"});
        node("Mul", name, {in, name + "/gate"}, {out});
        return;
      case Activation::kGelu:  // as PyTorch's TorchScript exporter writes it (opset 17 has no Gelu)
        node("Div", name + "/div", {in, scalar(name + "/sqrt2", 1.41421356f)}, {name + "/scaled"});
        node("Erf", name + "/erf", {name + "/scaled"}, {name + "/erf_out"});
        node("Add", name + "/add", {name + "/erf_out", scalar(name + "/one", 1.0f)}, {name + "/plus_one"});
        node("Mul", name + "/mul", {in, name + "/plus_one"}, {name + "/product"});
        node("Mul", name, {name + "/product", scalar(name + "/half", 0.5f)}, {out});
        return;
      case Activation::kGeluTanh:  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
        node("Pow", name + "/pow", {in, scalar(name + "/three", 3.0f)}, {name + "/cube"});
        node("Mul", name + "/kappa", {name + "/cube", scalar(name + "/k", 0.044715f)}, {name + "/cubic"});
        node("Add", name + "/inner", {in, name + "/cubic"}, {name + "/sum"});
        node("Mul", name + "/beta", {name + "/sum", scalar(name + "/b", 0.79788456f)}, {name + "/arg"});
        node("Tanh", name + "/tanh", {name + "/arg"}, {name + "/tanh_out"});
        node("Add", name + "/add", {name + "/tanh_out", scalar(name + "/one", 1.0f)}, {name + "/plus_one"});
        node("Mul", name + "/mul", {in, name + "/plus_one"}, {name + "/product"});
        node("Mul", name, {name + "/product", scalar(name + "/half", 0.5f)}, {out});
        return;
    }
  }

  std::string scalar(const std::string& name, float v) { return floats(name, {v}, {}); }

  // A Cast of `x` to `to` named `name`; returns `name`.
  std::string cast(const std::string& x, const std::string& name, int to) {
    integer(node("Cast", name, {x}, {name}), "to", to);
    return name;
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
        // A fused residual is ONNX's Conv then Add (inputs: x, W, B; the residual is in[1]).
        const std::string residual = a.residual ? in[1] : "";
        if (a.residual) in.erase(in.begin() + 1);
        const std::string sum = pre_activation(a.activation, out);
        auto* n = node("Conv", op.name, in, {a.residual ? sum + "/conv" : sum});
        ints(n, "kernel_shape", {a.kernel.h, a.kernel.w});
        ints(n, "strides", {a.stride.h, a.stride.w});
        ints(n, "pads", {a.padding.top, a.padding.left, a.padding.bottom, a.padding.right});
        ints(n, "dilations", {a.dilation.h, a.dilation.w});
        integer(n, "group", a.groups);
        if (a.residual) node("Add", op.name + "/residual", {sum + "/conv", residual}, {sum});
        emit_activation(op, a.activation, out);
        return;
      }
      case OpKind::kConvTranspose2d: {
        // Weights back to ONNX's [in, out / groups, kh, kw].
        const auto& a = op.attrs_as<ConvTranspose2dAttrs>();
        const auto& w = weights_of(op);
        const int64_t in_per = a.in_channels / a.groups, out_per = a.out_channels / a.groups;
        const int64_t taps = a.kernel.h * a.kernel.w;
        std::vector<float> onnx_w(w.weight.size());
        for (int64_t g = 0; g < a.groups; ++g)
          for (int64_t o = 0; o < out_per; ++o)
            for (int64_t i = 0; i < in_per; ++i)
              for (int64_t t = 0; t < taps; ++t) {
                onnx_w[static_cast<size_t>(((g * in_per + i) * out_per + o) * taps + t)] =
                    w.weight[static_cast<size_t>(((g * out_per + o) * in_per + i) * taps + t)];
              }
        in.push_back(floats(op.name + "/W", onnx_w, {a.in_channels, out_per, a.kernel.h, a.kernel.w}));
        if (a.bias) in.push_back(floats(op.name + "/B", w.bias, {a.out_channels}));
        auto* n = node("ConvTranspose", op.name, in, {out});
        ints(n, "kernel_shape", {a.kernel.h, a.kernel.w});
        ints(n, "strides", {a.stride.h, a.stride.w});
        ints(n, "pads", {a.padding.top, a.padding.left, a.padding.bottom, a.padding.right});
        ints(n, "dilations", {a.dilation.h, a.dilation.w});
        ints(n, "output_padding", {a.output_padding.h, a.output_padding.w});
        integer(n, "group", a.groups);
        return;
      }
      case OpKind::kBatchNorm: {
        const auto& w = weights_of(op);
        const int64_t c = static_cast<int64_t>(w.gamma.size());
        for (auto [suffix, data] : {std::pair{"/scale", &w.gamma}, {"/B", &w.beta}, {"/mean", &w.mean}, {"/var", &w.var}}) {
          in.push_back(floats(op.name + suffix, *data, {c}));
        }
        const auto& a = op.attrs_as<BatchNormAttrs>();
        real(node("BatchNormalization", op.name, in, {pre_activation(a.activation, out)}), "epsilon",
             static_cast<float>(a.eps));
        emit_activation(op, a.activation, out);
        return;
      }
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
        if (a.reflect) {
          text(node("Pad", op.name, in, {out}), "mode", "reflect");
          return;
        }
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
        if (g_.value(op.inputs[0]).desc.shape.rank() > 2) {  // MatMul by Wᵀ, then the bias
          std::vector<float> wt(w.weight.size());
          for (int64_t o = 0; o < a.out_features; ++o)
            for (int64_t i = 0; i < a.in_features; ++i)
              wt[static_cast<size_t>(i * a.out_features + o)] = w.weight[static_cast<size_t>(o * a.in_features + i)];
          in.push_back(floats(op.name + "/Wt", wt, {a.in_features, a.out_features}));
          const std::string y = pre_activation(a.activation, out);
          node("MatMul", op.name, in, {a.bias ? op.name + "/product" : y});
          if (a.bias) node("Add", op.name + "/bias", {op.name + "/product", floats(op.name + "/B", w.bias, {a.out_features})}, {y});
          emit_activation(op, a.activation, out);
          return;
        }
        in.push_back(floats(op.name + "/W", w.weight, {a.out_features, a.in_features}));
        if (a.bias) in.push_back(floats(op.name + "/B", w.bias, {a.out_features}));
        integer(node("Gemm", op.name, in, {pre_activation(a.activation, out)}), "transB", 1);
        emit_activation(op, a.activation, out);
        return;
      }
      case OpKind::kSoftmax: {
        const auto& a = op.attrs_as<SoftmaxAttrs>();
        integer(node(a.hard ? "Hardmax" : a.log ? "LogSoftmax" : "Softmax", op.name, in, {out}), "axis", a.axis);
        return;
      }
      case OpKind::kScale:
        in.push_back(floats(op.name + "/factor", {static_cast<float>(op.attrs_as<ScaleAttrs>().factor)}, {}));
        node("Mul", op.name, in, {out});
        return;
      case OpKind::kHardSigmoid: {
        const auto& a = op.attrs_as<HardSigmoidAttrs>();
        auto* n = node("HardSigmoid", op.name, in, {out});
        real(n, "alpha", static_cast<float>(a.alpha));
        real(n, "beta", static_cast<float>(a.beta));
        return;
      }
      STAGECRAFT_PLAIN_ACTIVATION_KINDS:
        activation(op.name, activation_of_kind(op.kind), in[0], out);
        return;
      case OpKind::kReduceMean:  // axes an attribute until opset 18
      case OpKind::kReduceMax:
      case OpKind::kReduceMin:
      case OpKind::kReduceProd: {
        const char* type = op.kind == OpKind::kReduceMean  ? "ReduceMean"
                           : op.kind == OpKind::kReduceMax ? "ReduceMax"
                           : op.kind == OpKind::kReduceMin ? "ReduceMin"
                                                           : "ReduceProd";
        ints(node(type, op.name, in, {out}), "axes", op.attrs_as<ReduceAttrs>().axes);
        return;
      }
      case OpKind::kReduceSum:  // axes as an input since opset 13
        in.push_back(int64s(op.name + "/axes", op.attrs_as<ReduceAttrs>().axes));
        node("ReduceSum", op.name, in, {out});
        return;
      case OpKind::kSpaceToDepth:
        integer(node("SpaceToDepth", op.name, in, {out}), "blocksize", op.attrs_as<SpaceToDepthAttrs>().block);
        return;
      case OpKind::kLayerNorm: {  // over the last axis: channels-last around it for rank 4
        const auto& w = weights_of(op);
        const auto c = static_cast<int64_t>(w.gamma.size());
        const bool image = takes_layouts(g_.value(op.inputs[0]).desc);
        const std::string x = image ? op.name + "/channels_last" : in[0];
        const std::string y = image ? op.name + "/normalised" : out;
        if (image) ints(node("Transpose", op.name + "/to_nhwc", in, {x}), "perm", {0, 2, 3, 1});
        auto* n = node("LayerNormalization", op.name,
                       {x, floats(op.name + "/scale", w.gamma, {c}), floats(op.name + "/bias", w.beta, {c})}, {y});
        integer(n, "axis", -1);
        real(n, "epsilon", static_cast<float>(op.attrs_as<LayerNormAttrs>().eps));
        if (image) ints(node("Transpose", op.name + "/to_nchw", {y}, {out}), "perm", {0, 3, 1, 2});
        return;
      }
      case OpKind::kBinary: {
        const auto& a = op.attrs_as<BinaryAttrs>();
        // In BinaryOp's order (the list's length is checked against it).
        static constexpr const char* kTypes[] = {"Add",     "Sub",           "Mul", "Div", "Pow", "Max",
                                                 "Min",     "Mod",           "Equal", "Less", "LessOrEqual",
                                                 "Greater", "GreaterOrEqual", "And",  "Or",  "Xor"};
#define STAGECRAFT_X(value, name) +1
        static_assert(std::size(kTypes) == 0 STAGECRAFT_BINARY_OPS(STAGECRAFT_X));
#undef STAGECRAFT_X
        if (!a.constant.empty()) {
          const std::string c = floats(op.name + "/constant", weights_of(op).weight, a.constant);
          if (a.constant_first) in.insert(in.begin(), c);
          else in.push_back(c);
        }
        if (is_boolean(a.op)) {
          // ONNX's comparisons give, and its logical ops take, bool tensors: casts around them.
          if (a.op >= BinaryOp::kAnd) {
            for (size_t i = 0; i < in.size(); ++i) in[i] = cast(in[i], op.name + cat("/bool", i), onnx::TensorProto::BOOL);
          }
          node(kTypes[static_cast<int>(a.op)], op.name, in, {op.name + "/result"});
          cast(op.name + "/result", pre_activation(a.activation, out), onnx::TensorProto::FLOAT);
          emit_activation(op, a.activation, out);
          return;
        }
        auto* n = node(kTypes[static_cast<int>(a.op)], op.name, in, {pre_activation(a.activation, out)});
        if (a.op == BinaryOp::kMod) integer(n, "fmod", 1);  // C's fmod: the sign of the first operand
        emit_activation(op, a.activation, out);
        return;
      }
      case OpKind::kGlobalMaxPool:
        node("GlobalMaxPool", op.name, in, {out});
        return;
      case OpKind::kGridSample: {  // opset 16's names of the modes
        const auto& a = op.attrs_as<GridSampleAttrs>();
        onnx::NodeProto* n = node("GridSample", op.name, in, {out});
        const char* modes[] = {"nearest", "bilinear", "bicubic"};
        const char* paddings[] = {"zeros", "border", "reflection"};
        text(n, "mode", modes[a.mode]);
        text(n, "padding_mode", paddings[a.padding]);
        integer(n, "align_corners", a.align_corners ? 1 : 0);
        return;
      }
      case OpKind::kWhere: {  // Where(bool condition, x, y), constants as initializers
        const auto& a = op.attrs_as<WhereAttrs>();
        std::vector<std::string> operands;
        size_t next = 0;
        const bool constant[3] = {a.condition_constant, a.x_constant, a.y_constant};
        const std::vector<int64_t>* shapes[3] = {&a.condition_shape, &a.x_shape, &a.y_shape};
        const char* names[3] = {"/condition", "/x", "/y"};
        for (int i = 0; i < 3; ++i) {
          if (!constant[i]) {
            operands.push_back(in.at(next++));
            continue;
          }
          const auto& w = weights_of(op);
          operands.push_back(floats(op.name + names[i], i == 0 ? w.gamma : i == 1 ? w.weight : w.bias, *shapes[i]));
        }
        operands[0] = cast(operands[0], op.name + "/bool", onnx::TensorProto::BOOL);
        node("Where", op.name, operands, {out});
        return;
      }
      case OpKind::kLrn: {
        const auto& a = op.attrs_as<LrnAttrs>();
        auto* n = node("LRN", op.name, in, {out});
        integer(n, "size", a.size);
        real(n, "alpha", static_cast<float>(a.alpha));
        real(n, "beta", static_cast<float>(a.beta));
        real(n, "bias", static_cast<float>(a.bias));
        return;
      }
      case OpKind::kUnary: {  // the ONNX op of the function, with its parameters by their ONNX names
        const auto& a = op.attrs_as<UnaryAttrs>();
        // Opset 17 has neither Mish (18) nor Swish (24): x · tanh(softplus(x)), x · sigmoid(alpha x).
        if (a.fn == UnaryFn::kMish) {
          node("Softplus", op.name + "/softplus", in, {op.name + "/softplus"});
          node("Tanh", op.name + "/tanh", {op.name + "/softplus"},
               {op.name + "/tanh"});
          node("Mul", op.name, {in[0], op.name + "/tanh"}, {out});
          return;
        }
        if (a.fn == UnaryFn::kSwish) {
          node("Mul", op.name + "/scaled", {in[0], scalar(op.name + "/alpha", static_cast<float>(a.alpha))},
               {op.name + "/scaled"});
          node("Sigmoid", op.name + "/sigmoid", {op.name + "/scaled"}, {op.name + "/sigmoid"});
          node("Mul", op.name, {in[0], op.name + "/sigmoid"}, {out});
          return;
        }
        if (a.fn == UnaryFn::kNot || a.fn == UnaryFn::kIsNaN || a.fn == UnaryFn::kIsInf) {  // bool in ONNX
          const std::string x = a.fn == UnaryFn::kNot ? cast(in[0], op.name + "/bool", onnx::TensorProto::BOOL) : in[0];
          auto* n = node(std::string(onnx_op_type(a.fn)), op.name, {x}, {op.name + "/result"});
          if (a.fn == UnaryFn::kIsInf) {
            integer(n, "detect_negative", a.alpha != 0 ? 1 : 0);
            integer(n, "detect_positive", a.beta != 0 ? 1 : 0);
          }
          cast(op.name + "/result", out, onnx::TensorProto::FLOAT);
          return;
        }
        auto* n = node(std::string(onnx_op_type(a.fn)), op.name, in, {out});
        const auto alpha = static_cast<float>(a.alpha), beta = static_cast<float>(a.beta);
        switch (a.fn) {
          case UnaryFn::kElu:
          case UnaryFn::kCelu:
          case UnaryFn::kThresholdedRelu:
          case UnaryFn::kSwish:
            real(n, "alpha", alpha);
            break;
          case UnaryFn::kSelu:
            real(n, "alpha", alpha);
            real(n, "gamma", beta);
            break;
          case UnaryFn::kShrink:
            real(n, "lambd", alpha);
            real(n, "bias", beta);
            break;
          default:
            break;
        }
        return;
      }
      case OpKind::kLeakyRelu:
        real(node("LeakyRelu", op.name, in, {out}), "alpha",
             static_cast<float>(op.attrs_as<LeakyReluAttrs>().alpha));
        return;
      case OpKind::kClip: {
        const auto& a = op.attrs_as<ClipAttrs>();
        node("Clip", op.name, {in[0], scalar(op.name + "/min", static_cast<float>(a.min)),
                               scalar(op.name + "/max", static_cast<float>(a.max))}, {out});
        return;
      }
      case OpKind::kMatMul:
        node("MatMul", op.name, in, {out});
        return;
      case OpKind::kTranspose:
        ints(node("Transpose", op.name, in, {out}), "perm", op.attrs_as<TransposeAttrs>().perm);
        return;
      case OpKind::kNarrow: {
        const auto& a = op.attrs_as<NarrowAttrs>();
        in.push_back(int64s(op.name + "/starts", {a.begin}));
        in.push_back(int64s(op.name + "/ends", {a.end}));
        in.push_back(int64s(op.name + "/axes", {a.axis}));
        node("Slice", op.name, in, {out});
        return;
      }
      case OpKind::kConcatConstant: {  // the constant repeated for every sample
        const auto& a = op.attrs_as<ConcatConstantAttrs>();
        std::vector<int64_t> dims = g_.value(op.inputs[0]).desc.shape.dims();
        dims[static_cast<size_t>(a.axis)] = a.count;
        const std::vector<float>& one = weights_of(op).weight;
        std::vector<float> all;
        for (int64_t n = 0; n < dims[0]; ++n) all.insert(all.end(), one.begin(), one.end());
        const std::string c = floats(op.name + "/constant", all, dims);
        in.insert(a.before ? in.begin() : in.end(), c);
        integer(node("Concat", op.name, in, {out}), "axis", a.axis);
        return;
      }
      case OpKind::kReshape: {
        const Shape& s = g_.value(op.outputs[0]).desc.shape;
        in.push_back(int64s(op.name + "/shape", std::vector<int64_t>(s.dims().begin(), s.dims().end())));
        node("Reshape", op.name, in, {out});
        return;
      }
      case OpKind::kResize: {
        // Scales when float32 holds them exactly and they give back the size (in float, as ONNX
        // Runtime computes it), else sizes (the importer then takes size / input as the scale).
        const auto& a = op.attrs_as<ResizeAttrs>();
        const Shape& s = g_.value(op.inputs[0]).desc.shape;
        const auto scale_h = static_cast<float>(a.scale_h), scale_w = static_cast<float>(a.scale_w);
        const bool scales_fit = static_cast<double>(scale_h) == a.scale_h && static_cast<double>(scale_w) == a.scale_w &&
                                static_cast<int64_t>(std::floor(static_cast<float>(s[2]) * scale_h)) == a.size.h &&
                                static_cast<int64_t>(std::floor(static_cast<float>(s[3]) * scale_w)) == a.size.w;
        if (scales_fit) {
          in.insert(in.end(), {"", floats(op.name + "/scales", {1, 1, scale_h, scale_w}, {4})});
        } else {
          in.insert(in.end(), {"", "", int64s(op.name + "/sizes", {s[0], s[1], a.size.h, a.size.w})});
        }
        auto* n = node("Resize", op.name, in, {out});
        const bool interpolated = a.linear || a.cubic;
        text(n, "mode", a.linear ? "linear" : a.cubic ? "cubic" : "nearest");
        text(n, "coordinate_transformation_mode", a.align_corners ? "align_corners" : interpolated ? "half_pixel" : "asymmetric");
        if (!interpolated) text(n, "nearest_mode", "floor");
        return;
      }
      case OpKind::kChannelShuffle: {
        const Shape& s = g_.value(op.outputs[0]).desc.shape;
        const int64_t g = op.attrs_as<ChannelShuffleAttrs>().groups;
        if (in.size() > 1) {  // a shuffle of the concatenation of its inputs
          integer(node("Concat", op.name + "/concat", in, {op.name + "/concatenated"}), "axis", 1);
          in = {op.name + "/concatenated"};
        }
        node("Reshape", op.name + "/view", {in[0], int64s(op.name + "/view_shape", {s[0], g, s[1] / g, s[2], s[3]})},
             {op.name + "/grouped"});
        ints(node("Transpose", op.name + "/transpose", {op.name + "/grouped"}, {op.name + "/transposed"}),
             "perm", {0, 2, 1, 3, 4});
        node("Reshape", op.name, {op.name + "/transposed", int64s(op.name + "/shape", {s[0], s[1], s[2], s[3]})},
             {out});
        return;
      }
    }
  }

  const Graph& g_;
  const WeightStore& w_;
  onnx::ModelProto model_;
  onnx::GraphProto* graph_ = nullptr;
  std::set<std::string> clip_;
};

}  // namespace

std::string export_onnx_bytes(const Graph& graph, const WeightStore& weights) {
  return Exporter(graph, weights).run();
}

void export_onnx(const Graph& graph, const WeightStore& weights, const std::string& path) {
  write_text_file(path, export_onnx_bytes(graph, weights));
}

}  // namespace stagecraft::graph
