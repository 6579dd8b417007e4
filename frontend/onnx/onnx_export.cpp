// ONNX export: a graph and its weights as an opset-17 model checked by the ONNX checker. Fused
// activations become their own nodes after the op; binary ops with a constant get it as an
// initializer; a channel shuffle becomes Reshape -> Transpose -> Reshape (what PyTorch writes).
// This file: the model, its helpers and the dispatch by op kind (onnx_exporter.h lists the rest).
#include <onnx/checker.h>

#include <map>

#include "common/files.h"
#include "common/strings.h"
#include "graph/activation_kinds.h"
#include "graph/errors.h"
#include "frontend/onnx/onnx_exporter.h"

namespace stagecraft::graph {

namespace onnx_export {

namespace {

constexpr int64_t kExportIrVersion = 8;
constexpr float kRelu6Max = 6.0f;

}  // namespace

std::string Exporter::run() {
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

void Exporter::value_info(onnx::ValueInfoProto* info, ValueId v) {
  info->set_name(g_.value(v).name);
  auto* t = info->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : g_.value(v).desc.shape.dims()) t->mutable_shape()->add_dim()->set_dim_value(d);
}

std::string Exporter::floats(const std::string& name, const std::vector<float>& data, std::vector<int64_t> dims) {
  auto* t = graph_->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float)));
  return name;
}

std::string Exporter::int64s(const std::string& name, const std::vector<int64_t>& data) {
  auto* t = graph_->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(data.size()));
  for (int64_t v : data) t->add_int64_data(v);
  return name;
}

onnx::NodeProto* Exporter::node(const std::string& type, const std::string& name, const Names& inputs,
                                const Names& outputs) {
  auto* n = graph_->add_node();
  n->set_op_type(type);
  n->set_name(name);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return n;
}

void Exporter::ints(onnx::NodeProto* n, const char* name, std::vector<int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

void Exporter::integer(onnx::NodeProto* n, const char* name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void Exporter::text(onnx::NodeProto* n, const char* name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

void Exporter::real(onnx::NodeProto* n, const char* name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

const OpWeights& Exporter::weights_of(const Op& op) {
  const OpWeights* w = w_.find(op.name);
  if (!w) throw FormatError(cat("cannot export op '", op.name, "': it has no weights"));
  return *w;
}

std::string Exporter::pre_activation(Activation act, const std::string& out) {
  return act == Activation::kNone ? out : out + "/pre_activation";
}

void Exporter::emit_activation(const Op& op, Activation act, const std::string& out) {
  if (act == Activation::kNone) return;
  activation(op.name + "/" + std::string(to_string(act)), act, pre_activation(act, out), out);
}

void Exporter::activation(const std::string& name, Activation act, const std::string& in, const std::string& out) {
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

std::string Exporter::scalar(const std::string& name, float v) { return floats(name, {v}, {}); }

std::string Exporter::cast(const std::string& x, const std::string& name, int to) {
  integer(node("Cast", name, {x}, {name}), "to", to);
  return name;
}

std::string Exporter::clip_bound(float v) {
  const std::string name = v == 0 ? "stagecraft/clip_min" : "stagecraft/clip_max";
  if (!clip_.count(name)) {
    floats(name, {v}, {});
    clip_.insert(name);
  }
  return name;
}

void Exporter::export_op(const Op& op) {
  Names in;
  for (ValueId v : op.inputs) in.push_back(g_.value(v).name);
  const std::string out = g_.value(op.outputs[0]).name;
  switch (op.kind) {
    case OpKind::kConv2d:
      return export_conv(op, std::move(in), out);
    case OpKind::kConvTranspose2d:
      return export_conv_transpose(op, std::move(in), out);
    case OpKind::kBatchNorm:
      return export_batch_norm(op, std::move(in), out);
    case OpKind::kLrn:
      return export_lrn(op, in, out);
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
      return export_pool(op, in, out);
    case OpKind::kGlobalAvgPool:
      node("GlobalAveragePool", op.name, in, {out});
      return;
    case OpKind::kGlobalMaxPool:
      node("GlobalMaxPool", op.name, in, {out});
      return;
    case OpKind::kResize:
      return export_resize(op, std::move(in), out);
    case OpKind::kPad:
      return export_pad(op, std::move(in), out);
    case OpKind::kSpaceToDepth:
      integer(node("SpaceToDepth", op.name, in, {out}), "blocksize", op.attrs_as<SpaceToDepthAttrs>().block);
      return;
    case OpKind::kConcat:
      integer(node("Concat", op.name, in, {out}), "axis", 1);
      return;
    case OpKind::kSplit:
      return export_split(op, std::move(in));
    case OpKind::kSlice:
      return export_slice(op, std::move(in), out);
    case OpKind::kChannelShuffle:
      return export_channel_shuffle(op, std::move(in), out);
    case OpKind::kFlatten:
      integer(node("Flatten", op.name, in, {out}), "axis", 1);
      return;
    case OpKind::kReshape:
      return export_reshape(op, std::move(in), out);
    case OpKind::kIdentity:
      node("Identity", op.name, in, {out});
      return;
    STAGECRAFT_PLAIN_ACTIVATION_KINDS:
      activation(op.name, activation_of_kind(op.kind), in[0], out);
      return;
    case OpKind::kLeakyRelu:
      real(node("LeakyRelu", op.name, in, {out}), "alpha",
           static_cast<float>(op.attrs_as<LeakyReluAttrs>().alpha));
      return;
    case OpKind::kScale:
      in.push_back(floats(op.name + "/factor", {static_cast<float>(op.attrs_as<ScaleAttrs>().factor)}, {}));
      node("Mul", op.name, in, {out});
      return;
    case OpKind::kHardSigmoid:
      return export_hard_sigmoid(op, in, out);
    case OpKind::kClip:
      return export_clip(op, in, out);
    case OpKind::kUnary:
      return export_unary(op, in, out);
    case OpKind::kAdd:
      return export_add(op, in, out);
    case OpKind::kBinary:
      return export_binary(op, std::move(in), out);
    case OpKind::kWhere:
      return export_where(op, in, out);
    case OpKind::kLinear:
      return export_linear(op, std::move(in), out);
    case OpKind::kSoftmax:
      return export_softmax(op, in, out);
    case OpKind::kLayerNorm:
      return export_layer_norm(op, in, out);
    case OpKind::kReduceMean:
    case OpKind::kReduceMax:
    case OpKind::kReduceMin:
    case OpKind::kReduceProd:
    case OpKind::kReduceSum:
      return export_reduce(op, std::move(in), out);
    case OpKind::kMatMul:
      node("MatMul", op.name, in, {out});
      return;
    case OpKind::kTranspose:
      ints(node("Transpose", op.name, in, {out}), "perm", op.attrs_as<TransposeAttrs>().perm);
      return;
    case OpKind::kNarrow:
      return export_narrow(op, std::move(in), out);
    case OpKind::kConcatConstant:
      return export_concat_constant(op, std::move(in), out);
    case OpKind::kGridSample:
      return export_grid_sample(op, in, out);
    case OpKind::kPoolNd:
      return export_pool_nd(op, in, out);
    case OpKind::kTopK:
      return export_top_k(op, std::move(in));
    case OpKind::kGatherElements:
      return export_gather_elements(op, std::move(in), out);
    case OpKind::kResizeNd:
      return export_resize_nd(op, in, out);
  }
}

}  // namespace onnx_export

std::string export_onnx_bytes(const Graph& graph, const WeightStore& weights) {
  return onnx_export::Exporter(graph, weights).run();
}

void export_onnx(const Graph& graph, const WeightStore& weights, const std::string& path) {
  write_text_file(path, export_onnx_bytes(graph, weights));
}

}  // namespace stagecraft::graph
