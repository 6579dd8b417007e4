// The ONNX importer's walk over the model: inputs, constants, the nodes in order (each to
// import_node: onnx_import_dispatch.cpp), outputs; and the lookups and helpers translators share.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <set>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include "common/files.h"
#include "common/strings.h"
#include "graph/errors.h"
#include "frontend/onnx/onnx_importer.h"
#include "frontend/onnx/onnx_patterns.h"
#include "frontend/onnx/onnx_versions.h"

namespace stagecraft::graph {
namespace onnx_import {

namespace {

constexpr int kMaxRank = 8;  // of a graph input (oneDNN's DNNL_MAX_NDIMS is 12)

std::string sanitize(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    if (c == ':' || c == '#' || c == ' ' || c == '\t' || c == '\n') c = '_';
  }
  return out;
}

}  // namespace

std::string node_name(const onnx::NodeProto& node) {
  return node.name().empty() ? (node.output_size() > 0 ? node.output(0) : node.op_type()) : node.name();
}

Importer::Importer(std::string source, const OnnxImportOptions& options, std::string model_dir)
    : source_(std::move(source)), options_(options), external_(std::move(model_dir)) {}

OnnxModel Importer::run(const std::string& bytes) {
  onnx::ModelProto model;
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !model.ParseFromString(bytes)) {
    throw FormatError(cat(source_, ": not an ONNX model (the protobuf does not parse)"));
  }
  return run(model);
}

OnnxModel Importer::run(const onnx::ModelProto& model) {
  opset_ = 0;
  for (const auto& op : model.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") opset_ = op.version();
  }
  if (opset_ < kOldestOpset || opset_ > newest_opset()) {
    throw FormatError(cat(source_, ": opset ", opset_, " is not supported (supported: ", kOldestOpset,
                          " to ", newest_opset(), ")"));
  }
  const onnx::GraphProto& g = model.graph();
  // Each node by the version of its op the model's opset selects (before patterns fuse any).
  for (const auto& node : g.node()) {
    if (!node.domain().empty() && node.domain() != "ai.onnx") continue;  // refused in the walk
    if (const std::string problem = version_problem(node.op_type(), opset_); !problem.empty()) {
      fail(node, problem);
    }
  }
  graph_ = Graph(g.name().empty() ? "onnx_model" : sanitize(g.name()));
  for (const auto& init : g.initializer()) {
    std::string why;
    auto t = from_proto(init, &why, &external_);
    if (!t) throw FormatError(cat(source_, ": initializer '", init.name(), "': ", why));
    constants_[init.name()] = std::move(*t);
  }
  // Patterns of several nodes for one operation become that operation's node.
  std::vector<std::unique_ptr<onnx::NodeProto>> fused;
  const std::vector<const onnx::NodeProto*> nodes = fuse_patterns(g, fused);
  for (const onnx::NodeProto* node : nodes) {
    for (const auto& in : node->input()) {
      reader_kinds_[in].insert(node->op_type());
      reader_nodes_[in].push_back(node);
      ++readers_[in];
    }
    for (const std::string& in : outer_reads(*node)) {
      reader_kinds_[in].insert(node->op_type());
      reader_nodes_[in].push_back(node);
      ++readers_[in];
    }
    for (const auto& out : node->output()) {
      produced_.insert(out);
      producers_[out] = node;
    }
  }
  for (const auto& out : g.output()) graph_outputs_.insert(out.name());
  add_inputs(g);
  for (const onnx::NodeProto* node : nodes) import_node(*node);
  for (const auto& out : g.output()) {
    if (tail_values_.count(out.name())) continue;  // the tail's (finish_tail)
    if (!values_.count(out.name()) && !pending_views_.count(out.name()) && constants_.count(out.name()) &&
        !graph_inputs_.empty()) {
      constant_output(out.name());  // given by the tail (an empty state, a constant beside outputs)
      continue;
    }
    if (!values_.count(out.name()) && pending_views_.count(out.name())) {
      // A view as the model's output (a reshape last): its tensor in that shape.
      onnx::NodeProto reader;
      reader.set_name(cat("output '", out.name(), "'"));
      reader.set_op_type("Output");
      values_[out.name()] = row_major_named(reader, out.name());
    }
    auto it = values_.find(out.name());
    if (it == values_.end()) {
      const bool constant = constants_.count(out.name()) > 0;
      throw FormatError(cat(source_, ": graph output '", out.name(), "' ",
                            constant ? "is a constant (it does not depend on the input)"
                                     : "is not produced by any node the importer could translate"));
    }
    graph_.add_output(it->second);
  }
  if (graph_.outputs().empty() && !tail_values_.empty() && boundary_values_.empty()) {
    throw FormatError(cat(source_, ": every output is a constant (none depends on the input)"));
  }
  const bool tail_used = std::any_of(g.output().begin(), g.output().end(),
                                     [&](const auto& out) { return tail_values_.count(out.name()) > 0; });
  if (tail_used) finish_tail(g);
  if (graph_.outputs().empty()) throw FormatError(cat(source_, ": the model has no outputs"));
  graph_ = merge_duplicate_ops(graph_, weights_);  // copies of a layer with equal weights, computed once
  return OnnxModel{std::move(graph_), std::move(weights_), opset_,
                   tail_used ? std::make_shared<const OnnxTail>(tail_) : nullptr};
}

void Importer::fail(const onnx::NodeProto& node, const std::string& what) const {
  throw FormatError(cat(source_, ": node '", node_name(node), "' (", node.op_type(), "): ", what));
}

void Importer::fail_not_constant(const onnx::NodeProto& node, int slot, const std::string& what) const {
  // The graph inputs the tensor is computed from: a walk back over its producers.
  std::set<std::string> inputs;
  std::set<std::string> seen;
  std::vector<std::string> todo;
  if (has_input(node, slot)) todo.push_back(node.input(slot));
  while (!todo.empty()) {
    const std::string name = todo.back();
    todo.pop_back();
    if (name.empty() || !seen.insert(name).second) continue;
    if (graph_inputs_.count(name)) inputs.insert(name);
    if (auto p = producers_.find(name); p != producers_.end()) {
      for (const auto& in : p->second->input()) todo.push_back(in);
    }
  }
  if (inputs.empty()) fail(node, what);
  const std::vector<std::string> names(inputs.begin(), inputs.end());
  throw ConstantInputError(
      cat(source_, ": node '", node_name(node), "' (", node.op_type(), "): ", what, ", and it is computed from graph ",
          names.size() == 1 ? "input '" : "inputs '", join(names, "', '"),
          "': bind their values at load (constant_inputs) to plan for those values"),
      names);
}

void Importer::add_inputs(const onnx::GraphProto& g) {
  size_t position = 0;
  for (const auto& input : g.input()) {
    if (constants_.count(input.name())) continue;  // an initializer listed as input
    const size_t index = position++;
    if (auto bound = options_.constant_inputs.find(input.name()); bound != options_.constant_inputs.end()) {
      // A value fixed at load: a constant, as if it were an initializer.
      const auto& v = bound->second;
      if (product(v.dims, 0, v.dims.size()) != static_cast<int64_t>(v.data.size())) {
        throw FormatError(cat(source_, ": the value bound to input '", input.name(), "' has ", v.data.size(),
                              " elements, its shape [", join(v.dims, ", "), "] has ", product(v.dims, 0, v.dims.size())));
      }
      constants_[input.name()] = ConstTensor::of_floats(v.data, v.dims);
      continue;
    }
    graph_inputs_.insert(input.name());
    const std::vector<int64_t>* given = index < options_.input_shapes.size() && !options_.input_shapes[index].empty()
                                            ? &options_.input_shapes[index] : nullptr;
    const auto& type = input.type().tensor_type();
    if (type.elem_type() != onnx::TensorProto::FLOAT) {
      throw FormatError(cat(source_, ": input '", input.name(), "' is not float32 (elem_type ",
                            type.elem_type(), ")"));
    }
    const int rank = type.shape().dim_size();
    if (rank == 0) {
      throw FormatError(cat(source_, ": input '", input.name(), "' is a scalar (rank 0): graph "
                            "inputs of rank 1 to ", kMaxRank, " are supported"));
    }
    if (rank > kMaxRank) {
      throw FormatError(cat(source_, ": input '", input.name(), "' has rank ", rank,
                            " (supported: 1 to ", kMaxRank, ")"));
    }
    if (given && static_cast<int>(given->size()) != rank) {
      throw FormatError(cat(source_, ": input '", input.name(), "' has rank ", rank, "; the given shape [",
                            join(*given, ", "), "] has rank ", given->size()));
    }
    std::vector<int64_t> dims;
    for (int i = 0; i < rank; ++i) {
      const auto& d = type.shape().dim(i);
      const bool fixed = d.has_dim_value() && d.dim_value() > 0;
      if (i == 0 && options_.batch > 0) {
        dims.push_back(options_.batch);
      } else if (rank == 4 && i >= 2 && options_.input_size > 0) {
        dims.push_back(options_.input_size);
      } else if (given && (i == 0 || !fixed)) {
        if ((*given)[static_cast<size_t>(i)] < 1) {
          throw FormatError(cat(source_, ": input '", input.name(), "': the given shape [", join(*given, ", "),
                                "] has dimension ", i, " < 1"));
        }
        dims.push_back((*given)[static_cast<size_t>(i)]);
      } else if (given && (*given)[static_cast<size_t>(i)] != d.dim_value()) {
        throw FormatError(cat(source_, ": input '", input.name(), "' has dimension ", i, " = ", d.dim_value(),
                              " in the model; the given shape [", join(*given, ", "), "] says ",
                              (*given)[static_cast<size_t>(i)]));
      } else if (fixed) {
        dims.push_back(d.dim_value());
      } else if (i == 0) {
        throw FormatError(cat(source_, ": input '", input.name(), "' has a symbolic batch "
                              "dimension '", d.dim_param(), "': give the batch size (--batch N)"));
      } else if (rank == 4 && i >= 2) {
        throw FormatError(cat(source_, ": input '", input.name(), "' has a symbolic spatial "
                              "dimension '", d.dim_param(), "': give the input size (--input-size H)"));
      } else {
        throw FormatError(cat(source_, ": input '", input.name(), "' has a dynamic dimension ", i,
                              " ('", d.dim_param(), "'): only the batch and H, W may be symbolic"));
      }
    }
    values_[input.name()] = graph_.add_input(unique(sanitize(input.name())), TensorDesc{Shape(dims), DataType::kF32, default_layout(dims.size()).value_or(Layout::kRowMajor)});
  }
}

std::string Importer::unique(const std::string& base) {
  std::string name = base.empty() ? "op" : base;
  for (int i = 2; used_.count(name) || graph_.find_value(name) || graph_.find_op(name); ++i) {
    name = cat(base, "_", i);
  }
  used_.insert(name);
  return name;
}

void Importer::constant_node(const onnx::NodeProto& node) {
  std::string why;
  std::optional<ConstTensor> t;
  if (const auto* a = attribute(node, "value"); a && a->has_t()) {
    t = from_proto(a->t(), &why, &external_);
  } else if (const auto* f = attribute(node, "value_float")) {
    t = ConstTensor::of_floats({f->f()}, {});
  } else if (const auto* fs = attribute(node, "value_floats")) {
    t = ConstTensor::of_floats(std::vector<float>(fs->floats().begin(), fs->floats().end()),
                               {fs->floats_size()});
  } else if (const auto* i = attribute(node, "value_int")) {
    t = ConstTensor::of_ints({i->i()}, {});
  } else if (const auto* is = attribute(node, "value_ints")) {
    t = ConstTensor::of_ints(std::vector<int64_t>(is->ints().begin(), is->ints().end()),
                             {is->ints_size()});
  } else {
    why = "only tensor, float(s) and int(s) values are supported";
  }
  if (!t) fail(node, why);
  constants_[node.output(0)] = std::move(*t);
}

std::vector<FoldInput> Importer::fold_inputs(const onnx::NodeProto& node) {
  std::vector<FoldInput> inputs;
  for (const auto& name : node.input()) {
    FoldInput in;
    if (auto c = constants_.find(name); c != constants_.end()) {
      in.constant = &c->second;
    } else if (auto v = values_.find(name); v != values_.end()) {
      in.shape = std::vector<int64_t>(graph_.value(v->second).desc.shape.dims().begin(),
                                      graph_.value(v->second).desc.shape.dims().end());
    } else if (auto s = pending_views_.find(name); s != pending_views_.end()) {
      in.shape = s->second.shape;
    } else if (auto e = empty_values_.find(name); e != empty_values_.end()) {
      in.shape = e->second;
    } else if (auto p = pending_pads_.find(name); p != pending_pads_.end()) {
      const Shape& x = graph_.value(p->second.input).desc.shape;
      const Pads& q = p->second.pads;
      in.shape = std::vector<int64_t>{x[0], x[1], x[2] + q.top + q.bottom, x[3] + q.left + q.right};
    } else if (!name.empty()) {
      fail(node, unknown_input(name));
    }
    inputs.push_back(std::move(in));
  }
  // A node whose inputs are all constants may be folded: its large float constants are decoded
  // to doubles for it (kept as floats otherwise).
  const bool all_constant = std::all_of(inputs.begin(), inputs.end(),
                                        [](const FoldInput& in) { return in.constant != nullptr; });
  if (all_constant) {
    for (const auto& name : node.input()) {
      if (auto c = constants_.find(name); c != constants_.end()) c->second.decode();
    }
  }
  return inputs;
}

bool Importer::has_input(const onnx::NodeProto& node, int slot) const {
  return slot < node.input_size() && !node.input(slot).empty();
}

const ConstTensor* Importer::constant(const onnx::NodeProto& node, int slot) const {
  if (!has_input(node, slot)) return nullptr;
  auto it = constants_.find(node.input(slot));
  return it == constants_.end() ? nullptr : &it->second;
}

std::vector<int64_t> Importer::constant_ints(const onnx::NodeProto& node, int slot,
                                             const char* what) const {
  const ConstTensor* c = constant(node, slot);
  if (!c) fail_not_constant(node, slot, cat(what, " (input ", slot, ") must be a constant"));
  return c->ints();
}

std::vector<float> Importer::take_floats(const onnx::NodeProto& node, int slot) {
  const ConstTensor* c = constant(node, slot);
  if (!c) fail_not_constant(node, slot, cat("input ", slot, " must be a constant"));
  const std::string& name = node.input(slot);
  if (c->f32.empty() || readers_[name] != 1) return c->floats();
  // Read by this node alone: its elements move into the op's weights instead of being copied.
  return std::move(constants_.at(name).f32);
}

std::vector<float> Importer::constant_floats(const onnx::NodeProto& node, int slot,
                                             const char* what) const {
  const ConstTensor* c = constant(node, slot);
  if (!c) fail_not_constant(node, slot, cat(what, " (input ", slot, ") must be a constant"));
  return c->floats();
}

std::optional<float> Importer::constant_scalar(const onnx::NodeProto& node, int slot) const {
  if (!has_input(node, slot)) return std::nullopt;
  const auto v = constant_floats(node, slot, "the value");
  if (v.size() != 1) fail(node, cat("input ", slot, " must be a scalar"));
  return v[0];
}

std::vector<int64_t> Importer::dims_at(const onnx::NodeProto& node, int slot) const {
  if (const ConstTensor* c = constant(node, slot)) return c->dims;
  if (has_input(node, slot)) {
    if (auto v = pending_views_.find(node.input(slot)); v != pending_views_.end()) return v->second.shape;
  }
  return dims_of(shape(input(node, slot)));
}

ValueId Importer::input(const onnx::NodeProto& node, int slot) const {
  if (!has_input(node, slot)) fail(node, cat("input ", slot, " is missing"));
  const std::string& name = node.input(slot);
  if (auto it = values_.find(name); it != values_.end()) return it->second;
  if (constants_.count(name)) {
    fail(node, cat("input '", name, "' is a constant where a tensor is expected (unsupported)"));
  }
  if (empty_values_.count(name)) {
    fail(node, cat("reads '", name, "', an empty slice (supported only as a part of a concatenation)"));
  }
  if (auto v = pending_views_.find(name); v != pending_views_.end()) {
    fail(node, cat("reads '", name, "' of shape [", join(v->second.shape, ", "), "]: tensors of rank ",
                   v->second.shape.size(), " are supported only as views reshaped back to rank 2 "
                   "or 4, or in a channel shuffle (Reshape, Transpose(0, 2, 1, 3, 4), Reshape)"));
  }
  if (pending_pads_.count(name)) {
    fail(node, cat("reads the padded '", name, "', whose padding could only be folded into "
                   "convolutions or max pools"));
  }
  fail(node, unknown_input(name));
}

std::string Importer::unknown_input(const std::string& name) const {
  if (produced_.count(name)) {
    return cat("reads '", name, "', which no earlier node produces (a later one does: the graph is "
               "not sorted or has a cycle)");
  }
  return cat("reads '", name, "', which is neither a graph input, an initializer nor the output of "
             "a node (a missing initializer?)");
}

Shape Importer::shape(ValueId v) const { return graph_.value(v).desc.shape; }

void Importer::define(const onnx::NodeProto& node, int slot, ValueId value) {
  if (slot < node.output_size()) values_[node.output(slot)] = value;
}

ValueId Importer::add(const onnx::NodeProto& node, OpKind kind, OpAttrs attrs,
                      std::vector<ValueId> inputs) {
  const std::string base = sanitize(node_name(node));
  try {
    const OpId id = graph_.add_op(unique(base), kind, std::move(attrs), std::move(inputs));
    last_op_ = id;
    return graph_.op(id).outputs[0];
  } catch (Error& e) {
    e.prepend(cat(source_, ": node '", node_name(node), "' (", node.op_type(), "): "));
    throw;
  }
}

ValueId Importer::add_weighted(const onnx::NodeProto& node, OpKind kind, OpAttrs attrs,
                               std::vector<ValueId> inputs, std::vector<float> weight) {
  const ValueId y = add(node, kind, std::move(attrs), std::move(inputs));
  weights_of_last().weight = std::move(weight);
  return y;
}

OpWeights& Importer::weights_of_last() { return weights_[graph_.op(last_op_).name]; }

const std::set<std::string>& Importer::reader_kinds(const onnx::NodeProto& node) const {
  static const std::set<std::string> kNone;
  auto it = reader_kinds_.find(node.output(0));
  return it == reader_kinds_.end() ? kNone : it->second;
}

}  // namespace onnx_import

OnnxModel import_onnx_bytes(const std::string& bytes, const std::string& source,
                            const OnnxImportOptions& options) {
  return onnx_import::Importer(source, options).run(bytes);
}

namespace {
constexpr int kReadBlockBytes = 1 << 20;  // reads of a model file
}  // namespace

namespace {

// The model file at `path`, parsed (without its external data).
onnx::ModelProto parse_model_file(const std::string& path);

}  // namespace

std::vector<std::vector<int64_t>> onnx_input_dims(const std::string& path) {
  const onnx::ModelProto model = parse_model_file(path);
  std::set<std::string> initializers;
  for (const auto& init : model.graph().initializer()) initializers.insert(init.name());
  std::vector<std::vector<int64_t>> result;
  for (const auto& input : model.graph().input()) {
    if (initializers.count(input.name())) continue;
    std::vector<int64_t> dims;
    for (const auto& d : input.type().tensor_type().shape().dim()) {
      dims.push_back(d.has_dim_value() && d.dim_value() > 0 ? d.dim_value() : -1);
    }
    result.push_back(std::move(dims));
  }
  return result;
}

OnnxModel import_onnx(const std::string& path, const OnnxImportOptions& options) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return onnx_import::Importer(path, options, dir.empty() ? "." : dir).run(parse_model_file(path));
}

namespace {

onnx::ModelProto parse_model_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw IoError(cat("cannot read '", path, "': it is a directory"));
  }
  // Parsed straight from the file: a model of hundreds of megabytes is not held twice.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError(cat("cannot read '", path, "': ", std::strerror(errno)));
  onnx::ModelProto model;
  bool parsed = false;
  {
    google::protobuf::io::FileInputStream file(fd, kReadBlockBytes);
    google::protobuf::io::CodedInputStream coded(&file);
    coded.SetTotalBytesLimit(std::numeric_limits<int>::max());
    parsed = model.ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
    if (file.GetErrno() != 0) {
      const int error = file.GetErrno();
      ::close(fd);
      throw IoError(cat("cannot read '", path, "': ", std::strerror(error)));
    }
  }
  ::close(fd);
  if (!parsed) throw FormatError(cat(path, ": not an ONNX model (the protobuf does not parse)"));
  return model;
}

}  // namespace

}  // namespace stagecraft::graph
