// The ONNX importer's data-dependent tail (onnx_tail.h): a node whose output shape depends on the
// values it reads (NonZero, NonMaxSuppression), and every node reading what the tail computes, is
// kept as an ONNX node; the graph values the tail reads become graph outputs after the model's
// own, and the tail is checked once on zeros at load.
#include <algorithm>
#include <span>

#include "common/strings.h"
#include "frontend/onnx/onnx_importer.h"
#include "graph/errors.h"

namespace stagecraft::graph::onnx_import {

bool Importer::reads_tail(const onnx::NodeProto& node) const {
  if (tail_values_.empty()) return false;
  return std::any_of(node.input().begin(), node.input().end(),
                     [&](const std::string& name) { return tail_values_.count(name) > 0; });
}

void Importer::started_tail() {
  if (tail_) return;
  tail_ = std::make_shared<OnnxTail::Impl>();
  tail_->source = source_;
  tail_->opset = opset_;
}

void Importer::to_tail(const onnx::NodeProto& node) {
  started_tail();
  for (const std::string& name : node.input()) {
    if (name.empty() || tail_values_.count(name) || boundary_values_.count(name) || tail_->constants.count(name)) {
      continue;
    }
    if (constants_.count(name)) {
      keep_constant(name);
      continue;
    }
    // A graph value (or a view of one): its row-major tensor becomes a graph output.
    const ValueId v = values_.count(name) ? values_.at(name) : row_major_named(node, name);
    boundary_values_[name] = v;
    tail_->boundary.push_back({name, 0, is_integer(name)   ? onnx::TensorProto::INT64
                                        : is_boolean(name) ? onnx::TensorProto::BOOL
                                                           : onnx::TensorProto::FLOAT});
  }
  tail_->nodes.push_back(node);
  for (const std::string& out : node.output()) {
    if (!out.empty()) tail_values_.insert(out);
  }
}

void Importer::keep_constant(const std::string& name) {
  ConstTensor copy = constants_.at(name);
  copy.decode();
  copy.f32.clear();
  tail_->constants[name] = std::move(copy);
}

void Importer::constant_output(const std::string& name) {
  started_tail();
  keep_constant(name);
  tail_values_.insert(name);
}

void Importer::finish_tail(const onnx::GraphProto& g) {
  std::vector<size_t> index_of_output;  // graph output index of each model output (static ones)
  std::map<ValueId, size_t> output_index;
  for (size_t i = 0; i < graph_.outputs().size(); ++i) output_index.emplace(graph_.outputs()[i], i);
  for (auto& b : tail_->boundary) {
    const ValueId v = boundary_values_.at(b.name);
    if (!output_index.count(v)) {
      graph_.add_output(v);
      output_index.emplace(v, graph_.outputs().size() - 1);
    }
    b.graph_output = output_index.at(v);
  }
  for (const auto& out : g.output()) {
    DeclaredOutput d;
    d.name = out.name();
    d.onnx_type = out.type().tensor_type().elem_type();
    for (const auto& dim : out.type().tensor_type().shape().dim()) {
      d.dims.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
    }
    tail_->declared.push_back(d);
    OnnxTail::Impl::Output o{out.name(), std::nullopt};
    if (!tail_values_.count(out.name())) o.graph_output = output_index.at(values_.at(out.name()));
    tail_->outputs.push_back(o);
  }
  // One evaluation on zeros: a node the host evaluation has no rule for is refused now. Errors of
  // the data (a Reshape that does not fit zero detections) are left to the runs.
  if (tail_->nodes.empty()) return;  // constant outputs only
  std::vector<std::vector<int64_t>> dims;
  std::vector<std::vector<float>> zeros;
  for (ValueId v : graph_.outputs()) {
    dims.push_back(dims_of(shape(v)));
    zeros.emplace_back(static_cast<size_t>(shape(v).numel()), 0.0f);
  }
  std::vector<std::span<const float>> spans(zeros.begin(), zeros.end());
  try {
    (void)OnnxTail(tail_).outputs(dims, spans);
  } catch (const ShapeError&) {
    // depends on the data: checked at each run
  }
}

}  // namespace stagecraft::graph::onnx_import
