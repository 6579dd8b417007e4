#include "scheduler/stage_key.h"

#include <algorithm>

#include "common/strings.h"

namespace stagecraft::scheduler {

using graph::ValueId;

StageKeyBuilder::StageKeyBuilder(const graph::Graph& graph)
    : graph_(graph), op_signatures_(graph.num_ops()), value_signatures_(graph.num_values()) {}

const std::string& StageKeyBuilder::op_signature(OpId id) {
  std::string& sig = op_signatures_[id];
  if (sig.empty()) {
    const graph::Op& op = graph_.op(id);
    sig = cat(to_string(op.kind), "(", graph::attrs_signature(op.attrs), ")");
    for (ValueId v : op.outputs) sig += "->" + value_signature(v);
  }
  return sig;
}

const std::string& StageKeyBuilder::value_signature(ValueId id) {
  std::string& sig = value_signatures_[id];
  if (sig.empty()) sig = graph_.value(id).desc.to_string();
  return sig;
}

// Signature of one group. Inputs from outside the group are numbered by their position in
// `external` (appended on first use); inputs from inside by the producer's position in the group.
std::string StageKeyBuilder::group_signature(const std::vector<OpId>& group,
                                             std::vector<ValueId>& external) {
  std::string sig = "[";
  for (size_t i = 0; i < group.size(); ++i) {
    const graph::Op& op = graph_.op(group[i]);
    if (i) sig += ';';
    sig += op_signature(group[i]);
    sig += '<';
    for (ValueId v : op.inputs) {
      const OpId producer = graph_.value(v).producer;
      const auto end = group.begin() + static_cast<long>(i);
      const auto it = std::find(group.begin(), end, producer);
      // Plain appends: this runs for every new ending of the DP.
      if (producer != graph::kNoOp && it != end) {
        sig += '@';
        sig += std::to_string(it - group.begin());
        sig += ':';
        sig += std::to_string(graph_.value(v).output_index);
        sig += ',';
        continue;
      }
      auto pos = std::find(external.begin(), external.end(), v);
      if (pos == external.end()) {
        external.push_back(v);
        pos = external.end() - 1;
      }
      sig += '$';
      sig += std::to_string(pos - external.begin());
      sig += '=';
      sig += value_signature(v);
      sig += ',';
    }
    sig += '>';
  }
  sig += ']';
  return sig;
}

std::string StageKeyBuilder::key(const Stage& stage) {
  // Order groups by a signature with group-local input numbering, then number shared inputs
  // across the whole stage in that order.
  std::vector<std::pair<std::string, size_t>> local;
  for (size_t g = 0; g < stage.groups.size(); ++g) {
    std::vector<ValueId> own;
    local.emplace_back(group_signature(stage.groups[g], own), g);
  }
  std::sort(local.begin(), local.end());
  std::string key(to_string(stage.kind));
  if (stage.groups.size() == 1) return key + local[0].first;
  std::vector<ValueId> external;
  for (const auto& entry : local) key += group_signature(stage.groups[entry.second], external);
  return key;
}

std::string stage_key(const graph::Graph& graph, const Stage& stage) {
  return StageKeyBuilder(graph).key(stage);
}

}  // namespace stagecraft::scheduler
