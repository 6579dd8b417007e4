// The evaluation of a data-dependent tail (onnx_tail.h): its nodes in order, each by the
// constant folder on the values of this run.
#include "frontend/onnx/onnx_tail.h"

#include <map>
#include <set>
#include <stdexcept>

#include "common/strings.h"
#include "frontend/onnx/onnx_tail_impl.h"
#include "graph/errors.h"

namespace stagecraft::graph {

using onnx_import::ConstTensor;
using onnx_import::ElemKind;
using onnx_import::FoldInput;

OnnxTail::OnnxTail(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

const std::vector<DeclaredOutput>& OnnxTail::declared() const { return impl_->declared; }

size_t OnnxTail::size() const { return impl_->nodes.size(); }

std::string OnnxTail::summary() const {
  std::vector<std::string> types;
  std::set<std::string> seen;
  for (const auto& node : impl_->nodes) {
    if (seen.insert(node.op_type()).second) types.push_back(node.op_type());
  }
  return cat(impl_->nodes.size(), " ONNX node", impl_->nodes.size() == 1 ? "" : "s",
             " on the host after the plan (", join(types, ", "), ")");
}

std::vector<ModelOutput> OnnxTail::outputs(const std::vector<std::vector<int64_t>>& dims,
                                           const std::vector<std::span<const float>>& values,
                                           std::vector<std::vector<float>>* owned) const {
  const Impl& t = *impl_;
  // The boundary's doubles go in buffers kept from this thread's last call: fresh ones each run
  // cost their page faults (1.5 ms of a segmentation head's 4.7).
  thread_local std::vector<std::vector<double>> spare;
  std::map<std::string, ConstTensor> computed;
  for (const auto& b : t.boundary) {
    if (b.graph_output >= values.size() || b.graph_output >= dims.size()) {
      throw GraphError(cat(t.source, ": the tail reads graph output ", b.graph_output, "; the run gave ",
                           values.size()));
    }
    const std::span<const float> v = values[b.graph_output];
    ConstTensor c;
    c.kind = onnx_import::kind_of(b.onnx_type);
    c.onnx_type = b.onnx_type;
    c.dims = dims[b.graph_output];
    if (!spare.empty()) {
      c.values = std::move(spare.back());
      spare.pop_back();
    }
    c.values.assign(v.begin(), v.end());
    computed[b.name] = std::move(c);
  }
  const auto find = [&](const std::string& name) -> const ConstTensor* {
    if (auto c = computed.find(name); c != computed.end()) return &c->second;
    if (auto k = t.constants.find(name); k != t.constants.end()) return &k->second;
    return nullptr;
  };
  for (const onnx::NodeProto& node : t.nodes) {
    // The message prefix, made only for an error (this loop runs after every run).
    const auto where = [&] {
      return cat(t.source, ": node '", onnx_import::node_name(node), "' (", node.op_type(),
                 "), evaluated on the host after the plan: ");
    };
    std::vector<FoldInput> in;
    for (const std::string& name : node.input()) {
      FoldInput f;
      if (!name.empty()) {
        f.constant = find(name);
        if (!f.constant) throw GraphError(cat(where(), "reads '", name, "', which the tail does not hold"));
      }
      in.push_back(f);
    }
    std::optional<std::vector<ConstTensor>> out;
    try {
      out = onnx_import::fold(node, in, t.opset);
    } catch (const std::runtime_error& e) {
      throw ShapeError(cat(where(), e.what()));
    }
    if (!out) throw FormatError(cat(where(), "the host evaluation has no rule for ", node.op_type()));
    for (int i = 0; i < node.output_size() && i < static_cast<int>(out->size()); ++i) {
      ConstTensor& r = (*out)[static_cast<size_t>(i)];
      if (r.values.empty() && !r.f32.empty()) r.decode();
      computed[node.output(i)] = std::move(r);
    }
  }
  // A graph output given once as a model output moves out of `owned` (after the boundary above
  // read it); one given twice is copied.
  std::map<size_t, int> uses;
  for (const auto& o : t.outputs) {
    if (o.graph_output) ++uses[*o.graph_output];
  }
  std::vector<ModelOutput> result;
  for (const auto& o : t.outputs) {
    ModelOutput m;
    m.name = o.name;
    if (o.graph_output) {
      const size_t i = *o.graph_output;
      m.dims = dims.at(i);
      if (owned && i < owned->size() && uses[i] == 1 && (*owned)[i].size() == values.at(i).size()) {
        m.data = std::move((*owned)[i]);
      } else {
        m.data.assign(values.at(i).begin(), values.at(i).end());
      }
    } else {
      const ConstTensor* c = find(o.name);
      if (!c) throw GraphError(cat(t.source, ": the tail does not compute the output '", o.name, "'"));
      m.dims = c->dims;
      m.data = c->floats();
    }
    result.push_back(std::move(m));
  }
  for (const auto& b : t.boundary) {
    if (auto c = computed.find(b.name); c != computed.end() && c->second.values.capacity() > 0) {
      spare.push_back(std::move(c->second.values));
    }
  }
  return result;
}

}  // namespace stagecraft::graph
