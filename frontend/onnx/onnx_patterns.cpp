#include "frontend/onnx/onnx_patterns.h"

#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace stagecraft::graph::onnx_import {

namespace {

constexpr double kTolerance = 1e-4;  // relative, for the constants of a pattern

class Matcher {
 public:
  explicit Matcher(const onnx::GraphProto& g) : g_(g) {
    for (const auto& t : g.initializer()) initializers_[t.name()] = &t;
    for (int i = 0; i < g.node_size(); ++i) {
      const auto& n = g.node(i);
      index_[&n] = i;  // (a repeated field's elements are not contiguous)
      for (const auto& out : n.output()) producer_[out] = i;
      for (const auto& in : n.input()) ++readers_[in];
      for (const std::string& in : outer_reads(n)) ++readers_[in];
    }
    for (const auto& out : g.output()) ++readers_[out.name()];
  }

  // The replacement of each fused pattern, by the index of its last node; the indices of the
  // nodes it absorbs.
  std::map<int, onnx::NodeProto> replacements;
  std::set<int> absorbed;

  void find() {
    for (int i = 0; i < g_.node_size(); ++i) {
      const auto& t = g_.node(i).op_type();
      if (t == "Erf" || t == "Tanh") gelu(i);
      if (t == "Sqrt") layer_norm(i);
    }
  }

 private:
  const onnx::NodeProto* producer(const std::string& name) const {
    auto it = producer_.find(name);
    return it == producer_.end() ? nullptr : &g_.node(it->second);
  }
  int index(const onnx::NodeProto* n) const { return index_.at(n); }
  int readers(const std::string& name) const {
    auto it = readers_.find(name);
    return it == readers_.end() ? 0 : it->second;
  }
  // The only node reading `name`, or null.
  const onnx::NodeProto* sole_reader(const std::string& name) const {
    if (readers(name) != 1) return nullptr;
    for (const auto& n : g_.node())
      for (const auto& in : n.input())
        if (in == name) return &n;
    return nullptr;  // read by a graph output
  }

  std::optional<double> scalar(const std::string& name) const {
    if (auto it = initializers_.find(name); it != initializers_.end()) return value_of(*it->second);
    const onnx::NodeProto* p = producer(name);
    if (!p) return std::nullopt;
    if (p->op_type() == "Cast" && p->input_size() == 1) return scalar(p->input(0));
    if (p->op_type() != "Constant") return std::nullopt;
    for (const auto& a : p->attribute()) {
      if (a.name() == "value" && a.has_t()) return value_of(a.t());
      if (a.name() == "value_float") return a.f();
    }
    return std::nullopt;
  }

  static std::optional<double> value_of(const onnx::TensorProto& t) {
    int64_t numel = 1;
    for (int64_t d : t.dims()) numel *= d;
    if (numel != 1) return std::nullopt;
    if (t.data_type() == onnx::TensorProto::FLOAT) {
      if (t.float_data_size() == 1) return t.float_data(0);
      if (t.raw_data().size() == sizeof(float)) {
        float v;
        std::memcpy(&v, t.raw_data().data(), sizeof v);
        return v;
      }
    } else if (t.data_type() == onnx::TensorProto::DOUBLE) {
      if (t.double_data_size() == 1) return t.double_data(0);
      if (t.raw_data().size() == sizeof(double)) {
        double v;
        std::memcpy(&v, t.raw_data().data(), sizeof v);
        return v;
      }
    }
    return std::nullopt;
  }

  bool is(const std::string& name, double want) const {
    const auto v = scalar(name);
    return v && std::fabs(*v - want) <= kTolerance * std::fabs(want);
  }

  // For a two-input node, the input that is not `name` (empty when neither or both are).
  static std::string other(const onnx::NodeProto& n, const std::string& name) {
    if (n.input_size() != 2) return "";
    if (n.input(0) == name && n.input(1) != name) return n.input(1);
    if (n.input(1) == name && n.input(0) != name) return n.input(0);
    return "";
  }
  // x when `n` is a product (or quotient, with `divisor`) of x and a constant `c`, else "".
  std::string scaled(const onnx::NodeProto* n, double c, double divisor = 0) const {
    if (!n || n->input_size() != 2) return "";
    if (n->op_type() == "Mul") {
      if (is(n->input(1), c)) return n->input(0);
      if (is(n->input(0), c)) return n->input(1);
    }
    if (divisor != 0 && n->op_type() == "Div" && is(n->input(1), divisor)) return n->input(0);
    return "";
  }

  // x when `n` computes x^3 (Pow(x, 3), x * (x * x) or (x * x) * x); `inner` gets the x * x node.
  std::string cube(const onnx::NodeProto* n, const onnx::NodeProto** inner) const {
    *inner = nullptr;
    if (!n || n->input_size() != 2) return "";
    if (n->op_type() == "Pow") return is(n->input(1), 3.0) ? n->input(0) : "";
    if (n->op_type() != "Mul") return "";
    for (int k = 0; k < 2; ++k) {
      const onnx::NodeProto* sq = producer(n->input(k));
      const std::string& x = n->input(1 - k);
      if (sq && sq->op_type() == "Mul" && sq->input_size() == 2 && sq->input(0) == x && sq->input(1) == x &&
          readers(n->input(k)) == 1) {
        *inner = sq;
        return x;
      }
    }
    return "";
  }

  // GELU around the Erf or Tanh node i.
  void gelu(int i) {
    const onnx::NodeProto& f = g_.node(i);
    const bool tanh = f.op_type() == "Tanh";
    std::vector<const onnx::NodeProto*> nodes{&f};
    std::string x;
    const onnx::NodeProto* pre = producer(f.input(0));
    if (readers(f.input(0)) != 1) return;
    if (!tanh) {
      x = scaled(pre, 1.0 / std::sqrt(2.0), std::sqrt(2.0));
      if (x.empty()) return;
      nodes.push_back(pre);
    } else {
      // sqrt(2 / pi) * (x + 0.044715 * x^3)
      const std::string sum = scaled(pre, std::sqrt(2.0 / M_PI));
      const onnx::NodeProto* add = producer(sum);
      if (sum.empty() || !add || add->op_type() != "Add" || readers(sum) != 1) return;
      for (int k = 0; k < 2 && x.empty(); ++k) {
        const onnx::NodeProto* cubic = producer(add->input(k));
        const std::string cubed = scaled(cubic, 0.044715);
        const onnx::NodeProto* inner = nullptr;
        const onnx::NodeProto* c = producer(cubed);
        if (cubed.empty() || readers(add->input(k)) != 1 || readers(cubed) != 1) continue;
        if (cube(c, &inner) == add->input(1 - k)) {
          x = add->input(1 - k);
          nodes.insert(nodes.end(), {pre, add, cubic, c});
          if (inner) nodes.push_back(inner);
        }
      }
      if (x.empty()) return;
    }
    // 1 + f(...)
    const onnx::NodeProto* plus = sole_reader(f.output(0));
    if (!plus || plus->op_type() != "Add" || !is(other(*plus, f.output(0)), 1.0)) return;
    nodes.push_back(plus);
    // Products with x and 0.5, in any order (0.5 may multiply x first).
    bool have_x = false, have_half = false;
    std::string current = plus->output(0);
    const onnx::NodeProto* last = plus;
    while (!(have_x && have_half)) {
      const onnx::NodeProto* mul = sole_reader(current);
      if (!mul || mul->op_type() != "Mul") return;
      const std::string operand = other(*mul, current);
      if (operand == x && !have_x) {
        have_x = true;
      } else if (!have_half && is(operand, 0.5)) {
        have_half = true;
      } else if (!have_x && !have_half && scaled(producer(operand), 0.5) == x && readers(operand) == 1) {
        have_x = have_half = true;
        nodes.push_back(producer(operand));
      } else {
        return;
      }
      nodes.push_back(mul);
      current = mul->output(0);
      last = mul;
    }
    onnx::NodeProto fused;
    fused.set_op_type("Gelu");
    fused.set_name(last->name().empty() ? last->output(0) : last->name());
    fused.add_input(x);
    fused.add_output(last->output(0));
    if (tanh) {
      auto* a = fused.add_attribute();
      a->set_name("approximate");
      a->set_type(onnx::AttributeProto::STRING);
      a->set_s("tanh");
    }
    for (const onnx::NodeProto* n : nodes)
      if (n != last) absorbed.insert(index(n));
    replacements[index(last)] = std::move(fused);
  }

  // The axes of a ReduceMean (attribute, or constant input from opset 18), or nothing.
  std::optional<std::vector<int64_t>> mean_axes(const onnx::NodeProto& n) const {
    if (n.op_type() != "ReduceMean") return std::nullopt;
    for (const auto& a : n.attribute()) {
      if (a.name() == "keepdims" && a.i() == 0) return std::nullopt;
      if (a.name() == "axes") return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    }
    if (n.input_size() < 2) return std::nullopt;
    auto it = initializers_.find(n.input(1));
    const onnx::TensorProto* t = nullptr;
    if (it != initializers_.end()) {
      t = it->second;
    } else if (const onnx::NodeProto* p = producer(n.input(1)); p && p->op_type() == "Constant") {
      for (const auto& a : p->attribute())
        if (a.name() == "value" && a.has_t()) t = &a.t();
    }
    if (!t || t->data_type() != onnx::TensorProto::INT64) return std::nullopt;
    std::vector<int64_t> axes(t->int64_data().begin(), t->int64_data().end());
    if (axes.empty() && t->raw_data().size() % sizeof(int64_t) == 0) {
      axes.resize(t->raw_data().size() / sizeof(int64_t));
      std::memcpy(axes.data(), t->raw_data().data(), t->raw_data().size());
    }
    return axes;
  }

  // Layer normalisation written out around the Sqrt node i (ConvNeXt's channels_first LayerNorm):
  //   u = ReduceMean(x, axis a); d = x - u; v = ReduceMean(d^2 or d*d, axis a);
  //   y = d / Sqrt(v + eps) [* w] [+ b]
  // with a = 1 (the channels of N x C x H x W) or -1 (the last axis) -> LayerNormalization over
  // that axis (axis 1 marked as the channels alone), w and b its scale and bias.
  void layer_norm(int i) {
    const onnx::NodeProto& sqrt = g_.node(i);
    const onnx::NodeProto* add = producer(sqrt.input(0));
    if (!add || add->op_type() != "Add" || readers(sqrt.input(0)) != 1) return;
    std::string var_name;
    std::optional<double> eps;
    for (int k = 0; k < 2 && !eps; ++k) {
      eps = scalar(add->input(k));
      var_name = add->input(1 - k);
    }
    const onnx::NodeProto* var = producer(var_name);
    if (!eps || !var || readers(var_name) != 1) return;
    const auto axes = mean_axes(*var);
    if (!axes || axes->size() != 1 || ((*axes)[0] != 1 && (*axes)[0] != -1)) return;
    const onnx::NodeProto* square = producer(var->input(0));
    if (!square || readers(var->input(0)) != 1) return;
    std::string d_name;
    if (square->op_type() == "Pow" && is(square->input(1), 2.0)) d_name = square->input(0);
    if (square->op_type() == "Mul" && square->input(0) == square->input(1)) d_name = square->input(0);
    const onnx::NodeProto* sub = producer(d_name);
    if (d_name.empty() || !sub || sub->op_type() != "Sub") return;
    const std::string x = sub->input(0), u = sub->input(1);
    const onnx::NodeProto* div = sole_reader(sqrt.output(0));
    if (!div || div->op_type() != "Div" || div->input(1) != sqrt.output(0)) return;
    std::vector<const onnx::NodeProto*> nodes{&sqrt, add, var, square, sub, div};
    // The division reads d itself, or x - u computed a second time (as written: (x - u) twice).
    if (div->input(0) == d_name) {
      if (readers(d_name) != 2 || readers(u) != 1) return;
    } else {
      const onnx::NodeProto* again = producer(div->input(0));
      if (!again || again->op_type() != "Sub" || again->input(0) != x || again->input(1) != u ||
          readers(div->input(0)) != 1 || readers(d_name) != 1 || readers(u) != 2) {
        return;
      }
      nodes.push_back(again);
    }
    const onnx::NodeProto* mean = producer(u);
    if (!mean || mean->input(0) != x || mean_axes(*mean) != axes) return;
    nodes.push_back(mean);
    const onnx::NodeProto* last = div;
    std::string scale, bias;
    if (const onnx::NodeProto* mul = sole_reader(div->output(0)); mul && mul->op_type() == "Mul") {
      scale = other(*mul, div->output(0));
      if (!scale.empty() && !producer(scale) && !initializers_.count(scale)) scale.clear();
      if (!scale.empty()) {
        nodes.push_back(mul);
        last = mul;
        if (const onnx::NodeProto* plus = sole_reader(mul->output(0)); plus && plus->op_type() == "Add") {
          bias = other(*plus, mul->output(0));
          const onnx::NodeProto* bp = producer(bias);
          if (!bias.empty() && (initializers_.count(bias) || (bp && bp->op_type() == "Constant"))) {
            nodes.push_back(plus);
            last = plus;
          } else {
            bias.clear();
          }
        }
      }
    }
    onnx::NodeProto fused;
    fused.set_op_type("LayerNormalization");
    fused.set_name(last->name().empty() ? last->output(0) : last->name());
    fused.add_input(x);
    fused.add_input(scale);
    fused.add_input(bias);
    fused.add_output(last->output(0));
    auto* axis = fused.add_attribute();
    axis->set_name("axis");
    axis->set_type(onnx::AttributeProto::INT);
    axis->set_i((*axes)[0]);
    auto* epsilon = fused.add_attribute();
    epsilon->set_name("epsilon");
    epsilon->set_type(onnx::AttributeProto::FLOAT);
    epsilon->set_f(static_cast<float>(*eps));
    if ((*axes)[0] == 1) {  // the channels alone, not ONNX's axes 1..rank-1
      auto* marker = fused.add_attribute();
      marker->set_name(kChannelsOnly);
      marker->set_type(onnx::AttributeProto::INT);
      marker->set_i(1);
    }
    for (const onnx::NodeProto* n : nodes)
      if (n != last) absorbed.insert(index(n));
    replacements[index(last)] = std::move(fused);
  }

  const onnx::GraphProto& g_;
  std::map<std::string, const onnx::TensorProto*> initializers_;
  std::map<const onnx::NodeProto*, int> index_;
  std::map<std::string, int> producer_;
  std::map<std::string, int> readers_;
};

// The names `g` reads that it does not define, into `reads` (in order, once each).
void free_names(const onnx::GraphProto& g, std::set<std::string>& seen, std::vector<std::string>& reads) {
  std::set<std::string> defined;
  for (const auto& in : g.input()) defined.insert(in.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  const auto read = [&](const std::string& name) {
    if (!name.empty() && !defined.count(name) && seen.insert(name).second) reads.push_back(name);
  };
  for (const auto& n : g.node()) {
    for (const auto& in : n.input()) read(in);
    for (const auto& a : n.attribute()) {
      std::vector<const onnx::GraphProto*> subgraphs;
      if (a.has_g()) subgraphs.push_back(&a.g());
      for (const auto& sub : a.graphs()) subgraphs.push_back(&sub);
      for (const onnx::GraphProto* sub : subgraphs) {
        std::vector<std::string> inner;
        std::set<std::string> inner_seen;
        free_names(*sub, inner_seen, inner);
        for (const std::string& name : inner) read(name);
      }
    }
    for (const auto& out : n.output()) defined.insert(out);
  }
  for (const auto& out : g.output()) read(out.name());
}

}  // namespace

std::vector<std::string> outer_reads(const onnx::NodeProto& node) {
  std::set<std::string> seen;
  std::vector<std::string> reads;
  for (const auto& a : node.attribute()) {
    if (a.has_g()) free_names(a.g(), seen, reads);
    for (const auto& sub : a.graphs()) free_names(sub, seen, reads);
  }
  return reads;
}

std::vector<const onnx::NodeProto*> fuse_patterns(const onnx::GraphProto& g,
                                                  std::vector<std::unique_ptr<onnx::NodeProto>>& owned) {
  Matcher m(g);
  m.find();
  std::vector<const onnx::NodeProto*> nodes;
  for (int i = 0; i < g.node_size(); ++i) {
    if (m.absorbed.count(i)) continue;
    if (auto it = m.replacements.find(i); it != m.replacements.end()) {
      owned.push_back(std::make_unique<onnx::NodeProto>(std::move(it->second)));
      nodes.push_back(owned.back().get());
    } else {
      nodes.push_back(&g.node(i));
    }
  }
  return nodes;
}

}  // namespace stagecraft::graph::onnx_import
