#include "scheduler/schedule_yaml.h"

#include <yaml-cpp/yaml.h>

#include <set>
#include <sstream>

#include "common/files.h"
#include "common/strings.h"
#include "graph/yaml_io.h"
#include "graph/dot.h"
#include "graph/quantize.h"

namespace stagecraft::scheduler {

namespace {

constexpr const char* kFormatName = "stagecraft-schedule";
constexpr int kFormatVersion = 1;

std::string format_ms(double ms) { return fixed(ms, 6); }

void emit_names(YAML::Emitter& out, const graph::Graph& graph, const std::vector<OpId>& ops) {
  out << YAML::Flow << YAML::BeginSeq;
  for (OpId id : ops) out << graph.op(id).name;
  out << YAML::EndSeq;
}

class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}
  [[noreturn]] void fail(const YAML::Node& node, const std::string& message) const {
    const YAML::Mark mark = node.Mark();
    throw ScheduleError(mark.is_null() ? cat(source_, ": ", message)
                                       : cat(source_, ":", mark.line + 1, ":", mark.column + 1,
                                             ": ", message));
  }
  template <class T>
  T get(const YAML::Node& map, const char* key) const {
    const YAML::Node node = map[key];
    if (!node) fail(map, cat("missing field '", key, "'"));
    try {
      return node.as<T>();
    } catch (const YAML::Exception&) {
      fail(node, cat("field '", key, "' has the wrong type"));
    }
  }

 private:
  std::string source_;
};

ScheduleMeta read_meta(const Reader& r, const YAML::Node& root) {
  if (!root.IsMap()) r.fail(root, "a schedule file must be a YAML map");
  if (!root["format"] || root["format"].as<std::string>() != kFormatName) {
    r.fail(root, cat("not a schedule file: field 'format' must be '", kFormatName, "'"));
  }
  if (r.get<int>(root, "version") != kFormatVersion) {
    r.fail(root["version"], cat("unsupported schedule file version (this build reads version ",
                                kFormatVersion, ")"));
  }
  ScheduleMeta meta;
  meta.network = r.get<std::string>(root, "network");
  meta.graph_hash = r.get<std::string>(root, "graph_hash");
  meta.num_ops = r.get<size_t>(root, "ops");
  meta.batch = r.get<int64_t>(root, "batch");
  meta.dtype = r.get<std::string>(root, "dtype");
  meta.device = r.get<std::string>(root, "device");
  meta.cost_model = r.get<std::string>(root, "cost_model");
  const YAML::Node search = root["search"];
  if (!search || !search.IsMap()) r.fail(root, "field 'search' must be a map");
  try {
    meta.search.strategy = parse_strategy(r.get<std::string>(search, "strategy"));
    meta.search.mode = parse_dp_mode(r.get<std::string>(search, "mode"));
  } catch (const UsageError& e) {
    r.fail(search, e.what());
  }
  meta.search.max_group_size = r.get<int>(search, "max_group_size");
  meta.search.max_num_groups = r.get<int>(search, "max_num_groups");
  meta.search.pruned = r.get<bool>(search, "pruned");
  // Written since the bounded search (files from before have none).
  meta.search.budget.seconds = search["budget_s"] ? r.get<double>(search, "budget_s") : 0.0;
  if (search["exhaustive"]) meta.search.budget.exhaustive = r.get<bool>(search, "exhaustive");
  if (search["converged"]) meta.converged = r.get<bool>(search, "converged");
  meta.predicted_ms = r.get<double>(root, "predicted_ms");
  meta.search_seconds = r.get<double>(root, "search_seconds");
  return meta;
}

// Says what differs between the schedule's graph and this one, most useful difference first.
void check_matches(const Reader& r, const YAML::Node& root, const ScheduleMeta& meta,
                   const graph::Graph& graph) {
  const auto& input = graph.value(graph.inputs().at(0)).desc;
  const int64_t batch = input.shape.rank() > 0 ? input.shape[0] : 1;
  if (meta.network != graph.name()) {
    r.fail(root["network"], cat("the schedule is for network '", meta.network,
                                "' but the graph is '", graph.name(), "'"));
  }
  if (meta.batch != batch) {
    r.fail(root["batch"], cat("the schedule is for batch ", meta.batch, " but the graph has batch ",
                              batch, "; schedule the graph again with --batch ", batch));
  }
  if (meta.dtype != graph::compute_type(graph)) {
    r.fail(root["dtype"], cat("the schedule is for dtype ", meta.dtype, " but the graph is ",
                              graph::compute_type(graph), "; schedule it again with --dtype ",
                              graph::compute_type(graph)));
  }
  // Op sets: names in the file that the graph lacks, and graph ops the file lacks.
  std::set<std::string> named;
  for (const auto& stage : root["stages"]) {
    for (const char* key : {"groups", "ops"}) {
      if (!stage[key]) continue;
      for (const auto& item : stage[key]) {
        if (item.IsSequence()) {
          for (const auto& name : item) named.insert(name.as<std::string>());
        } else {
          named.insert(item.as<std::string>());
        }
      }
    }
  }
  std::vector<std::string> unknown, missing;
  for (const auto& name : named)
    if (!graph.find_op(name)) unknown.push_back(name);
  for (const auto& op : graph.ops())
    if (!named.count(op.name)) missing.push_back(op.name);
  auto first = [](const std::vector<std::string>& names) {
    std::vector<std::string> head(names.begin(), names.begin() + std::min<size_t>(3, names.size()));
    return join(head, ", ") + (names.size() > 3 ? ", ..." : "");
  };
  if (!unknown.empty() || !missing.empty()) {
    r.fail(root["stages"],
           cat("the schedule's ops differ from the graph's: ",
               unknown.empty() ? "" : cat(unknown.size(), " op(s) not in the graph (", first(unknown), ")"),
               !unknown.empty() && !missing.empty() ? "; " : "",
               missing.empty() ? "" : cat(missing.size(), " graph op(s) not scheduled (", first(missing), ")")));
  }
  const std::string hash = graph::graph_hash(graph);
  if (meta.graph_hash != hash) {
    r.fail(root["graph_hash"], cat("the graph differs from the one the schedule was made for "
                                   "(graph hash ", hash, ", schedule made for ", meta.graph_hash,
                                   "): an op's attributes, shapes or wiring changed"));
  }
}

OpId op_by_name(const Reader& r, const graph::Graph& graph, const YAML::Node& node) {
  const auto id = graph.find_op(node.as<std::string>());
  if (!id) r.fail(node, cat("op '", node.as<std::string>(), "' is not in the graph"));
  return *id;
}

}  // namespace

// The optional `layout` (a layout name, or "auto" with `layouts`) and `layouts` (per value name)
// fields, as schedule.layouts.
void read_layouts(const Reader& r, const YAML::Node& root, const graph::Graph& graph,
                  Schedule& schedule) {
  if (root["layout"]) {
    const std::string name = r.get<std::string>(root, "layout");
    const auto parsed = graph::parse_layout(name);
    if (name != "auto" && (!parsed || graph::layout_rank(*parsed) != 4)) {
      r.fail(root["layout"], cat("unknown activation layout '", name,
                                 "' (known: nchw, nhwc, nChw8c, nChw16c, auto)"));
    }
    if (parsed) schedule.layouts = graph::LayoutAssignment::uniform(*parsed);
  }
  const YAML::Node layouts = root["layouts"];
  if (!layouts) return;
  if (!layouts.IsMap()) r.fail(layouts, "field 'layouts' must map value names to layouts");
  std::vector<graph::Layout> value_layouts(graph.num_values(), graph::Layout::kNCHW);
  std::vector<bool> given(graph.num_values(), false);
  for (size_t v = 0; v < graph.num_values(); ++v) {
    const graph::Value& value = graph.value(static_cast<graph::ValueId>(v));
    if (!graph::takes_layouts(value.desc) || value.producer == graph::kNoOp) {
      value_layouts[v] = value.desc.layout;
      given[v] = true;
    }
  }
  for (const auto& entry : layouts) {
    const std::string name = entry.first.as<std::string>();
    const auto v = graph.find_value(name);
    if (!v) r.fail(entry.first, cat("'layouts' names value '", name, "', which the graph lacks"));
    const std::string text = entry.second.as<std::string>();
    const auto layout = graph::parse_layout(text);
    if (!layout || graph::layout_rank(*layout) != 4) {
      r.fail(entry.second, cat("value '", name, "': unknown layout '", text,
                               "' (known: nchw, nhwc, nChw8c, nChw16c)"));
    }
    value_layouts[static_cast<size_t>(*v)] = *layout;
    given[static_cast<size_t>(*v)] = true;
  }
  for (size_t v = 0; v < graph.num_values(); ++v) {
    if (!given[v]) {
      r.fail(layouts, cat("'layouts' lacks value '", graph.value(static_cast<graph::ValueId>(v)).name,
                          "'"));
    }
  }
  schedule.layouts = graph::LayoutAssignment::per_value(graph, std::move(value_layouts));
}

std::string schedule_to_yaml(const graph::Graph& graph, const Schedule& schedule) {
  const ScheduleMeta& m = schedule.meta;
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "format" << YAML::Value << kFormatName;
  out << YAML::Key << "version" << YAML::Value << kFormatVersion;
  out << YAML::Key << "network" << YAML::Value << m.network;
  out << YAML::Key << "graph_hash" << YAML::Value << m.graph_hash;
  out << YAML::Key << "ops" << YAML::Value << m.num_ops;
  out << YAML::Key << "batch" << YAML::Value << m.batch;
  out << YAML::Key << "dtype" << YAML::Value << m.dtype;
  out << YAML::Key << "device" << YAML::Value << m.device;
  out << YAML::Key << "cost_model" << YAML::Value << m.cost_model;
  out << YAML::Key << "search" << YAML::Value << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "strategy" << YAML::Value << std::string(to_string(m.search.strategy));
  out << YAML::Key << "mode" << YAML::Value << std::string(to_string(m.search.mode));
  out << YAML::Key << "max_group_size" << YAML::Value << m.search.max_group_size;
  out << YAML::Key << "max_num_groups" << YAML::Value << m.search.max_num_groups;
  out << YAML::Key << "pruned" << YAML::Value << (m.search.pruned ? "true" : "false");
  if (m.search.strategy == Strategy::kDp) {
    out << YAML::Key << "budget_s" << YAML::Value << m.search.budget.seconds;
    out << YAML::Key << "exhaustive" << YAML::Value << (m.search.budget.exhaustive ? "true" : "false");
    out << YAML::Key << "converged" << YAML::Value << (m.converged ? "true" : "false");
  }
  out << YAML::EndMap;
  out << YAML::Key << "predicted_ms" << YAML::Value << format_ms(m.predicted_ms);
  out << YAML::Key << "search_seconds" << YAML::Value << fixed(m.search_seconds, 3);
  const graph::LayoutAssignment& layouts = schedule.layouts;
  if (!layouts.is_backend_default()) out << YAML::Key << "layout" << YAML::Value << layouts.name();
  if (layouts.is_per_value()) {
    // Layouts of the rank-4 op outputs (the ones a plan chooses), by value name.
    const std::vector<graph::Layout>& per_value = layouts.per_value();
    out << YAML::Key << "layouts" << YAML::Value << YAML::BeginMap;
    for (size_t v = 0; v < graph.num_values() && v < per_value.size(); ++v) {
      const graph::Value& value = graph.value(static_cast<graph::ValueId>(v));
      if (value.producer == graph::kNoOp || !graph::takes_layouts(value.desc)) continue;
      out << YAML::Key << value.name << YAML::Value << std::string(graph::to_string(per_value[v]));
    }
    out << YAML::EndMap;
  }
  out << YAML::Key << "stages" << YAML::Value << YAML::BeginSeq;
  for (const Stage& stage : schedule.stages) {
    out << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "kind" << YAML::Value << std::string(to_string(stage.kind));
    if (stage.kind == StageKind::kMerge) {
      out << YAML::Key << "ops" << YAML::Value;
      emit_names(out, graph, stage.ops());
    } else {
      out << YAML::Key << "groups" << YAML::Value << YAML::Flow << YAML::BeginSeq;
      for (const auto& group : stage.groups) emit_names(out, graph, group);
      out << YAML::EndSeq;
    }
    out << YAML::Key << "predicted_ms" << YAML::Value << format_ms(stage.predicted_ms);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

Schedule schedule_from_yaml(const std::string& text, const graph::Graph& graph,
                            const std::string& source) {
  const Reader r(source);
  try {
    const YAML::Node root = YAML::Load(text);
    Schedule schedule;
    schedule.meta = read_meta(r, root);
    if (!root["stages"] || !root["stages"].IsSequence()) r.fail(root, "field 'stages' must be a list");
    check_matches(r, root, schedule.meta, graph);
    for (const auto& node : root["stages"]) {
      if (!node.IsMap()) r.fail(node, "each stage must be a map");
      const std::string kind = r.get<std::string>(node, "kind");
      Stage stage;
      if (kind == "merge") {
        const YAML::Node ops = node["ops"];
        if (!ops || !ops.IsSequence()) r.fail(node, "a merge stage needs a list 'ops'");
        std::vector<OpId> convs;
        for (const auto& name : ops) convs.push_back(op_by_name(r, graph, name));
        stage = Stage::merge(convs);
      } else if (kind == "concurrent") {
        const YAML::Node groups = node["groups"];
        if (!groups || !groups.IsSequence()) {
          r.fail(node, "a concurrent stage needs a list of groups 'groups'");
        }
        for (const auto& group : groups) {
          if (!group.IsSequence()) r.fail(group, "each group must be a list of op names");
          stage.groups.emplace_back();
          for (const auto& name : group) stage.groups.back().push_back(op_by_name(r, graph, name));
        }
      } else {
        r.fail(node["kind"], cat("unknown stage kind '", kind, "' (known: concurrent, merge)"));
      }
      if (node["predicted_ms"]) stage.predicted_ms = r.get<double>(node, "predicted_ms");
      schedule.stages.push_back(std::move(stage));
    }
    read_layouts(r, root, graph, schedule);
    try {
      validate(graph, schedule);
    } catch (ScheduleError& e) {
      e.prepend(source + ": ");
      throw;
    }
    return schedule;
  } catch (const YAML::Exception& e) {
    throw ScheduleError(cat(source, ":", e.mark.line + 1, ":", e.mark.column + 1,
                            ": not a valid schedule file: ", e.msg));
  }
}

void save_schedule(const graph::Graph& graph, const Schedule& schedule, const std::string& path) {
  const std::string text = schedule_to_yaml(graph, schedule);
  write_text_file(path, text);
}

Schedule load_schedule(const std::string& path, const graph::Graph& graph) {
  return schedule_from_yaml(read_text_file(path), graph, path);
}

ScheduleMeta read_schedule_meta(const std::string& path, std::string* layout) {
  const std::string text = read_text_file(path);
  const Reader r(path);
  try {
    const YAML::Node root = YAML::Load(text);
    if (layout) *layout = root["layout"] ? r.get<std::string>(root, "layout") : std::string();
    return read_meta(r, root);
  } catch (const YAML::Exception& e) {
    throw ScheduleError(cat(path, ":", e.mark.line + 1, ":", e.mark.column + 1,
                            ": not a valid schedule file: ", e.msg));
  }
}

std::string schedule_to_dot(const graph::Graph& graph, const Schedule& schedule) {
  static const char* const kGroupColors[] = {"#9ecae1", "#fdae6b", "#a1d99b", "#bcbddc",
                                             "#fc9272", "#c7e9c0", "#fdd0a2", "#dadaeb"};
  std::ostringstream out;
  out << "digraph \"" << graph::dot_escape(graph.name()) << "\" {\n  rankdir=TB;\n"
      << "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n";
  for (size_t s = 0; s < schedule.stages.size(); ++s) {
    const Stage& stage = schedule.stages[s];
    out << "  subgraph cluster_stage" << s << " {\n    label=\"stage " << s + 1 << ": "
        << to_string(stage.kind) << ", " << fixed(stage.predicted_ms, 3)
        << " ms\";\n    style=dashed;\n";
    for (size_t g = 0; g < stage.groups.size(); ++g) {
      const char* color = stage.kind == StageKind::kMerge
                              ? "#fee391"
                              : kGroupColors[g % (sizeof(kGroupColors) / sizeof(*kGroupColors))];
      for (OpId id : stage.groups[g]) {
        const graph::Op& op = graph.op(id);
        out << "    \"op" << id << "\" [label=\"" << graph::dot_escape(op.name) << "\\n"
            << graph::to_string(op.kind) << "\", fillcolor=\"" << color << "\"];\n";
      }
    }
    out << "  }\n";
  }
  for (const auto& op : graph.ops()) {
    for (OpId p : graph.predecessors(op.id)) out << "  \"op" << p << "\" -> \"op" << op.id << "\";\n";
  }
  out << "}\n";
  return out.str();
}

}  // namespace stagecraft::scheduler
