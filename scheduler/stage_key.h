#pragma once
/// Canonical stage keys: a stage's latency depends only on what it computes — op kinds and
/// attributes, input and output descriptors (batch, dtype, layout included), the wiring inside
/// each group, which inputs are shared, and the strategy — not on op ids or names. Identical
/// stages of repeated cells and blocks get the same key and are costed once.
///
/// Groups are put in a canonical order (by their own signature), so the order in which a search
/// lists the groups of a stage does not change its key.

#include <string>

#include "graph/graph.h"
#include "scheduler/schedule.h"

namespace stagecraft::scheduler {

/// Builds keys for many stages of one graph, caching each op's and value's signature.
class StageKeyBuilder {
 public:
  /// A builder for stages of `graph` (which must outlive it).
  explicit StageKeyBuilder(const graph::Graph& graph);
  /// The canonical key of a stage.
  std::string key(const Stage& stage);

 private:
  const std::string& op_signature(OpId id);
  const std::string& value_signature(graph::ValueId id);
  std::string group_signature(const std::vector<OpId>& group, std::vector<graph::ValueId>& external);

  const graph::Graph& graph_;
  std::vector<std::string> op_signatures_;     // empty until first use
  std::vector<std::string> value_signatures_;  // empty until first use
};

/// The canonical key of a stage (a readable string; equal keys mean equal latency).
std::string stage_key(const graph::Graph& graph, const Stage& stage);

}  // namespace stagecraft::scheduler
