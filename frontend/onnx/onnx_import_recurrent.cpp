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
#include "frontend/onnx/onnx_import_expansion.h"

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

// One recurrent node unrolled: its settings read and checked first, then each direction's steps
// written as ONNX nodes through an Expansion, and the outputs Y, Y_h and Y_c named.
class Importer::Recurrence {
 public:
  Recurrence(Importer& im, const onnx::NodeProto& node) : im_(im), node_(node), s_(settings(im, node)), e_(im, node) {}

  // Writes the nodes and imports them.
  void unroll();

 private:
  // What the node's attributes and inputs say.
  struct Settings {
    std::string type;  // RNN, GRU or LSTM
    int gates = 1;     // per step: 4 for LSTM, 3 for GRU, 1 for RNN
    bool batch_first = false;
    int64_t steps = 0;
    int64_t hidden = 0;
    std::string direction;
    int64_t dirs = 1;
    float clip = 0;
    bool input_forget = false;
    bool linear_before_reset = false;
    int per_direction = 1;           // activations per direction: f, g (and h)
    std::vector<std::string> names;  // the activations of every direction
    std::vector<float> alpha, beta;  // their parameters
  };
  // One direction's weights and state while its steps are written ("" is zero).
  struct Direction {
    int64_t d = 0;
    std::string r;                       // Rᵀ
    std::string xw;                      // the input projection of every step [T, N, G·H]
    std::string rb;                      // a GRU's Rb, added to the recurrent projection
    std::string h, c;                    // the hidden (and cell) state
    std::string peep_i, peep_o, peep_f;  // an LSTM's peepholes
  };
  // One step's gate inputs: the input projection `in` [N, G·H] and the recurrent projection h ·
  // Rᵀ (+ Rb for a GRU), "" while h and Rb are zero.
  struct Step {
    std::string in, rec;
  };

  static Settings settings(const Importer& im, const onnx::NodeProto& node);
  // The element-wise function `name` (an ONNX recurrent activation) of x with its alpha and beta.
  std::string activation(const std::string& name, const std::string& x, float a, float b);
  std::string slice(const std::string& x, int64_t axis, int64_t begin, int64_t end);
  std::string squeeze0(const std::string& x) { return e_.unsqueeze("Squeeze", x, {0}); }
  std::string unsqueeze0(const std::string& x) { return e_.unsqueeze("Unsqueeze", x, {0}); }
  std::string clipped(const std::string& x);
  // Activation k of direction d of `v` (clipped first).
  std::string f(int64_t d, int k, const std::string& v);
  // Direction d's weights, biases, initial states and peepholes.
  Direction start(int64_t d, const std::string& x);
  // The initial state of input `slot` [D, N, H] (batch first: [N, D, H]) of direction d; "" is zero.
  std::string initial(int64_t d, int slot);
  // Gate k of the step's input and of its recurrent projection ("" when zero).
  std::string gate(const Step& s, int k) { return slice(s.in, 1, k * s_.hidden, (k + 1) * s_.hidden); }
  std::string rec_gate(const Direction& dir, const Step& s, int k);
  std::string sum(const std::string& a, const std::string& b) { return b.empty() ? a : e_.op("Add", {a, b}); }
  // The state after one step of each kind of layer.
  void gru_step(Direction& dir, const Step& s);
  void lstm_step(Direction& dir, const Step& s);
  // Y, Y_h and Y_c under the node's output names.
  void name_outputs(const std::vector<std::vector<std::string>>& outputs, const std::vector<std::string>& last_h,
                    const std::vector<std::string>& last_c);
  std::string output(int slot) const { return slot < node_.output_size() ? node_.output(slot) : std::string(); }

  Importer& im_;
  const onnx::NodeProto& node_;
  const Settings s_;
  Expansion e_;  // made once the settings are checked
};

Importer::Recurrence::Settings Importer::Recurrence::settings(const Importer& im, const onnx::NodeProto& node) {
  Settings s;
  const std::string& t = node.op_type();
  s.type = t;
  s.gates = t == "LSTM" ? 4 : t == "GRU" ? 3 : 1;
  const ValueId xv = im.input(node, 0);
  const std::vector<int64_t> xd = dims_of(im.shape(xv));
  if (xd.size() != 3) im.fail(node, cat("the input must be 3-D, got ", im.shape(xv).to_string()));
  s.batch_first = attr_int(node, "layout", 0) != 0;
  s.steps = s.batch_first ? xd[1] : xd[0];
  if (s.steps < 1) im.fail(node, "the sequence is empty");
  s.hidden = attr_int(node, "hidden_size", 0);
  if (s.hidden < 1) im.fail(node, "hidden_size must be given and >= 1");
  s.direction = attr_string(node, "direction").empty() ? "forward" : attr_string(node, "direction");
  if (s.direction != "forward" && s.direction != "reverse" && s.direction != "bidirectional") {
    im.fail(node, cat("direction '", s.direction, "' is not forward, reverse or bidirectional"));
  }
  s.dirs = s.direction == "bidirectional" ? 2 : 1;
  if (im.has_input(node, 4)) {  // sequence_lens: only the full length of every sequence
    const ConstTensor* lens = im.constant(node, 4);
    if (!lens) im.fail(node, "sequence_lens must be a constant (sequences of different lengths are not supported)");
    for (int64_t l : lens->ints()) {
      if (l != s.steps) im.fail(node, cat("sequence_lens ", l, " differs from the sequence length ", s.steps));
    }
  }
  s.clip = attr_float(node, "clip", 0.0f);
  s.input_forget = attr_int(node, "input_forget", 0) != 0;
  s.linear_before_reset = attr_int(node, "linear_before_reset", 0) != 0;
  // The activations: f, g (and h) per direction.
  s.per_direction = t == "LSTM" ? 3 : t == "GRU" ? 2 : 1;
  s.names = attr_strings(node, "activations");
  if (s.names.empty()) {
    for (int64_t d = 0; d < s.dirs; ++d) {
      if (t == "RNN") s.names.push_back("Tanh");
      else s.names.insert(s.names.end(), {"Sigmoid", "Tanh", "Tanh"});
      if (t == "GRU") s.names.pop_back();
    }
  }
  if (static_cast<int64_t>(s.names.size()) != s.per_direction * s.dirs) {
    im.fail(node, cat("activations lists ", s.names.size(), " functions; ", t, " ", s.direction, " takes ",
                      s.per_direction * s.dirs));
  }
  const std::vector<float> alphas = attr_floats(node, "activation_alpha"), betas = attr_floats(node, "activation_beta");
  // The parameter k of the list: given, or the function's default.
  s.alpha.resize(s.names.size());
  s.beta.resize(s.names.size());
  for (size_t k = 0; k < s.names.size(); ++k) {
    s.alpha[k] = k < alphas.size() ? alphas[k] : default_alpha(s.names[k]);
    s.beta[k] = k < betas.size() ? betas[k] : default_beta(s.names[k]);
  }
  return s;
}

std::string Importer::Recurrence::activation(const std::string& name, const std::string& x, float a, float b) {
  if (name == "Sigmoid" || name == "Tanh" || name == "Relu" || name == "Softsign" || name == "Softplus") {
    return e_.op(name.c_str(), {x});
  }
  if (name == "LeakyRelu" || name == "ThresholdedRelu" || name == "Elu") {
    return e_.op(name.c_str(), {x}, {float_attr("alpha", a)});
  }
  if (name == "HardSigmoid") return e_.op("HardSigmoid", {x}, {float_attr("alpha", a), float_attr("beta", b)});
  if (name == "Affine") return e_.op("Add", {e_.op("Mul", {x, e_.scalar(a)}), e_.scalar(b)});
  if (name == "ScaledTanh") return e_.op("Mul", {e_.op("Tanh", {e_.op("Mul", {x, e_.scalar(b)})}), e_.scalar(a)});
  im_.fail(node_, cat("activation '", name, "' is not an ONNX recurrent activation"));
}

std::string Importer::Recurrence::slice(const std::string& x, int64_t axis, int64_t begin, int64_t end) {
  return e_.op("Slice", {x, e_.ints({begin}), e_.ints({end}), e_.ints({axis})});
}

std::string Importer::Recurrence::clipped(const std::string& x) {
  return s_.clip > 0 ? e_.op("Clip", {x, e_.scalar(-s_.clip), e_.scalar(s_.clip)}) : x;
}

std::string Importer::Recurrence::f(int64_t d, int k, const std::string& v) {
  const auto at = static_cast<size_t>(d * s_.per_direction + k);
  return activation(s_.names[at], clipped(v), s_.alpha[at], s_.beta[at]);
}

void Importer::Recurrence::unroll() {
  const std::string x = s_.batch_first ? e_.op("Transpose", {node_.input(0)}, {ints_attr("perm", {1, 0, 2})})
                                       : node_.input(0);
  std::vector<std::vector<std::string>> outputs(static_cast<size_t>(s_.steps));  // Y per step and direction
  std::vector<std::string> last_h, last_c;
  for (int64_t d = 0; d < s_.dirs; ++d) {
    const bool reverse = s_.direction == "reverse" || d == 1;
    Direction dir = start(d, x);
    for (int64_t s = 0; s < s_.steps; ++s) {
      const int64_t step = reverse ? s_.steps - 1 - s : s;
      Step st;
      st.in = squeeze0(slice(dir.xw, 0, step, step + 1));  // [N, G·H]
      st.rec = dir.h.empty() ? "" : dir.rb.empty() ? e_.op("MatMul", {dir.h, dir.r})
                                                   : e_.op("Add", {e_.op("MatMul", {dir.h, dir.r}), dir.rb});
      if (s_.type == "RNN") {
        dir.h = f(d, 0, sum(st.in, st.rec));
      } else if (s_.type == "GRU") {
        gru_step(dir, st);
      } else {
        lstm_step(dir, st);
      }
      outputs[static_cast<size_t>(step)].push_back(dir.h);  // [N, H]
    }
    last_h.push_back(dir.h);
    if (s_.type == "LSTM") last_c.push_back(dir.c);
  }
  name_outputs(outputs, last_h, last_c);
  e_.finish();
}

Importer::Recurrence::Direction Importer::Recurrence::start(int64_t d, const std::string& x) {
  Direction dir;
  dir.d = d;
  // W [G·H, in] and R [G·H, H] of this direction, transposed for x · Wᵀ.
  const std::string w = e_.op("Transpose", {squeeze0(slice(node_.input(1), 0, d, d + 1))}, {ints_attr("perm", {1, 0})});
  dir.r = e_.op("Transpose", {squeeze0(slice(node_.input(2), 0, d, d + 1))}, {ints_attr("perm", {1, 0})});
  // The input projection of every step at once, with Wb (and Rb except a GRU's).
  dir.xw = e_.op("MatMul", {x, w});  // [T, N, G·H]
  if (im_.has_input(node_, 3)) {  // biases as [1, G·H] rows (broadcast over the batch)
    const std::string b = slice(node_.input(3), 0, d, d + 1);  // [1, 2·G·H]
    const int64_t gh = s_.gates * s_.hidden;
    const std::string wb = slice(b, 1, 0, gh), rbias = slice(b, 1, gh, 2 * gh);
    if (s_.type == "GRU") {
      dir.xw = e_.op("Add", {dir.xw, wb});
      dir.rb = rbias;
    } else {
      dir.xw = e_.op("Add", {dir.xw, e_.op("Add", {wb, rbias})});
    }
  }
  dir.h = initial(d, 5);
  dir.c = s_.type == "LSTM" ? initial(d, 6) : "";
  if (s_.type == "LSTM" && im_.has_input(node_, 7)) {
    const std::string p = slice(node_.input(7), 0, d, d + 1);  // [1, 3·H]: i, o, f
    dir.peep_i = slice(p, 1, 0, s_.hidden);
    dir.peep_o = slice(p, 1, s_.hidden, 2 * s_.hidden);
    dir.peep_f = slice(p, 1, 2 * s_.hidden, 3 * s_.hidden);
  }
  return dir;
}

std::string Importer::Recurrence::initial(int64_t d, int slot) {
  if (!im_.has_input(node_, slot)) return std::string();
  const std::string v = s_.batch_first ? e_.op("Transpose", {node_.input(slot)}, {ints_attr("perm", {1, 0, 2})})
                                       : node_.input(slot);
  return squeeze0(slice(v, 0, d, d + 1));
}

std::string Importer::Recurrence::rec_gate(const Direction& dir, const Step& s, int k) {
  if (!s.rec.empty()) return slice(s.rec, 1, k * s_.hidden, (k + 1) * s_.hidden);
  return dir.rb.empty() ? std::string() : slice(dir.rb, 1, k * s_.hidden, (k + 1) * s_.hidden);
}

void Importer::Recurrence::gru_step(Direction& dir, const Step& s) {
  const int64_t hidden = s_.hidden;
  const std::string z = f(dir.d, 0, sum(gate(s, 0), rec_gate(dir, s, 0)));
  const std::string rg = f(dir.d, 0, sum(gate(s, 1), rec_gate(dir, s, 1)));
  std::string hh;  // the candidate's recurrent part
  if (s_.linear_before_reset) {  // r ⊙ (h · Rhᵀ + Rbh)
    if (const std::string g = rec_gate(dir, s, 2); !g.empty()) hh = e_.op("Mul", {rg, g});
  } else if (!dir.h.empty()) {  // (r ⊙ h) · Rhᵀ + Rbh
    hh = e_.op("MatMul", {e_.op("Mul", {rg, dir.h}), slice(dir.r, 1, 2 * hidden, 3 * hidden)});
    if (!dir.rb.empty()) hh = e_.op("Add", {hh, slice(dir.rb, 1, 2 * hidden, 3 * hidden)});
  } else {
    hh = rec_gate(dir, s, 2);  // h zero: Rbh
  }
  const std::string cand = f(dir.d, 1, sum(gate(s, 2), hh));
  // H = (1 - z) ⊙ ĥ + z ⊙ H(t-1) = ĥ + z ⊙ (H(t-1) - ĥ)
  dir.h = e_.op("Add", {cand, e_.op("Mul", {z, dir.h.empty() ? e_.op("Neg", {cand}) : e_.op("Sub", {dir.h, cand})})});
}

void Importer::Recurrence::lstm_step(Direction& dir, const Step& s) {
  std::string pre_i = sum(gate(s, 0), rec_gate(dir, s, 0));
  std::string pre_f = sum(gate(s, 2), rec_gate(dir, s, 2));
  if (!dir.c.empty() && !dir.peep_i.empty()) {
    pre_i = e_.op("Add", {pre_i, e_.op("Mul", {dir.c, dir.peep_i})});
    pre_f = e_.op("Add", {pre_f, e_.op("Mul", {dir.c, dir.peep_f})});
  }
  const std::string ig = f(dir.d, 0, pre_i);
  const std::string fg = s_.input_forget ? e_.op("Sub", {e_.scalar(1.0f), ig}) : f(dir.d, 0, pre_f);
  const std::string cand = f(dir.d, 1, sum(gate(s, 3), rec_gate(dir, s, 3)));
  const std::string kept = e_.op("Mul", {ig, cand});
  dir.c = dir.c.empty() ? kept : e_.op("Add", {e_.op("Mul", {fg, dir.c}), kept});
  std::string pre_o = sum(gate(s, 1), rec_gate(dir, s, 1));
  if (!dir.peep_o.empty()) pre_o = e_.op("Add", {pre_o, e_.op("Mul", {dir.c, dir.peep_o})});
  dir.h = e_.op("Mul", {f(dir.d, 0, pre_o), f(dir.d, 2, dir.c)});
}

void Importer::Recurrence::name_outputs(const std::vector<std::vector<std::string>>& outputs,
                                        const std::vector<std::string>& last_h, const std::vector<std::string>& last_c) {
  // Y [T, D, N, H] (batch first: [N, T, D, H]); Y_h, Y_c [D, N, H] ([N, D, H]); the last op of
  // each writes the output's name.
  const auto stacked = [&](const std::vector<std::string>& parts, const std::string& name) {  // along a new axis 0
    if (parts.size() == 1) return e_.unsqueeze("Unsqueeze", parts[0], {0}, name);
    std::vector<std::string> each;
    for (const auto& p : parts) each.push_back(unsqueeze0(p));
    return e_.op("Concat", each, {int_attr("axis", 0)}, name);
  };
  const auto named = [&](const std::vector<std::string>& parts, const std::vector<int64_t>& perm, int slot) {
    if (output(slot).empty()) return;
    if (!s_.batch_first) {
      stacked(parts, output(slot));
      return;
    }
    e_.op("Transpose", {stacked(parts, "")}, {ints_attr("perm", perm)}, output(slot));
  };
  if (!output(0).empty()) {
    std::vector<std::string> rows;  // [D, N, H] per step
    for (const auto& per_step : outputs) rows.push_back(stacked(per_step, ""));
    named(rows, {2, 0, 1, 3}, 0);
  }
  named(last_h, {1, 0, 2}, 1);
  if (s_.type == "LSTM") named(last_c, {1, 0, 2}, 2);
}

void Importer::recurrent(const onnx::NodeProto& node) { Recurrence(*this, node).unroll(); }

}  // namespace stagecraft::graph::onnx_import
