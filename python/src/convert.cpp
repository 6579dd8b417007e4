// Library results as Python values (see convert.h).
#include "convert.h"

#include <pybind11/stl.h>

#include "session/report.h"

namespace stagecraft::python {

namespace py = pybind11;
using namespace pybind11::literals;  // "name"_a = value: a keyword argument

// [(name, shape, layout)] of graph values.
py::list tensor_infos(const graph::Graph& g, const std::vector<graph::ValueId>& ids) {
  py::list out;
  for (graph::ValueId id : ids) {
    const graph::Value& v = g.value(id);
    out.append(py::make_tuple(v.name, py::tuple(py::cast(v.desc.shape.dims())),
                              std::string(graph::to_string(v.desc.dtype))));
  }
  return out;
}

py::dict meta_dict(const scheduler::ScheduleMeta& m, const std::string& layout) {
  const scheduler::SearchOptions& search = m.search;
  return py::dict("network"_a = m.network, "graph_hash"_a = m.graph_hash, "num_ops"_a = m.num_ops,
                  "batch"_a = m.batch, "dtype"_a = m.dtype, "device"_a = m.device,
                  "cost_model"_a = m.cost_model,
                  "strategy"_a = std::string(scheduler::to_string(search.strategy)),
                  "mode"_a = std::string(scheduler::to_string(search.mode)),
                  "r"_a = search.max_group_size, "s"_a = search.max_num_groups,
                  "pruned"_a = search.pruned, "search_budget"_a = search.budget.seconds,
                  "exhaustive"_a = search.budget.exhaustive, "converged"_a = m.converged,
                  "predicted_ms"_a = m.predicted_ms, "search_seconds"_a = m.search_seconds,
                  "layout"_a = layout);
}

// [(kind, [[op names of a group]], predicted_ms)] per stage.
py::list stage_list(const graph::Graph& g, const scheduler::Schedule& schedule) {
  py::list out;
  for (const scheduler::Stage& stage : schedule.stages) {
    py::list groups;
    for (const auto& group : stage.groups) {
      py::list names;
      for (graph::OpId id : group) names.append(g.op(id).name);
      groups.append(names);
    }
    out.append(py::make_tuple(std::string(scheduler::to_string(stage.kind)), groups,
                              stage.predicted_ms));
  }
  return out;
}

// The counts come from the search itself: stages it measured, stages its cost model knew.
py::dict stats_dict(const scheduler::SearchStats& st, const scheduler::Schedule& schedule,
                    bool measures) {
  const size_t measured = st.measured;
  const size_t cache_hits = measures ? st.known : 0;  // a cheap model knows every stage
  return py::dict("seconds"_a = st.seconds, "blocks"_a = st.blocks, "parts"_a = st.parts,
                  "states"_a = st.states, "transitions"_a = st.transitions,
                  "stage_keys"_a = st.stage_keys, "splits"_a = st.splits, "measured"_a = measured,
                  "cache_hits"_a = cache_hits, "measured_by_search"_a = st.measured,
                  "estimated"_a = st.estimated, "converged"_a = st.converged,
                  "out_of_budget"_a = st.out_of_budget, "bound_ms"_a = st.bound_ms,
                  "from_cache"_a = st.from_cache, "end_to_end"_a = st.end_to_end,
                  "summary"_a = session::search_stats_text(st, schedule));
}

py::list output_infos(const session::Model& model) {
  if (!model.tail) return tensor_infos(model.graph, model.graph.outputs());
  // After a data-dependent tail: the model's declared outputs (-1: decided by the data).
  py::list infos;
  for (const auto& d : model.tail->declared()) infos.append(py::make_tuple(d.name, py::tuple(py::cast(d.dims)), "f32"));
  return infos;
}

}  // namespace stagecraft::python
