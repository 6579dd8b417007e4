// The recurrent layers RNN, GRU and LSTM as other ONNX ops, unrolled over the sequence (its length
// is known once the input shapes are): the input projection of every step is one MatMul, each step
// then adds the projection of the previous hidden state and applies the gates, as the ONNX
// operator specification writes them (gate order i, o, f, c for LSTM and z, r, h for GRU; the
// activations by name; clip, input_forget, peepholes, linear_before_reset, both directions and
// the batch-first layout). A model of sequence length T gets about 20·T ops per direction: right
// for the short sequences of vision models (a CRNN's columns); a long sequence is slow to plan.
#include <string>
#include <vector>

#include "common/strings.h"
#include "graph/onnx/onnx_import_expansion.h"

namespace stagecraft::graph::onnx_import {

namespace {

// The defaults of alpha and beta where a model lists an activation without them.
float default_alpha(const std::string& name) {
  if (name == "LeakyRelu") return 0.01f;
  if (name == "HardSigmoid") return 0.2f;
  return 1.0f;
}
float default_beta(const std::string& name) { return name == "HardSigmoid" ? 0.5f : 0.0f; }

}  // namespace

void Importer::recurrent(const onnx::NodeProto& node) {
  const std::string& t = node.op_type();
  const int gates = t == "LSTM" ? 4 : t == "GRU" ? 3 : 1;
  const ValueId xv = input(node, 0);
  const std::vector<int64_t> xd = dims_of(shape(xv));
  if (xd.size() != 3) fail(node, cat("the input must be 3-D, got ", shape(xv).to_string()));
  const bool batch_first = attr_int(node, "layout", 0) != 0;
  const int64_t steps = batch_first ? xd[1] : xd[0];
  if (steps < 1) fail(node, "the sequence is empty");
  const int64_t hidden = attr_int(node, "hidden_size", 0);
  if (hidden < 1) fail(node, "hidden_size must be given and >= 1");
  const std::string direction = attr_string(node, "direction").empty() ? "forward" : attr_string(node, "direction");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
    fail(node, cat("direction '", direction, "' is not forward, reverse or bidirectional"));
  }
  const int64_t dirs = direction == "bidirectional" ? 2 : 1;
  if (has_input(node, 4)) {  // sequence_lens: only the full length of every sequence
    const ConstTensor* lens = constant(node, 4);
    if (!lens) fail(node, "sequence_lens must be a constant (sequences of different lengths are not supported)");
    for (int64_t l : lens->ints()) {
      if (l != steps) fail(node, cat("sequence_lens ", l, " differs from the sequence length ", steps));
    }
  }
  const float clip = attr_float(node, "clip", 0.0f);
  const bool input_forget = attr_int(node, "input_forget", 0) != 0;
  const bool linear_before_reset = attr_int(node, "linear_before_reset", 0) != 0;
  // The activations: f, g (and h) per direction.
  const int per_direction = t == "LSTM" ? 3 : t == "GRU" ? 2 : 1;
  std::vector<std::string> names = attr_strings(node, "activations");
  if (names.empty()) {
    for (int64_t d = 0; d < dirs; ++d) {
      if (t == "RNN") names.push_back("Tanh");
      else names.insert(names.end(), {"Sigmoid", "Tanh", "Tanh"});
      if (t == "GRU") names.pop_back();
    }
  }
  if (static_cast<int64_t>(names.size()) != per_direction * dirs) {
    fail(node, cat("activations lists ", names.size(), " functions; ", t, " ", direction, " takes ", per_direction * dirs));
  }
  const std::vector<float> alphas = attr_floats(node, "activation_alpha"), betas = attr_floats(node, "activation_beta");
  // The parameter k of the list: given, or the function's default.
  std::vector<float> alpha(names.size()), beta(names.size());
  for (size_t k = 0; k < names.size(); ++k) {
    alpha[k] = k < alphas.size() ? alphas[k] : default_alpha(names[k]);
    beta[k] = k < betas.size() ? betas[k] : default_beta(names[k]);
  }
  const auto output = [&](int slot) { return slot < node.output_size() ? node.output(slot) : std::string(); };

  Expansion e(*this, node);
  // The element-wise function `name` (an ONNX recurrent activation) of x with its alpha and beta.
  const auto activation = [&](const std::string& name, const std::string& x, float a, float b) {
    if (name == "Sigmoid" || name == "Tanh" || name == "Relu" || name == "Softsign" || name == "Softplus") {
      return e.op(name.c_str(), {x});
    }
    if (name == "LeakyRelu" || name == "ThresholdedRelu" || name == "Elu") {
      return e.op(name.c_str(), {x}, {float_attr("alpha", a)});
    }
    if (name == "HardSigmoid") return e.op("HardSigmoid", {x}, {float_attr("alpha", a), float_attr("beta", b)});
    if (name == "Affine") return e.op("Add", {e.op("Mul", {x, e.scalar(a)}), e.scalar(b)});
    if (name == "ScaledTanh") return e.op("Mul", {e.op("Tanh", {e.op("Mul", {x, e.scalar(b)})}), e.scalar(a)});
    fail(node, cat("activation '", name, "' is not an ONNX recurrent activation"));
  };
  const auto slice = [&](const std::string& x, int64_t axis, int64_t begin, int64_t end) {
    return e.op("Slice", {x, e.ints({begin}), e.ints({end}), e.ints({axis})});
  };
  const auto squeeze0 = [&](const std::string& x) { return e.unsqueeze("Squeeze", x, {0}); };
  const auto unsqueeze0 = [&](const std::string& x) { return e.unsqueeze("Unsqueeze", x, {0}); };
  const auto clipped = [&](const std::string& x) {
    return clip > 0 ? e.op("Clip", {x, e.scalar(-clip), e.scalar(clip)}) : x;
  };
  const std::string x = batch_first ? e.op("Transpose", {node.input(0)}, {ints_attr("perm", {1, 0, 2})}) : node.input(0);
  std::vector<std::vector<std::string>> outputs(static_cast<size_t>(steps));  // Y per step and direction
  std::vector<std::string> last_h, last_c;
  for (int64_t d = 0; d < dirs; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    const auto f = [&](int k, const std::string& v) {
      const auto at = static_cast<size_t>(d * per_direction + k);
      return activation(names[at], clipped(v), alpha[at], beta[at]);
    };
    // W [G·H, in] and R [G·H, H] of this direction, transposed for x · Wᵀ.
    const std::string w = e.op("Transpose", {squeeze0(slice(node.input(1), 0, d, d + 1))}, {ints_attr("perm", {1, 0})});
    const std::string r = e.op("Transpose", {squeeze0(slice(node.input(2), 0, d, d + 1))}, {ints_attr("perm", {1, 0})});
    // The input projection of every step at once, with Wb (and Rb except a GRU's).
    std::string xw = e.op("MatMul", {x, w});  // [T, N, G·H]
    std::string rb;  // a GRU's Rb, added to the recurrent projection
    if (has_input(node, 3)) {  // biases as [1, G·H] rows (broadcast over the batch)
      const std::string b = slice(node.input(3), 0, d, d + 1);  // [1, 2·G·H]
      const std::string wb = slice(b, 1, 0, gates * hidden), rbias = slice(b, 1, gates * hidden, 2 * gates * hidden);
      if (t == "GRU") {
        xw = e.op("Add", {xw, wb});
        rb = rbias;
      } else {
        xw = e.op("Add", {xw, e.op("Add", {wb, rbias})});
      }
    }
    // The initial states [D, N, H] (batch first: [N, D, H]) of this direction; "" is zero.
    const auto initial = [&](int slot) {
      if (!has_input(node, slot)) return std::string();
      const std::string v = batch_first ? e.op("Transpose", {node.input(slot)}, {ints_attr("perm", {1, 0, 2})})
                                        : node.input(slot);
      return squeeze0(slice(v, 0, d, d + 1));
    };
    std::string h = initial(5);
    std::string c = t == "LSTM" ? initial(6) : "";
    std::string peep_i, peep_o, peep_f;
    if (t == "LSTM" && has_input(node, 7)) {
      const std::string p = slice(node.input(7), 0, d, d + 1);  // [1, 3·H]: i, o, f
      peep_i = slice(p, 1, 0, hidden);
      peep_o = slice(p, 1, hidden, 2 * hidden);
      peep_f = slice(p, 1, 2 * hidden, 3 * hidden);
    }
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t step = reverse ? steps - 1 - s : s;
      const std::string in = squeeze0(slice(xw, 0, step, step + 1));  // [N, G·H]
      // The recurrent projection h · Rᵀ (+ Rb for a GRU) and its gate k; "" while h and Rb are zero.
      const std::string rec = h.empty() ? "" : rb.empty() ? e.op("MatMul", {h, r}) : e.op("Add", {e.op("MatMul", {h, r}), rb});
      const auto rec_gate = [&](int k) {
        if (!rec.empty()) return slice(rec, 1, k * hidden, (k + 1) * hidden);
        return rb.empty() ? std::string() : slice(rb, 1, k * hidden, (k + 1) * hidden);
      };
      const auto gate = [&](int k) { return slice(in, 1, k * hidden, (k + 1) * hidden); };
      const auto sum = [&](const std::string& a, const std::string& b) { return b.empty() ? a : e.op("Add", {a, b}); };
      if (t == "RNN") {
        h = f(0, sum(in, rec));
      } else if (t == "GRU") {
        const std::string z = f(0, sum(gate(0), rec_gate(0)));
        const std::string rg = f(0, sum(gate(1), rec_gate(1)));
        std::string hh;  // the candidate's recurrent part
        if (linear_before_reset) {  // r ⊙ (h · Rhᵀ + Rbh)
          if (const std::string g = rec_gate(2); !g.empty()) hh = e.op("Mul", {rg, g});
        } else if (!h.empty()) {  // (r ⊙ h) · Rhᵀ + Rbh
          hh = e.op("MatMul", {e.op("Mul", {rg, h}), slice(r, 1, 2 * hidden, 3 * hidden)});
          if (!rb.empty()) hh = e.op("Add", {hh, slice(rb, 1, 2 * hidden, 3 * hidden)});
        } else {
          hh = rec_gate(2);  // h zero: Rbh
        }
        const std::string cand = f(1, sum(gate(2), hh));
        // H = (1 - z) ⊙ ĥ + z ⊙ H(t-1) = ĥ + z ⊙ (H(t-1) - ĥ)
        h = e.op("Add", {cand, e.op("Mul", {z, h.empty() ? e.op("Neg", {cand}) : e.op("Sub", {h, cand})})});
      } else {  // LSTM
        std::string pre_i = sum(gate(0), rec_gate(0));
        std::string pre_f = sum(gate(2), rec_gate(2));
        if (!c.empty() && !peep_i.empty()) {
          pre_i = e.op("Add", {pre_i, e.op("Mul", {c, peep_i})});
          pre_f = e.op("Add", {pre_f, e.op("Mul", {c, peep_f})});
        }
        const std::string ig = f(0, pre_i);
        const std::string fg = input_forget ? e.op("Sub", {e.scalar(1.0f), ig}) : f(0, pre_f);
        const std::string cand = f(1, sum(gate(3), rec_gate(3)));
        const std::string kept = e.op("Mul", {ig, cand});
        c = c.empty() ? kept : e.op("Add", {e.op("Mul", {fg, c}), kept});
        std::string pre_o = sum(gate(1), rec_gate(1));
        if (!peep_o.empty()) pre_o = e.op("Add", {pre_o, e.op("Mul", {c, peep_o})});
        h = e.op("Mul", {f(0, pre_o), f(2, c)});
      }
      outputs[static_cast<size_t>(step)].push_back(h);  // [N, H]
    }
    last_h.push_back(h);
    if (t == "LSTM") last_c.push_back(c);
  }
  // Y [T, D, N, H] (batch first: [N, T, D, H]); Y_h, Y_c [D, N, H] ([N, D, H]); the last op of
  // each writes the output's name.
  const auto stacked = [&](const std::vector<std::string>& parts, const std::string& name) {  // along a new axis 0
    if (parts.size() == 1) return e.unsqueeze("Unsqueeze", parts[0], {0}, name);
    std::vector<std::string> each;
    for (const auto& p : parts) each.push_back(unsqueeze0(p));
    return e.op("Concat", each, {int_attr("axis", 0)}, name);
  };
  const auto named = [&](const std::vector<std::string>& parts, const std::vector<int64_t>& perm, int slot) {
    if (output(slot).empty()) return;
    if (!batch_first) {
      stacked(parts, output(slot));
      return;
    }
    e.op("Transpose", {stacked(parts, "")}, {ints_attr("perm", perm)}, output(slot));
  };
  if (!output(0).empty()) {
    std::vector<std::string> rows;  // [D, N, H] per step
    for (const auto& per_step : outputs) rows.push_back(stacked(per_step, ""));
    named(rows, {2, 0, 1, 3}, 0);
  }
  named(last_h, {1, 0, 2}, 1);
  if (t == "LSTM") named(last_c, {1, 0, 2}, 2);
  e.finish();
}

}  // namespace stagecraft::graph::onnx_import
