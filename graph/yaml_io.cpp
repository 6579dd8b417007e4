// Graph YAML reader and writer. Attribute fields are handled generically through each attribute
// struct's fields() list: the writer emits optional fields only when they differ from the default,
// the reader rejects unknown fields and checks types, with file:line:column in every message.
#include "graph/yaml_io.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <queue>
#include <variant>

#include "common/files.h"
#include "common/hash.h"
#include "common/strings.h"
#include "graph/errors.h"

namespace stagecraft::graph {

namespace {

constexpr const char* kFormatName = "stagecraft-graph";
constexpr int kFormatVersion = 1;

// ---- Generic attribute field access ------------------------------------------------------------

using FieldPtr = std::variant<int64_t*, bool*, double*, Activation*, BinaryOp*, UnaryFn*, Hw*, Pads*,
                              std::vector<int64_t>*, std::vector<double>*>;

struct Field {
  const char* name;
  FieldPtr ptr;
  FieldRule rule;
};

// Lists the fields of whatever attribute struct `attrs` holds.
std::vector<Field> fields_of(OpAttrs& attrs) {
  std::vector<Field> result;
  std::visit(
      [&](auto& a) {
        using A = std::decay_t<decltype(a)>;
        A::fields(a, [&](const char* name, auto& value, FieldRule rule) {
          result.push_back(Field{name, FieldPtr(&value), rule});
        });
      },
      attrs);
  return result;
}

std::string format_double(double value) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, end);
  // Keep a decimal point so the value reads back as a float in any YAML tool.
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

void emit_int_list(YAML::Emitter& out, std::initializer_list<int64_t> values) {
  out << YAML::Flow << YAML::BeginSeq;
  for (int64_t v : values) out << v;
  out << YAML::EndSeq;
}

void emit_field(YAML::Emitter& out, const FieldPtr& ptr) {
  std::visit(
      [&](auto* p) {
        using T = std::decay_t<decltype(*p)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          out << *p;
        } else if constexpr (std::is_same_v<T, bool>) {
          out << (*p ? "true" : "false");
        } else if constexpr (std::is_same_v<T, double>) {
          out << format_double(*p);
        } else if constexpr (std::is_same_v<T, Activation> || std::is_same_v<T, BinaryOp> ||
                             std::is_same_v<T, UnaryFn>) {
          out << std::string(to_string(*p));
        } else if constexpr (std::is_same_v<T, Hw>) {
          if (p->h == p->w) out << p->h;
          else emit_int_list(out, {p->h, p->w});
        } else if constexpr (std::is_same_v<T, Pads>) {
          if (*p == Pads::same(p->top)) out << p->top;
          else if (*p == Pads::symmetric(p->top, p->left)) emit_int_list(out, {p->top, p->left});
          else emit_int_list(out, {p->top, p->left, p->bottom, p->right});
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          out << YAML::Flow << YAML::BeginSeq;
          for (double v : *p) out << format_double(v);
          out << YAML::EndSeq;
        } else {
          out << YAML::Flow << YAML::BeginSeq;
          for (int64_t v : *p) out << v;
          out << YAML::EndSeq;
        }
      },
      ptr);
}

bool field_equal(const FieldPtr& a, const FieldPtr& b) {
  return std::visit(
      [&](auto* pa) {
        using P = decltype(pa);
        return *pa == *std::get<P>(b);
      },
      a);
}

void emit_shape(YAML::Emitter& out, const Shape& shape) {
  out << YAML::Flow << YAML::BeginSeq;
  for (int64_t d : shape.dims()) out << d;
  out << YAML::EndSeq;
}

// ---- Reading -------------------------------------------------------------------------------

// Produces "source:line:column: " prefixes for nodes.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  std::string where(const YAML::Node& node) const {
    const YAML::Mark mark = node.Mark();
    if (mark.is_null()) return source_ + ": ";
    return cat(source_, ":", mark.line + 1, ":", mark.column + 1, ": ");
  }

  [[noreturn]] void fail(const YAML::Node& node, const std::string& message) const {
    throw FormatError(where(node) + message);
  }

  const std::string& source() const { return source_; }

  std::string scalar(const YAML::Node& node, const std::string& what) const {
    if (!node.IsScalar()) fail(node, cat(what, " must be a scalar"));
    return node.Scalar();
  }

  // A whole scalar parsed as T by std::from_chars, or one line naming what it must be.
  template <class T>
  T parsed(const YAML::Node& node, const std::string& what, const char* must_be) const {
    const std::string text = scalar(node, what);
    T value{};
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) {
      fail(node, cat(what, " must be ", must_be, ", got '", text, "'"));
    }
    return value;
  }

  int64_t integer(const YAML::Node& node, const std::string& what) const {
    return parsed<int64_t>(node, what, "an integer");
  }

  double real(const YAML::Node& node, const std::string& what) const {
    return parsed<double>(node, what, "a number");
  }

  bool boolean(const YAML::Node& node, const std::string& what) const {
    const std::string text = scalar(node, what);
    if (text == "true") return true;
    if (text == "false") return false;
    fail(node, cat(what, " must be true or false, got '", text, "'"));
  }

  // The value of the enum E that `name` (read from `node`) names: `parse` looks it up; an unknown
  // name fails at `node` with the known ones (`names`), `what` and `kind` saying what was read.
  template <class E>
  E named(const YAML::Node& node, const std::string& name, const std::string& what,
          const char* kind, std::optional<E> (*parse)(std::string_view),
          std::vector<std::string> (*names)()) const {
    const std::optional<E> value = parse(name);
    if (!value) {
      fail(node, cat(what, ": unknown ", kind, " '", name, "' (known: ", join(names(), ", "), ")"));
    }
    return *value;
  }

  std::vector<int64_t> integers(const YAML::Node& node, const std::string& what) const {
    if (!node.IsSequence()) fail(node, cat(what, " must be a list of integers"));
    std::vector<int64_t> values;
    for (const auto& item : node) values.push_back(integer(item, what));
    return values;
  }

  void read_field(const YAML::Node& node, const Field& field, const std::string& what) const {
    std::visit(
        [&](auto* p) {
          using T = std::decay_t<decltype(*p)>;
          if constexpr (std::is_same_v<T, int64_t>) {
            *p = integer(node, what);
          } else if constexpr (std::is_same_v<T, bool>) {
            *p = boolean(node, what);
          } else if constexpr (std::is_same_v<T, double>) {
            *p = real(node, what);
          } else if constexpr (std::is_same_v<T, Activation>) {
            *p = named(node, scalar(node, what), what, "activation", parse_activation,
                       activation_names);
          } else if constexpr (std::is_same_v<T, BinaryOp>) {
            *p = named(node, scalar(node, what), what, "binary operation", parse_binary_op,
                       binary_op_names);
          } else if constexpr (std::is_same_v<T, UnaryFn>) {
            *p = named(node, scalar(node, what), what, "unary function", parse_unary_fn, unary_fn_names);
          } else if constexpr (std::is_same_v<T, Hw>) {
            if (node.IsScalar()) {
              *p = Hw::square(integer(node, what));
            } else {
              const auto v = integers(node, what);
              if (v.size() != 2) fail(node, cat(what, " must be one integer or [h, w]"));
              *p = Hw{v[0], v[1]};
            }
          } else if constexpr (std::is_same_v<T, Pads>) {
            if (node.IsScalar()) {
              *p = Pads::same(integer(node, what));
            } else {
              const auto v = integers(node, what);
              if (v.size() == 2) *p = Pads::symmetric(v[0], v[1]);
              else if (v.size() == 4) *p = Pads{v[0], v[1], v[2], v[3]};
              else fail(node, cat(what, " must be one integer, [h, w] or [top, left, bottom, right]"));
            }
          } else if constexpr (std::is_same_v<T, std::vector<double>>) {
            if (!node.IsSequence()) fail(node, cat(what, " must be a list of numbers"));
            p->clear();
            for (const auto& item : node) p->push_back(real(item, what));
          } else {
            *p = integers(node, what);
          }
        },
        field.ptr);
  }

  Shape shape(const YAML::Node& node, const std::string& what) const {
    return Shape(integers(node, what));
  }

 private:
  std::string source_;
};

// An op as read from the file, before it is added to the graph.
struct OpEntry {
  YAML::Node node;
  std::string name;
  OpKind kind;
  OpAttrs attrs;
  std::vector<std::string> inputs;
  std::vector<YAML::Node> input_nodes;
  std::vector<Shape> declared;  // declared output shapes, empty when absent
};

const char* const kReservedOpKeys[] = {"name", "kind", "inputs", "shape", "shapes"};

OpEntry read_op(const Reader& r, const YAML::Node& node, size_t index) {
  if (!node.IsMap()) r.fail(node, cat("ops[", index, "] must be a map"));
  OpEntry e;
  e.node = node;
  if (!node["name"]) r.fail(node, cat("ops[", index, "]: missing field 'name'"));
  e.name = r.scalar(node["name"], cat("ops[", index, "].name"));
  const std::string context = cat("op '", e.name, "'");
  if (!node["kind"]) r.fail(node, cat(context, ": missing field 'kind'"));
  const std::string kind_name = r.scalar(node["kind"], context + ": kind");
  const auto kind = parse_op_kind(kind_name);
  if (!kind) {
    const std::string guess = closest_match(kind_name, op_kind_names());
    r.fail(node["kind"], cat(context, ": unknown op kind '", kind_name, "'",
                             guess.empty() ? "" : cat(" (did you mean '", guess, "'?)"),
                             "; known kinds: ", join(op_kind_names(), ", ")));
  }
  e.kind = *kind;
  const std::string op_context = cat(context, " (", kind_name, ")");
  e.attrs = default_attrs(e.kind);
  std::vector<Field> fields = fields_of(e.attrs);

  if (!node["inputs"] || !node["inputs"].IsSequence()) {
    r.fail(node, cat(op_context, ": field 'inputs' must be a list of value names"));
  }
  for (const auto& input : node["inputs"]) {
    e.inputs.push_back(r.scalar(input, op_context + ": inputs"));
    e.input_nodes.push_back(input);
  }

  std::vector<std::string> seen;
  for (const auto& item : node) {
    const std::string key = item.first.as<std::string>();
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      r.fail(item.first, cat(op_context, ": field '", key, "' appears twice"));
    }
    seen.push_back(key);
    if (std::find(std::begin(kReservedOpKeys), std::end(kReservedOpKeys), key) !=
        std::end(kReservedOpKeys)) {
      continue;
    }
    auto field = std::find_if(fields.begin(), fields.end(),
                              [&](const Field& f) { return key == f.name; });
    if (field == fields.end()) {
      std::vector<std::string> known;
      for (const Field& f : fields) known.emplace_back(f.name);
      const std::string guess = closest_match(key, known);
      r.fail(item.first,
             cat(op_context, ": unknown attribute '", key, "'",
                 guess.empty() ? "" : cat(" (did you mean '", guess, "'?)"), "; ", kind_name,
                 known.empty() ? " takes no attributes" : cat(" takes: ", join(known, ", "))));
    }
    r.read_field(item.second, *field, cat(op_context, ": field '", key, "'"));
  }
  for (const Field& f : fields) {
    if (f.rule == FieldRule::kRequired && !node[f.name]) {
      r.fail(node, cat(op_context, ": missing required attribute '", f.name, "'"));
    }
  }
  if (node["shape"]) e.declared.push_back(r.shape(node["shape"], op_context + ": shape"));
  if (node["shapes"]) {
    if (!node["shapes"].IsSequence()) r.fail(node["shapes"], op_context + ": shapes must be a list");
    for (const auto& s : node["shapes"]) e.declared.push_back(r.shape(s, op_context + ": shapes"));
  }
  return e;
}

// Splits "op:3" into ("op", 3); a plain name gives index -1.
std::pair<std::string, int> split_ref(const std::string& ref) {
  const auto colon = ref.rfind(':');
  if (colon == std::string::npos) return {ref, -1};
  int index = -1;
  const std::string digits = ref.substr(colon + 1);
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty()) return {ref, -1};
  return {ref.substr(0, colon), index};
}

// Orders ops so that each comes after the producers of its inputs, keeping file order where
// possible; reports dangling inputs and cycles.
std::vector<size_t> order_ops(const Reader& r, const std::vector<OpEntry>& ops,
                              const std::map<std::string, size_t>& op_index,
                              const std::map<std::string, YAML::Node>& graph_inputs) {
  const size_t n = ops.size();
  std::vector<std::vector<size_t>> readers(n);
  std::vector<size_t> waiting(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < ops[i].inputs.size(); ++k) {
      const std::string& ref = ops[i].inputs[k];
      if (graph_inputs.count(ref)) continue;
      const auto [base, index] = split_ref(ref);
      auto it = op_index.find(base);
      if (it == op_index.end()) it = op_index.find(ref);
      if (it == op_index.end()) {
        r.fail(ops[i].input_nodes[k],
               cat("op '", ops[i].name, "' (", to_string(ops[i].kind), "): input '", ref,
                   "' is dangling: no op produces it and it is not a graph input"));
      }
      readers[it->second].push_back(i);
      ++waiting[i];
    }
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < n; ++i)
    if (waiting[i] == 0) ready.push(i);
  std::vector<size_t> order;
  while (!ready.empty()) {
    const size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t j : readers[i])
      if (--waiting[j] == 0) ready.push(j);
  }
  if (order.size() == n) return order;

  // Walk back along unresolved inputs until an op repeats: that is a cycle.
  size_t start = 0;
  while (waiting[start] == 0) ++start;
  std::vector<size_t> path{start};
  std::vector<int> position(n, -1);
  position[start] = 0;
  for (;;) {
    const OpEntry& e = ops[path.back()];
    size_t next = n;
    for (const std::string& ref : e.inputs) {
      if (graph_inputs.count(ref)) continue;
      auto it = op_index.find(split_ref(ref).first);
      if (it == op_index.end()) it = op_index.find(ref);
      if (waiting[it->second] > 0) {
        next = it->second;
        break;
      }
    }
    if (position[next] >= 0) {
      std::vector<std::string> names;
      for (size_t k = position[next]; k < path.size(); ++k) names.push_back(ops[path[k]].name);
      std::reverse(names.begin(), names.end());
      names.push_back(names.front());
      r.fail(ops[next].node, cat("the graph has a cycle: ", join(names, " -> "),
                                 " (each op must only read values of ops before it)"));
    }
    position[next] = static_cast<int>(path.size());
    path.push_back(next);
  }
}

void check_top_level(const Reader& r, const YAML::Node& root) {
  static const char* const kKeys[] = {"format", "version", "name", "inputs", "ops", "outputs"};
  for (const auto& item : root) {
    const std::string key = item.first.as<std::string>();
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) {
      r.fail(item.first, cat("unknown top-level field '", key, "' (known: ",
                             join(std::vector<std::string>(std::begin(kKeys), std::end(kKeys)), ", "),
                             ")"));
    }
  }
  if (!root["format"] || r.scalar(root["format"], "format") != kFormatName) {
    r.fail(root, cat("not a graph file: field 'format' must be '", kFormatName, "'"));
  }
  if (!root["version"] || r.integer(root["version"], "version") != kFormatVersion) {
    r.fail(root["version"] ? root["version"] : root,
           cat("unsupported graph file version (this build reads version ", kFormatVersion, ")"));
  }
  for (const char* key : {"inputs", "ops", "outputs"}) {
    if (!root[key] || !root[key].IsSequence()) r.fail(root, cat("field '", key, "' must be a list"));
  }
}

Graph build_graph(const Reader& r, const YAML::Node& root);

}  // namespace

std::string graph_to_yaml(const Graph& graph) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "format" << YAML::Value << kFormatName;
  out << YAML::Key << "version" << YAML::Value << kFormatVersion;
  out << YAML::Key << "name" << YAML::Value << graph.name();
  out << YAML::Key << "inputs" << YAML::Value << YAML::BeginSeq;
  for (ValueId v : graph.inputs()) {
    const Value& value = graph.value(v);
    out << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << value.name;
    out << YAML::Key << "shape" << YAML::Value;
    emit_shape(out, value.desc.shape);
    out << YAML::Key << "dtype" << YAML::Value << std::string(to_string(value.desc.dtype));
    if (value.desc.layout != default_layout(value.desc.shape.rank())) {
      out << YAML::Key << "layout" << YAML::Value << std::string(to_string(value.desc.layout));
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;

  out << YAML::Key << "ops" << YAML::Value << YAML::BeginSeq;
  for (const Op& op : graph.ops()) {
    out << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << op.name;
    out << YAML::Key << "kind" << YAML::Value << std::string(to_string(op.kind));
    out << YAML::Key << "inputs" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (ValueId v : op.inputs) out << graph.value(v).name;
    out << YAML::EndSeq;
    OpAttrs attrs = op.attrs;
    OpAttrs defaults = default_attrs(op.kind);
    const std::vector<Field> fields = fields_of(attrs);
    const std::vector<Field> default_fields = fields_of(defaults);
    for (size_t i = 0; i < fields.size(); ++i) {
      if (fields[i].rule == FieldRule::kOptional && field_equal(fields[i].ptr, default_fields[i].ptr)) {
        continue;
      }
      out << YAML::Key << fields[i].name << YAML::Value;
      emit_field(out, fields[i].ptr);
    }
    if (op.outputs.size() == 1) {
      out << YAML::Key << "shape" << YAML::Value;
      emit_shape(out, graph.value(op.outputs[0]).desc.shape);
    } else {
      out << YAML::Key << "shapes" << YAML::Value << YAML::Flow << YAML::BeginSeq;
      for (ValueId v : op.outputs) emit_shape(out, graph.value(v).desc.shape);
      out << YAML::EndSeq;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;

  out << YAML::Key << "outputs" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (ValueId v : graph.outputs()) out << graph.value(v).name;
  out << YAML::EndSeq;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

Graph graph_from_yaml(const std::string& text, const std::string& source) {
  try {
    return build_graph(Reader(source), YAML::Load(text));
  } catch (const YAML::Exception& e) {
    // Malformed YAML, or a node of an unexpected type deep inside (a map used as a key, say).
    throw FormatError(cat(source, ":", e.mark.line + 1, ":", e.mark.column + 1,
                          ": not valid for a graph file: ", e.msg));
  }
}

namespace {

Graph build_graph(const Reader& r, const YAML::Node& root) {
  if (!root.IsMap()) r.fail(root, "a graph file must be a YAML map (format, version, name, ...)");
  check_top_level(r, root);

  Graph graph(root["name"] ? r.scalar(root["name"], "name") : std::string("graph"));
  std::map<std::string, YAML::Node> graph_inputs;
  for (const auto& node : root["inputs"]) {
    if (!node.IsMap() || !node["name"] || !node["shape"]) {
      r.fail(node, "each input must be a map with 'name' and 'shape'");
    }
    const std::string name = r.scalar(node["name"], "input name");
    TensorDesc desc = make_desc(r.shape(node["shape"], cat("input '", name, "': shape")));
    const std::string input = cat("input '", name, "'");
    if (node["dtype"]) {
      desc.dtype = r.named(node["dtype"], r.scalar(node["dtype"], "dtype"), input, "dtype",
                           parse_data_type, data_type_names);
    }
    if (node["layout"]) {
      desc.layout = r.named(node["layout"], r.scalar(node["layout"], "layout"), input, "layout",
                            parse_layout, layout_names);
    }
    try {
      graph.add_input(name, desc);
    } catch (Error& e) {
      e.prepend(r.where(node));
      throw;
    }
    graph_inputs.emplace(name, node);
  }

  std::vector<OpEntry> ops;
  std::map<std::string, size_t> op_index;
  size_t index = 0;
  for (const auto& node : root["ops"]) {
    OpEntry entry = read_op(r, node, index++);
    if (op_index.count(entry.name) || graph_inputs.count(entry.name)) {
      r.fail(node, cat("op '", entry.name, "': the name is already used"));
    }
    op_index.emplace(entry.name, ops.size());
    ops.push_back(std::move(entry));
  }

  for (size_t i : order_ops(r, ops, op_index, graph_inputs)) {
    OpEntry& e = ops[i];
    std::vector<ValueId> inputs;
    for (size_t k = 0; k < e.inputs.size(); ++k) {
      const auto value = graph.find_value(e.inputs[k]);
      if (!value) {
        r.fail(e.input_nodes[k], cat("op '", e.name, "' (", to_string(e.kind), "): input '",
                                     e.inputs[k], "' does not name an output of its op"));
      }
      inputs.push_back(*value);
    }
    OpId id;
    try {
      id = graph.add_op(e.name, e.kind, e.attrs, inputs);
    } catch (Error& err) {
      err.prepend(r.where(e.node));
      throw;
    }
    const Op& op = graph.op(id);
    if (!e.declared.empty()) {
      if (e.declared.size() != op.outputs.size()) {
        r.fail(e.node, cat("op '", e.name, "': declares ", e.declared.size(),
                           " output shapes but has ", op.outputs.size(), " outputs"));
      }
      for (size_t k = 0; k < e.declared.size(); ++k) {
        const Shape& inferred = graph.value(op.outputs[k]).desc.shape;
        if (e.declared[k] != inferred) {
          throw ShapeError(cat(r.where(e.node), "op '", e.name, "' (", to_string(e.kind),
                               "): declared shape ", e.declared[k].to_string(),
                               " does not match the inferred shape ", inferred.to_string()));
        }
      }
    }
  }

  for (const auto& node : root["outputs"]) {
    const std::string name = r.scalar(node, "output");
    const auto value = graph.find_value(name);
    if (!value) r.fail(node, cat("output '", name, "' is not a value of the graph"));
    graph.add_output(*value);
  }
  if (graph.outputs().empty()) r.fail(root["outputs"], "the graph must have at least one output");
  return graph;
}

}  // namespace

void save_graph(const Graph& graph, const std::string& path) {
  write_text_file(path, graph_to_yaml(graph));
}

Graph load_graph(const std::string& path) { return graph_from_yaml(read_text_file(path), path); }

std::string graph_hash(const Graph& graph) {
  Fnv1a hasher;
  hasher.add_string(graph_to_yaml(graph));
  return hex64(hasher.digest());
}

}  // namespace stagecraft::graph
