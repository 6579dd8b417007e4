// Static int8 quantisation: scale classes, per-op precision, conversion ops, calibration files.
#include "graph/quantize.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <tuple>

#include "common/strings.h"
#include "graph/bf16.h"
#include "graph/errors.h"
#include "graph/passes.h"

namespace stagecraft::graph {

namespace {

constexpr double kU8Max = 255.0;
constexpr double kI8Max = 127.0;
constexpr double kTinyRange = 1e-8;  // a value that is all zeros still gets a usable scale

Activation fused_activation(const Op& op) { return graph::fused_activation(op.kind, op.attrs); }

class UnionFind {
 public:
  explicit UnionFind(size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  size_t find(size_t x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  void unite(size_t a, size_t b) { parent_[find(a)] = find(b); }

 private:
  std::vector<size_t> parent_;
};

struct QType {
  DataType dtype = DataType::kF32;
  float scale = 1.0f;
  bool operator==(const QType&) const = default;
};

class Quantizer {
 public:
  Quantizer(const Graph& g, const Calibration& c, const QuantizeOptions& o)
      : g_(g), cal_(c), options_(o), classes_(g.num_values()) {}

  Graph run(QuantizeReport* report) {
    for (const Op& op : g_.ops()) {
      if (op.kind == OpKind::kConv2d && op.attrs_as<Conv2dAttrs>().residual) {
        throw GraphError(cat("quantisation: convolution '", op.name, "' has a fused residual "
                             "addition, which int8 convolutions do not take; quantise the graph "
                             "prepared with InferenceOptions::fuse_residual_adds off"));
      }
    }
    check_calibration();
    find_part_scale_concats();
    form_classes();
    Graph out(g_.name());
    std::vector<ValueId> mapped(g_.num_values(), -1);
    for (ValueId v : g_.inputs()) {
      if (g_.value(v).desc.dtype != DataType::kF32) {
        throw GraphError(cat("quantisation needs an f32 graph, but input '", g_.value(v).name,
                             "' is ", to_string(g_.value(v).desc.dtype)));
      }
      mapped[v] = out.add_input(g_.value(v).name, g_.value(v).desc);
    }
    for (const Op& op : g_.ops()) {
      std::vector<ValueId> inputs;
      const bool int8 = computes_in_int8(op, out, mapped);
      for (size_t slot = 0; slot < op.inputs.size(); ++slot) {
        const ValueId src = mapped[op.inputs[slot]];
        inputs.push_back(int8 ? as_type(out, src, input_type(op, slot, out, mapped))
                              : as_type(out, src, QType{}));
      }
      const OpId id = out.add_op(op.name, op.kind,
                                 part_scales_[op.id] && int8 ? OpAttrs{ConcatAttrs{.part_scales = true}} : op.attrs, inputs);
      ++(int8 ? report_.int8_ops : report_.f32_ops);
      for (size_t i = 0; i < op.outputs.size(); ++i) {
        const ValueId v = out.op(id).outputs[i];
        mapped[op.outputs[i]] = v;
        const QType t = !int8                 ? QType{}
                        : part_scales_[op.id] ? part_scaled(op, out, inputs, v)  // int8: has an 8-bit part
                                              : output_type(op, op.outputs[i], out.value(inputs[0]).desc);
        out.set_value_type(v, t.dtype, t.scale);
        // Per-channel ops hand a part-scale concatenation's channel scales on.
        if (int8 && keeps_scale(op.kind) && channel_scales_.count(inputs[0]))
          channel_scales_[v] = channel_scales_.at(inputs[0]);
      }
    }
    for (ValueId v : g_.outputs()) out.add_output(as_type(out, mapped[v], QType{}));
    if (report) *report = report_;
    return out;
  }

 private:
  void check_calibration() const {
    for (size_t v = 0; v < g_.num_values(); ++v) {
      const std::string& name = g_.value(static_cast<ValueId>(v)).name;
      if (!cal_.values.count(name)) {
        throw GraphError(cat("the calibration (of '", cal_.network, "') has no range for value '",
                             name, "' of '", g_.name(),
                             "': it was made for another graph; run `stagecraft calibrate` on "
                             "this one"));
      }
    }
  }

  const ValueRange& range(ValueId v) const { return cal_.values.at(g_.value(v).name); }

  // Concatenations whose 8-bit parts keep their own scales: every reader of the concatenation,
  // through ReLU, max and average pooling and zero padding (each per channel and commuting with
  // a positive scale), is a depthwise convolution of that one input (a batch norm made one), which
  // takes each channel's scale into its weights (QuantizeReport::input_channel_factors). One
  // scale for all parts gave a small part the steps of the largest: in DenseNet-121's third block
  // the parts span absmax 3.5 to 12.1, and every layer of the block reads them all. Other
  // convolutions would take the factors per input channel into weights quantised per output
  // channel, trading weight steps for activation steps: measured, that helped as often as it hurt
  // (min cosine against f32, NASNet-A Large 0.744 -> 0.784, GoogLeNet 0.919 -> 0.900), so their
  // concatenations keep one scale.
  void find_part_scale_concats() {
    part_scales_.assign(g_.num_ops(), false);
    for (const Op& op : g_.ops()) {
      if (op.kind == OpKind::kConcat && options_.part_scales) part_scales_[op.id] = part_scale(op);
    }
  }

  // Whether concatenation `op` keeps its parts' scales (memoised: a concatenation read by another
  // needs that one to keep them too).
  bool part_scale(const Op& op) {
    if (auto it = qualified_.find(op.id); it != qualified_.end()) return it->second;
    std::vector<OpId> convolutions;
    const ValueId v = op.outputs[0];
    const bool ok = g_.value(v).desc.shape.rank() == 4 &&
                    readers_take_channel_scales(v, range(v).min >= 0, convolutions);
    if (ok) readers_[op.id] = std::move(convolutions);
    qualified_[op.id] = ok;
    return ok;
  }

  // Whether every reader of `v` (a value of per-channel scales, of an unsigned type or not) takes
  // them: a depthwise convolution (collected), a part-scale concatenation of the same type, or a
  // per-channel op whose readers do.
  bool readers_take_channel_scales(ValueId v, bool is_unsigned, std::vector<OpId>& convolutions) {
    if (g_.is_output(v) || g_.consumers(v).empty()) return false;
    for (OpId r : g_.consumers(v)) {
      const Op& op = g_.op(r);
      if (op.kind == OpKind::kConcat) {
        if ((range(op.outputs[0]).min >= 0) != is_unsigned || !part_scale(op)) return false;
        continue;
      }
      if (op.inputs.size() != 1) return false;
      if (op.kind == OpKind::kConv2d) {
        const auto& a = op.attrs_as<Conv2dAttrs>();
        if (a.groups != a.in_channels) return false;  // not depthwise (see above)
        convolutions.push_back(r);
        continue;
      }
      const bool per_channel =
          op.kind == OpKind::kRelu || op.kind == OpKind::kMaxPool || op.kind == OpKind::kAvgPool ||
          (op.kind == OpKind::kPad && !op.attrs_as<PadAttrs>().reflect && op.attrs_as<PadAttrs>().value == 0);
      if (!per_channel || !readers_take_channel_scales(op.outputs[0], is_unsigned, convolutions)) return false;
    }
    return true;
  }

  // The scale of each channel of `v` (a value of the quantised graph).
  std::vector<float> channel_scales(const Graph& out, ValueId v) const {
    if (auto it = channel_scales_.find(v); it != channel_scales_.end()) return it->second;
    const TensorDesc& d = out.value(v).desc;
    return std::vector<float>(static_cast<size_t>(d.shape[1]), d.scale);
  }

  // A part-scale concatenation's output: its type, with the largest channel scale as the value's;
  // its convolutions' factors per input channel are each channel's scale over that one.
  QType part_scaled(const Op& op, const Graph& out, const std::vector<ValueId>& inputs, ValueId result) {
    std::vector<float> scales;
    for (ValueId in : inputs) {
      const std::vector<float> part = channel_scales(out, in);
      scales.insert(scales.end(), part.begin(), part.end());
    }
    QType t = class_type_[op.outputs[0]];
    t.scale = *std::max_element(scales.begin(), scales.end());
    std::vector<float> factors;
    for (float s : scales) factors.push_back(s / t.scale);
    for (OpId c : readers_.at(op.id)) report_.input_channel_factors[g_.op(c).name] = factors;
    channel_scales_[result] = std::move(scales);
    ++report_.part_scale_concats;
    return t;
  }

  // Concatenations (but part-scale ones) and the rescaling ops feeding them share one scale class.
  void form_classes() {
    for (const Op& op : g_.ops()) {
      if (op.kind != OpKind::kConcat || part_scales_[op.id]) continue;
      const bool relu_read = options_.unsigned_relu_reads && only_relu_reads(op.outputs[0]);
      for (ValueId in : op.inputs) {
        const OpId p = g_.value(in).producer;
        if (p == kNoOp || !rescales(g_.op(p).kind)) continue;
        // A part read otherwise too would keep a concatenation read only through ReLU signed
        // (read_through_relu): it keeps its own scale and is converted into the concatenation's.
        // So NASNet's cell outputs (min cosine to f32 0.767 -> 0.813; 22 conversions more, no
        // measurable time).
        if (relu_read && !read_by_relu_concats(in)) continue;
        classes_.unite(in, op.outputs[0]);
      }
    }
    struct ClassRange {
      double min = 0, max = 0, absmax = 0;
      bool relu_read = true;  // every member is read only through ReLU (read_through_relu)
    };
    std::map<size_t, ClassRange> ranges;  // by class
    for (size_t v = 0; v < g_.num_values(); ++v) {
      const ValueRange& r = range(static_cast<ValueId>(v));
      const size_t root = classes_.find(v);
      auto [it, fresh] = ranges.emplace(root, ClassRange{r.min, r.max, r.absmax});
      ClassRange& c = it->second;
      if (!fresh) {
        c.min = std::min(c.min, r.min);
        c.max = std::max(c.max, r.max);
        c.absmax = std::max(c.absmax, r.absmax);
      }
      c.relu_read = c.relu_read && options_.unsigned_relu_reads && read_through_relu(static_cast<ValueId>(v), root);
    }
    report_.scale_classes = 0;
    class_type_.assign(g_.num_values(), QType{});
    for (size_t v = 0; v < g_.num_values(); ++v) {
      const ClassRange& c = ranges.at(classes_.find(v));
      QType t;
      t.dtype = c.min >= 0 || c.relu_read ? DataType::kU8 : DataType::kI8;
      // relu_read: [0, max] (the percentile method's magnitude if smaller)
      const double magnitude = c.min >= 0 || !c.relu_read ? c.absmax : std::min(c.max, c.absmax);
      t.scale = static_cast<float>(std::max(magnitude, kTinyRange) /
                                   (t.dtype == DataType::kU8 ? kU8Max : kI8Max));
      class_type_[v] = t;
      if (classes_.find(v) == v) ++report_.scale_classes;
    }
  }

  bool only_relu_reads(ValueId v) const {
    if (g_.is_output(v) || g_.consumers(v).empty()) return false;
    for (OpId r : g_.consumers(v))
      if (g_.op(r).kind != OpKind::kRelu) return false;
    return true;
  }
  // Whether every reader of `v` is a ReLU or a concatenation (not a part-scale one) read only by ReLUs.
  bool read_by_relu_concats(ValueId v) const {
    if (g_.is_output(v)) return false;
    for (OpId r : g_.consumers(v)) {
      const Op& op = g_.op(r);
      if (op.kind == OpKind::kRelu) continue;
      if (op.kind == OpKind::kConcat && !part_scales_[r] && only_relu_reads(op.outputs[0])) continue;
      return false;
    }
    return true;
  }

  // Whether every reader of `v` is a ReLU or a concatenation of class `root` (not a part-scale one).
  // A class whose every value is read only so holds [0, max] in u8: saturating at 0 is what the
  // ReLUs do, and the steps are half (or less) of the signed type's over [-absmax, absmax]
  // (form_classes keeps parts read otherwise out of such a concatenation's class).
  bool read_through_relu(ValueId v, size_t root) {
    if (g_.is_output(v) || g_.consumers(v).empty()) return false;
    const OpId p = g_.value(v).producer;
    if (p != kNoOp && part_scales_[p]) return false;
    for (OpId r : g_.consumers(v)) {
      const Op& op = g_.op(r);
      if (op.kind == OpKind::kRelu) continue;
      if (op.kind == OpKind::kConcat && !part_scales_[r] && classes_.find(op.outputs[0]) == root) continue;
      return false;
    }
    return true;
  }

  bool computes_in_int8(const Op& op, const Graph& out, const std::vector<ValueId>& mapped) const {
    if (op.kind == OpKind::kConv2d || op.kind == OpKind::kLinear || op.kind == OpKind::kAdd) {
      return true;
    }
    if (op.kind == OpKind::kConcat) {
      // In int8 when any part is (or can write) 8-bit.
      for (ValueId in : op.inputs) {
        const OpId p = g_.value(in).producer;
        if (is_int8(out.value(mapped[in]).desc.dtype) || (p != kNoOp && rescales(g_.op(p).kind))) {
          return true;
        }
      }
      return false;
    }
    // A global average keeps its input's scale when it runs in 8 bits, set by the largest
    // activation of the whole map: the averages, far smaller, would keep a few steps of it (the
    // features a classifier reads). In f32 they are exact, and the reader quantises them with
    // their own range; the map is converted once, a small tensor at the end of a network.
    if (op.kind == OpKind::kGlobalAvgPool) return false;
    if (keeps_scale(op.kind)) return is_int8(out.value(mapped[op.inputs[0]]).desc.dtype);
    return false;
  }

  // What an int8 op reads in input `slot`.
  QType input_type(const Op& op, size_t slot, const Graph& out,
                   const std::vector<ValueId>& mapped) const {
    const ValueId src = op.inputs[slot];
    const TensorDesc& have = out.value(mapped[src]).desc;
    if (op.kind == OpKind::kConcat) {
      const QType whole = class_type_[op.outputs[0]];
      if (!part_scales_[op.id]) return whole;
      if (have.dtype == whole.dtype) return QType{have.dtype, have.scale};
      // The part's own range in the concatenation's element type.
      const double absmax = std::max(range(src).absmax, kTinyRange);
      return QType{whole.dtype, static_cast<float>(absmax / (whole.dtype == DataType::kU8 ? kU8Max : kI8Max))};
    }
    if (is_int8(have.dtype)) return QType{have.dtype, have.scale};
    return class_type_[src];  // quantise an f32 value with its own calibrated range
  }

  QType output_type(const Op& op, ValueId v, const TensorDesc& input) const {
    if (keeps_scale(op.kind)) return QType{input.dtype, input.scale};
    if (rescales(op.kind) &&
        (g_.is_output(v) || !scales_with_units(fused_activation(op)))) {
      return QType{};  // f32 epilogue: the sigmoid (or the caller) sees real values
    }
    return class_type_[v];
  }

  // `v` in type `t`: itself, or the output of a (shared) identity op converting it.
  ValueId as_type(Graph& out, ValueId v, const QType& t) {
    const TensorDesc& d = out.value(v).desc;
    if (d.dtype == t.dtype && (!is_int8(t.dtype) || d.scale == t.scale)) return v;
    const auto key = std::make_tuple(v, t.dtype, t.scale);
    if (auto it = conversions_.find(key); it != conversions_.end()) return it->second;
    const std::string name = out.unused_name(out.value(v).name, "q", &next_conversion_);
    const OpId id = out.add_op(name, OpKind::kIdentity, NoAttrs{}, {v});
    const ValueId converted = out.op(id).outputs[0];
    out.set_value_type(converted, t.dtype, t.scale);
    ++report_.conversions;
    conversions_.emplace(key, converted);
    return converted;
  }

  const Graph& g_;
  const Calibration& cal_;
  QuantizeOptions options_;
  UnionFind classes_;
  std::vector<QType> class_type_;
  std::vector<bool> part_scales_;                          // by op: a part-scale concatenation
  std::map<OpId, bool> qualified_;                         // part_scale()'s answers
  std::map<OpId, std::vector<OpId>> readers_;              // a part-scale concatenation's convolutions
  std::map<ValueId, std::vector<float>> channel_scales_;  // quantised values of per-channel scales
  std::map<std::tuple<ValueId, DataType, float>, ValueId> conversions_;
  int next_conversion_ = 0;
  QuantizeReport report_;
};

[[noreturn]] void fail(const std::string& path, const YAML::Node& node, const std::string& what) {
  const YAML::Mark m = node.Mark();
  throw FormatError(cat(path, ":", m.line + 1, ":", m.column + 1, ": ", what));
}

double number(const std::string& path, const YAML::Node& map, const char* key) {
  const YAML::Node n = map[key];
  if (!n) fail(path, map, cat("missing field '", key, "'"));
  try {
    const double x = n.as<double>();
    if (!std::isfinite(x)) fail(path, n, cat("field '", key, "' must be a finite number"));
    return x;
  } catch (const YAML::Exception&) {
    fail(path, n, cat("field '", key, "' must be a number"));
  }
}

}  // namespace

bool scales_with_units(Activation act) {
  return act == Activation::kNone || act == Activation::kRelu || act == Activation::kRelu6;
}

bool keeps_scale(OpKind kind) {
  switch (kind) {
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
    case OpKind::kGlobalAvgPool:
    case OpKind::kRelu:
    case OpKind::kPad:
    case OpKind::kFlatten:
    case OpKind::kSplit:
    case OpKind::kSlice:
    case OpKind::kIdentity:
      return true;
    default:
      return false;
  }
}

bool rescales(OpKind kind) {
  return kind == OpKind::kConv2d || kind == OpKind::kLinear || kind == OpKind::kAdd;
}

bool is_quantised(const Graph& graph) {
  for (size_t v = 0; v < graph.num_values(); ++v) {
    if (is_int8(graph.value(static_cast<ValueId>(v)).desc.dtype)) return true;
  }
  return false;
}

std::string compute_type(const Graph& graph) {
  if (is_quantised(graph)) return "int8";
  if (is_bf16(graph)) return "bf16";
  if (graph.inputs().empty()) return "f32";
  return std::string(to_string(graph.value(graph.inputs()[0]).desc.dtype));
}

DataType compute_dtype(const Graph& graph) {
  if (is_quantised(graph)) return DataType::kU8;
  if (is_bf16(graph)) return DataType::kBF16;
  const bool f16 = !graph.inputs().empty() && graph.value(graph.inputs()[0]).desc.dtype == DataType::kF16;
  return f16 ? DataType::kF16 : DataType::kF32;
}

Graph quantize(const Graph& graph, const Calibration& calibration, QuantizeReport* report,
               const QuantizeOptions& options) {
  PassLog log;
  const Graph g = batch_norms_as_convolutions(graph, &log);
  Graph q = Quantizer(g, calibration, options).run(report);
  if (report) report->batch_norm_convolutions = std::move(log.batch_norm_convolutions);
  return q;
}

void save_calibration(const Calibration& c, const std::string& path) {
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "calibration" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "network" << YAML::Value << c.network;
  out << YAML::Key << "method" << YAML::Value << c.method;
  out << YAML::Key << "percentile" << YAML::Value << c.percentile;
  out << YAML::Key << "samples" << YAML::Value << c.samples;
  out << YAML::Key << "values" << YAML::Value << YAML::BeginMap;
  for (const auto& [name, r] : c.values) {
    out << YAML::Key << name << YAML::Value << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "min" << YAML::Value << r.min << YAML::Key << "max" << YAML::Value << r.max;
    out << YAML::Key << "absmax" << YAML::Value << r.absmax << YAML::EndMap;
  }
  out << YAML::EndMap << YAML::EndMap << YAML::EndMap;
  std::ofstream file(path);
  file << out.c_str() << "\n";
  if (!file) throw GraphError(cat("cannot write the calibration file '", path, "'"));
}

Calibration load_calibration(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw GraphError(cat("cannot read the calibration file '", path, "' (make one with `stagecraft "
                         "calibrate NETWORK -o FILE`)"));
  } catch (const YAML::ParserException& e) {
    throw FormatError(cat(path, ":", e.mark.line + 1, ":", e.mark.column + 1, ": not valid YAML: ", e.msg));
  }
  const YAML::Node cal = root.IsMap() ? root["calibration"] : YAML::Node();
  if (!cal || !cal.IsMap()) fail(path, root, "expected a map with the key 'calibration'");
  Calibration c;
  try {
    c.network = cal["network"] ? cal["network"].as<std::string>() : "";
    c.method = cal["method"] ? cal["method"].as<std::string>() : "minmax";
  } catch (const YAML::Exception&) {
    fail(path, cal, "fields 'network' and 'method' must be strings");
  }
  c.percentile = cal["percentile"] ? number(path, cal, "percentile") : 100;
  c.samples = static_cast<int>(number(path, cal, "samples"));
  const YAML::Node values = cal["values"];
  if (!values || !values.IsMap()) fail(path, cal, "missing map 'values' (value name -> range)");
  for (const auto& entry : values) {
    const std::string name = entry.first.as<std::string>();
    const YAML::Node& r = entry.second;
    if (!r.IsMap()) fail(path, r, cat("value '", name, "': expected {min, max, absmax}"));
    ValueRange range{number(path, r, "min"), number(path, r, "max"), number(path, r, "absmax")};
    if (range.min > range.max) fail(path, r, cat("value '", name, "': min is larger than max"));
    if (range.absmax < 0) fail(path, r, cat("value '", name, "': absmax must be >= 0"));
    c.values.emplace(name, range);
  }
  return c;
}

}  // namespace stagecraft::graph
