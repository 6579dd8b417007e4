// Library results as Python values (see convert.h).
#include "convert.h"

#include <pybind11/stl.h>

#include "session/report.h"

namespace stagecraft::python {

namespace py = pybind11;

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

py::dict meta_dict(const scheduler::ScheduleMeta& m) {
  py::dict d;
  d["network"] = m.network;
  d["graph_hash"] = m.graph_hash;
  d["num_ops"] = m.num_ops;
  d["batch"] = m.batch;
  d["dtype"] = m.dtype;
  d["device"] = m.device;
  d["cost_model"] = m.cost_model;
  d["strategy"] = std::string(scheduler::to_string(m.search.strategy));
  d["mode"] = std::string(scheduler::to_string(m.search.mode));
  d["r"] = m.search.max_group_size;
  d["s"] = m.search.max_num_groups;
  d["pruned"] = m.search.pruned;
  d["search_budget"] = m.search.budget.seconds;
  d["exhaustive"] = m.search.budget.exhaustive;
  d["converged"] = m.converged;
  d["predicted_ms"] = m.predicted_ms;
  d["search_seconds"] = m.search_seconds;
  d["layout"] = m.layout;
  return d;
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

py::dict stats_dict(const scheduler::SearchStats& st, const scheduler::Schedule& schedule,
                    size_t measured, size_t cache_hits) {
  py::dict d;
  d["seconds"] = st.seconds;
  d["blocks"] = st.blocks;
  d["parts"] = st.parts;
  d["states"] = st.states;
  d["transitions"] = st.transitions;
  d["stage_keys"] = st.stage_keys;
  d["splits"] = st.splits;
  d["measured"] = measured;
  d["cache_hits"] = cache_hits;
  d["measured_by_search"] = st.measured;
  d["estimated"] = st.estimated;
  d["converged"] = st.converged;
  d["out_of_budget"] = st.out_of_budget;
  d["bound_ms"] = st.bound_ms;
  d["from_cache"] = st.from_cache;
  d["summary"] = session::search_stats_text(st, schedule);
  return d;
}

}  // namespace stagecraft::python
