#pragma once
// Library results as Python values (dicts, lists, tuples) for the module (module.cpp): schedule
// metadata, stages, search statistics, tensor descriptions.
#include <pybind11/pybind11.h>

#include <cstddef>
#include <vector>

#include "graph/graph.h"
#include "scheduler/schedule.h"
#include "scheduler/search.h"
#include "session/source.h"

namespace stagecraft::python {

/// [(name, shape, dtype)] of graph values.
pybind11::list tensor_infos(const graph::Graph& g, const std::vector<graph::ValueId>& ids);
/// tensor_infos of the model's outputs: the graph's, or after a data-dependent tail the model's
/// declared outputs (-1 where the data decides a dimension).
pybind11::list output_infos(const session::Model& model);
/// A schedule's metadata (Schedule.meta).
pybind11::dict meta_dict(const scheduler::ScheduleMeta& m, const std::string& layout);
/// [(kind, [[op names of a group]], predicted_ms)] per stage.
pybind11::list stage_list(const graph::Graph& g, const scheduler::Schedule& schedule);
/// The statistics of the search that made `schedule` (Schedule.stats): measured = stages the
/// search measured, cache_hits = stages its cost model knew from its cache (when it `measures`).
pybind11::dict stats_dict(const scheduler::SearchStats& st, const scheduler::Schedule& schedule,
                          bool measures);

}  // namespace stagecraft::python
