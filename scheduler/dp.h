#pragma once
/// The DP scheduler (internal header shared by search.cpp, dp.cpp and tests).

#include <memory>
#include <string>
#include <vector>

#include "scheduler/search.h"

namespace stagecraft::scheduler {

/// The dynamic-programming scheduler for `options`.
std::unique_ptr<Scheduler> make_dp_scheduler(const SearchOptions& options);

/// Splits one block (ascending op ids) into consecutive parts small enough for the DP: at most
/// options.max_part_ops ops and at most options.max_part_transitions estimated transitions each,
/// cutting where the fewest tensors cross. Returns the block itself when it fits; `note` receives a
/// one-line description of the split otherwise.
std::vector<std::vector<OpId>> split_block(const graph::Graph& graph,
                                           const std::vector<OpId>& block,
                                           const SearchOptions& options, std::string* note);

/// Upper estimate of the DP transitions for a set of ops: over a minimum chain cover with chain
/// lengths L_i, the product of the choices per chain of (ops kept, ops ending) with at most r
/// ending ops when pruned.
double estimate_transitions(const graph::Graph& graph, const std::vector<OpId>& ops,
                            const SearchOptions& options);

/// Fills the schedule's metadata (network, hash, batch, dtype, device, settings, predicted sum).
void fill_meta(const graph::Graph& graph, const graph::LayoutAssignment& layouts,
               const CostModel& model, const SearchOptions& options,
               Schedule& schedule);

}  // namespace stagecraft::scheduler
