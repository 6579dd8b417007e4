#include "scheduler/schedule.h"

#include <algorithm>
#include <cassert>

#include "common/strings.h"
#include "graph/quantize.h"
#include "graph/yaml_io.h"

namespace stagecraft::scheduler {

using graph::Conv2dAttrs;
using graph::OpKind;

std::string_view to_string(StageKind kind) {
  return kind == StageKind::kMerge ? "merge" : "concurrent";
}

Stage Stage::concurrent(std::vector<std::vector<OpId>> groups) {
  Stage stage;
  stage.kind = StageKind::kConcurrent;
  stage.groups = std::move(groups);
  return stage;
}

Schedule sequential_schedule(const graph::Graph& graph) {
  Schedule s;
  for (OpId id : graph.topological_order()) s.stages.push_back(Stage::concurrent({{id}}));
  return s;
}

Stage Stage::merge(const std::vector<OpId>& convs) {
  Stage stage;
  stage.kind = StageKind::kMerge;
  for (OpId id : convs) stage.groups.push_back({id});
  return stage;
}

std::vector<OpId> Stage::ops() const {
  std::vector<OpId> result;
  for (const auto& group : groups) result.insert(result.end(), group.begin(), group.end());
  return result;
}

size_t Stage::num_ops() const {
  size_t n = 0;
  for (const auto& group : groups) n += group.size();
  return n;
}

namespace {

// Padding offset of a kernel of size k centred in one of size big: both sides must agree.
bool centred(int64_t k, int64_t big, int64_t pad_begin, int64_t pad_end, int64_t big_begin,
             int64_t big_end) {
  if ((big - k) % 2 != 0) return false;
  const int64_t shift = (big - k) / 2;
  return pad_begin + shift == big_begin && pad_end + shift == big_end;
}

}  // namespace

std::string merge_conflict(const graph::Graph& graph, OpId a, OpId b) {
  const auto& oa = graph.op(a);
  const auto& ob = graph.op(b);
  for (const auto* op : {&oa, &ob}) {
    if (op->kind != OpKind::kConv2d) return cat("op '", op->name, "' is not a convolution");
    if (op->attrs_as<Conv2dAttrs>().groups != 1) {
      return cat("op '", op->name, "' is a grouped convolution (groups must be 1)");
    }
    if (op->attrs_as<Conv2dAttrs>().residual) {
      return cat("op '", op->name, "' adds a residual (a merged convolution takes none)");
    }
  }
  const auto& ca = oa.attrs_as<Conv2dAttrs>();
  const auto& cb = ob.attrs_as<Conv2dAttrs>();
  if (oa.inputs[0] != ob.inputs[0]) {
    return cat("'", oa.name, "' and '", ob.name, "' read different values");
  }
  if (ca.stride != cb.stride) return cat("'", oa.name, "' and '", ob.name, "' differ in stride");
  if (ca.dilation != cb.dilation) {
    return cat("'", oa.name, "' and '", ob.name, "' differ in dilation");
  }
  if (ca.activation != cb.activation) {
    return cat("'", oa.name, "' and '", ob.name, "' differ in fused activation");
  }
  const graph::TensorDesc& da = graph.value(oa.outputs[0]).desc;
  const graph::TensorDesc& db = graph.value(ob.outputs[0]).desc;
  if (da.dtype != db.dtype) {
    return cat("'", oa.name, "' and '", ob.name, "' write different element types (",
               graph::to_string(da.dtype), ", ", graph::to_string(db.dtype), ")");
  }
  // A quantised ReLU6 clips at 6 / scale: one bound for the merged output needs one scale.
  if (graph::is_int8(da.dtype) && ca.activation == graph::Activation::kRelu6 && da.scale != db.scale) {
    return cat("'", oa.name, "' and '", ob.name, "' are quantised ReLU6 convolutions with different "
               "output scales");
  }
  const auto& sa = da.shape;
  const auto& sb = db.shape;
  if (sa[2] != sb[2] || sa[3] != sb[3]) {
    return cat("'", oa.name, "' and '", ob.name, "' differ in output size");
  }
  const int64_t kh = std::max(ca.kernel.h, cb.kernel.h);
  const int64_t kw = std::max(ca.kernel.w, cb.kernel.w);
  // Each must sit centred in the larger kernel with the same resulting padding.
  const Conv2dAttrs& big_h = ca.kernel.h >= cb.kernel.h ? ca : cb;
  const Conv2dAttrs& big_w = ca.kernel.w >= cb.kernel.w ? ca : cb;
  for (const Conv2dAttrs* c : {&ca, &cb}) {
    if (!centred(c->kernel.h, kh, c->padding.top, c->padding.bottom, big_h.padding.top,
                 big_h.padding.bottom) ||
        !centred(c->kernel.w, kw, c->padding.left, c->padding.right, big_w.padding.left,
                 big_w.padding.right)) {
      return cat("'", oa.name, "' and '", ob.name,
                 "' have paddings that do not keep the smaller kernel centred in the larger");
    }
  }
  return "";
}

bool can_merge(const graph::Graph& graph, const std::vector<OpId>& convs) {
  if (convs.empty()) return false;
  for (size_t i = 1; i < convs.size(); ++i) {
    if (!merge_conflict(graph, convs[0], convs[i]).empty()) return false;
  }
  // Pairwise with the first is not enough for padding: check the largest kernels against all.
  for (size_t i = 0; i < convs.size(); ++i)
    for (size_t j = i + 1; j < convs.size(); ++j)
      if (!merge_conflict(graph, convs[i], convs[j]).empty()) return false;
  return true;
}

Conv2dAttrs merged_conv_attrs(const graph::Graph& graph, const std::vector<OpId>& convs) {
  assert(can_merge(graph, convs));
  Conv2dAttrs merged = graph.op(convs[0]).attrs_as<Conv2dAttrs>();
  merged.out_channels = 0;
  merged.bias = false;
  for (OpId id : convs) {
    const auto& c = graph.op(id).attrs_as<Conv2dAttrs>();
    merged.out_channels += c.out_channels;
    merged.bias = merged.bias || c.bias;
    if (c.kernel.h > merged.kernel.h) {
      merged.kernel.h = c.kernel.h;
      merged.padding.top = c.padding.top;
      merged.padding.bottom = c.padding.bottom;
    }
    if (c.kernel.w > merged.kernel.w) {
      merged.kernel.w = c.kernel.w;
      merged.padding.left = c.padding.left;
      merged.padding.right = c.padding.right;
    }
  }
  return merged;
}

void validate(const graph::Graph& graph, const Schedule& schedule) {
  const size_t n = graph.num_ops();
  // stage_of[op] = stage index; position within its group for in-group order checks.
  std::vector<int> stage_of(n, -1);
  std::vector<int> group_of(n, -1);
  std::vector<int> position(n, -1);
  auto op_name = [&](OpId id) -> std::string {
    return id >= 0 && static_cast<size_t>(id) < n ? cat("'", graph.op(id).name, "'")
                                                  : cat("#", id);
  };
  for (size_t s = 0; s < schedule.stages.size(); ++s) {
    const Stage& stage = schedule.stages[s];
    const std::string where = cat("stage ", s + 1, " (", to_string(stage.kind), ")");
    if (stage.groups.empty() || stage.num_ops() == 0) {
      throw ScheduleError(cat(where, ": a stage must contain at least one op"));
    }
    for (size_t g = 0; g < stage.groups.size(); ++g) {
      if (stage.groups[g].empty()) throw ScheduleError(cat(where, ": group ", g + 1, " is empty"));
      for (size_t i = 0; i < stage.groups[g].size(); ++i) {
        const OpId id = stage.groups[g][i];
        if (id < 0 || static_cast<size_t>(id) >= n) {
          throw ScheduleError(cat(where, ": op id ", id, " is not in the graph"));
        }
        if (stage_of[id] >= 0) {
          throw ScheduleError(cat(where, ": op ", op_name(id), " is already scheduled in stage ",
                                  stage_of[id] + 1, "; every op must appear exactly once"));
        }
        stage_of[id] = static_cast<int>(s);
        group_of[id] = static_cast<int>(g);
        position[id] = static_cast<int>(i);
      }
    }
  }
  for (OpId id = 0; static_cast<size_t>(id) < n; ++id) {
    if (stage_of[id] < 0) {
      throw ScheduleError(cat("op ", op_name(id), " is not scheduled; every op must appear exactly "
                              "once"));
    }
  }
  for (size_t s = 0; s < schedule.stages.size(); ++s) {
    const Stage& stage = schedule.stages[s];
    const std::string where = cat("stage ", s + 1, " (", to_string(stage.kind), ")");
    for (OpId id : stage.ops()) {
      for (OpId p : graph.predecessors(id)) {
        if (stage_of[p] > static_cast<int>(s)) {
          throw ScheduleError(cat(where, ": op ", op_name(id), " runs before its input ",
                                  op_name(p), " (stage ", stage_of[p] + 1, ")"));
        }
        if (stage_of[p] < static_cast<int>(s)) continue;
        if (stage.kind == StageKind::kMerge) {
          throw ScheduleError(cat(where, ": merged op ", op_name(id), " reads ", op_name(p),
                                  " of the same stage"));
        }
        if (group_of[p] != group_of[id]) {
          throw ScheduleError(cat(where, ": op ", op_name(id), " in group ", group_of[id] + 1,
                                  " reads ", op_name(p), " of group ", group_of[p] + 1,
                                  "; groups of a stage must be independent"));
        }
        if (position[p] > position[id]) {
          throw ScheduleError(cat(where, ": op ", op_name(id), " comes before its input ",
                                  op_name(p), " in its group"));
        }
      }
    }
    if (stage.kind == StageKind::kMerge) {
      const std::vector<OpId> convs = stage.ops();
      for (const auto& group : stage.groups) {
        if (group.size() != 1) {
          throw ScheduleError(cat(where, ": each group of a merge stage holds one convolution"));
        }
      }
      if (convs.size() < 2) {
        throw ScheduleError(cat(where, ": a merge stage needs at least two convolutions"));
      }
      for (size_t i = 0; i < convs.size(); ++i) {
        for (size_t j = i + 1; j < convs.size(); ++j) {
          const std::string conflict = merge_conflict(graph, convs[i], convs[j]);
          if (!conflict.empty()) throw ScheduleError(cat(where, ": cannot merge: ", conflict));
        }
      }
    }
  }
}

Schedule carry_schedule(const graph::Graph& from, const Schedule& schedule, const graph::Graph& to) {
  if (graph::graph_hash(from) == graph::graph_hash(to)) return schedule;  // same ids
  const auto batch_of = [](const graph::Graph& g) {
    const auto& input = g.value(g.inputs().at(0)).desc;
    return input.shape.rank() > 0 ? input.shape[0] : 1;
  };
  const std::string where = cat("the schedule of '", from.name(), "'");
  if (from.name() != to.name()) {
    throw ScheduleError(cat(where, " is for another network than '", to.name(), "'"));
  }
  if (batch_of(from) != batch_of(to)) {
    throw ScheduleError(cat(where, " is for batch ", batch_of(from), " but the graph has batch ",
                            batch_of(to), "; schedule the graph again"));
  }
  if (graph::compute_type(from) != graph::compute_type(to)) {
    throw ScheduleError(cat(where, " is for dtype ", graph::compute_type(from), " but the graph is ",
                            graph::compute_type(to), "; schedule it again"));
  }
  if (from.num_ops() != to.num_ops()) {
    throw ScheduleError(cat(where, " has ", from.num_ops(), " ops, the graph ", to.num_ops(),
                            ": the graph differs; schedule it again"));
  }
  Schedule carried = schedule;
  for (Stage& stage : carried.stages) {
    for (auto& group : stage.groups) {
      for (OpId& id : group) {
        const std::string& name = from.op(id).name;
        const auto found = to.find_op(name);
        if (!found) throw ScheduleError(cat(where, " runs op '", name, "', which the graph lacks"));
        id = *found;
      }
    }
  }
  if (schedule.layouts.is_per_value()) {
    std::vector<graph::Layout> layouts(to.num_values(), graph::Layout::kNCHW);
    for (size_t v = 0; v < to.num_values(); ++v) layouts[v] = to.value(static_cast<graph::ValueId>(v)).desc.layout;
    for (size_t v = 0; v < from.num_values() && v < schedule.layouts.per_value().size(); ++v) {
      if (const auto found = to.find_value(from.value(static_cast<graph::ValueId>(v)).name)) {
        layouts[static_cast<size_t>(*found)] = schedule.layouts.per_value()[v];
      }
    }
    carried.layouts = graph::LayoutAssignment::per_value(to, std::move(layouts));
  }
  validate(to, carried);
  return carried;
}

}  // namespace stagecraft::scheduler
