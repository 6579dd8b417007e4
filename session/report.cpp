#include "session/report.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "common/strings.h"

namespace stagecraft::session {

using scheduler::Schedule;
using scheduler::StageKind;

namespace {

std::string group_text(const graph::Graph& g, const std::vector<graph::OpId>& group) {
  std::vector<std::string> names;
  for (graph::OpId id : group) names.push_back(g.op(id).name);
  return join(names, " > ");
}

}  // namespace

std::string stage_table(const graph::Graph& g, const Schedule& s) {
  TextTable table({"stage", "kind", "ops", "predicted ms", "groups (one per stream; > = in order)"},
                  {TextTable::kRight, TextTable::kLeft, TextTable::kRight, TextTable::kRight});
  for (size_t i = 0; i < s.stages.size(); ++i) {
    const auto& stage = s.stages[i];
    std::vector<std::string> groups;
    for (const auto& group : stage.groups) groups.push_back(cat("[", group_text(g, group), "]"));
    table.add_row({cat(i + 1), std::string(scheduler::to_string(stage.kind)),
                   cat(stage.num_ops()), fixed(stage.predicted_ms, 4),
                   stage.kind == StageKind::kMerge ? cat("merge ", join(groups, " + "))
                                                   : join(groups, " | ")});
  }
  return table.render();
}

std::string schedule_summary(const Schedule& s) {
  std::ostringstream out;
  size_t merges = 0, concurrent = 0, max_groups = 0;
  for (const auto& stage : s.stages) {
    if (stage.kind == StageKind::kMerge) ++merges;
    else if (stage.groups.size() > 1) ++concurrent;
    max_groups = std::max(max_groups, stage.groups.size());
  }
  const auto& m = s.meta;
  out << m.network << " (batch " << m.batch << ", " << m.dtype << "), " << m.cost_model
      << ": " << scheduler::to_string(m.search.strategy)
      << (m.search.strategy == scheduler::Strategy::kDp
              ? cat(" ", scheduler::to_string(m.search.mode), " r=", m.search.max_group_size,
                                          " s=", m.search.max_num_groups,
                                          m.search.pruned ? "" : " unpruned")
                                    : std::string())
      << "\n  predicted " << fixed(m.predicted_ms, 3) << " ms in " << s.stages.size()
      << " stages (" << merges << " merge, " << concurrent << " concurrent with >1 group, "
      << "at most " << max_groups << " groups)\n";
  if (!s.layouts.is_backend_default()) {
    std::map<std::string, size_t> counts;
    for (graph::Layout l : s.layouts.per_value()) ++counts[std::string(graph::to_string(l))];
    out << "  layout " << s.layouts.name();
    if (!counts.empty()) {
      out << " (values:";
      for (const auto& [name, n] : counts) out << " " << n << " " << name;
      out << ")";
    }
    out << "\n";
  }
  return out.str();
}

std::string search_progress_text(const scheduler::SearchProgress& p) {
  std::string text = cat("part ", p.block, "/", p.num_blocks, ", ", p.states, " states, ",
                         p.transitions, " transitions");
  if (p.measured > 0) {
    text += cat("; ", p.measured, " stages measured, ", p.estimated, " estimated");
    if (p.best_ms > 0) text += cat("; best ", fixed(p.best_ms, 2), " ms");
    if (p.bound_ms > 0) text += cat(" (estimates: ", fixed(p.bound_ms, 2), ")");
  }
  text += cat("; ", fixed(p.seconds, 1), " s");
  if (p.budget_s > 0) text += cat(" of ", fixed(p.budget_s, 0));
  return text;
}

std::string logit_scores_text(const quant::LogitScores& s, const char* classes) {
  return cat("cosine min ", fixed(s.min_cosine, 4), " mean ", fixed(s.mean_cosine, 4),
             ", top-1 agreement ", fixed(100 * s.top1, 1), "% (", s.distinct_top1, " distinct ",
             classes, ")");
}

std::string search_stats_text(const scheduler::SearchStats& st, const Schedule& schedule) {
  if (!st.from_cache.empty()) {
    const auto& search = schedule.meta.search;
    return cat("schedule from the cache (", st.from_cache, "): searched in ",
               fixed(schedule.meta.search_seconds, 1), " s",
               schedule.meta.converged
                   ? ", converged"
                   : cat(", stopped by its budget of ", fixed(search.budget.seconds, 0),
                                      " s (a longer --search-budget searches again)"));
  }
  std::string text = cat("search ", fixed(st.seconds, 2), " s: ", st.blocks, " blocks, ", st.parts,
                         " parts, ", st.states, " states, ", st.transitions, " transitions, ",
                         st.stage_keys, " distinct stage keys");
  if (!st.end_to_end.empty()) text += cat("; ", st.end_to_end);
  if (st.measured == 0 && st.estimated == 0) return text;  // a cheap model: all costed
  text += cat("; ", st.measured, " measured (", fixed(st.measuring_seconds, 1), " s), ", st.known,
              " from the cache, ", st.estimated, " costed from their ops only");
  if (st.out_of_budget) {
    text += cat("; the budget ended it: the best schedule so far, predicted ",
                fixed(schedule.meta.predicted_ms, 2), " ms, the estimates' best ",
                fixed(st.bound_ms, 2), " ms (--search-budget for more)");
  } else {
    text += "; converged";
  }
  return text;
}

std::string plan_summary(const executor::ExecutionPlan& plan, const std::string& note) {
  const auto& m = plan.memory();
  std::ostringstream out;
  out << "plan: " << plan.kernels().size() << " kernels on " << plan.num_streams()
      << " stream(s), " << plan.num_events() << " events, layout " << plan.layout_summary()
      << (note.empty() ? "" : " (" + note + ")") << "; activations "
      << byte_size(static_cast<double>(m.activation_bytes)) << " with reuse ("
      << byte_size(static_cast<double>(m.activation_bytes_without_reuse)) << " without), "
      << m.views << " views, " << m.copies << " copies, workspace "
      << byte_size(static_cast<double>(m.workspace_bytes));
  return out.str();
}

std::string plan_listing(const graph::Graph& graph, const executor::ExecutionPlan& plan) {
  std::ostringstream out;
  out << "plan of " << graph.name() << ": " << plan.kernels().size() << " kernels on "
      << plan.num_streams() << " stream(s); layout " << plan.layout_summary() << "\n";
  out << "kernel stage stream waits record label implementation\n";
  for (size_t k = 0; k < plan.kernels().size(); ++k) {
    const executor::PlannedKernel& kernel = plan.kernels()[k];
    std::vector<std::string> waits;
    for (int e : kernel.waits) waits.push_back(cat(e));
    out << k << " " << kernel.stage << " " << kernel.stream << " ["
        << join(waits, ",") << "] " << kernel.record << " " << kernel.label << " "
        << kernel.kernel->implementation() << "\n";
  }
  return out.str();
}

}  // namespace stagecraft::session
