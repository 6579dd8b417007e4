// Plan pass 3: synchronisation. A task depends on the tasks that wrote what it reads (through
// views, in both directions) and on earlier writers of a tensor it writes a slice of; tasks on one
// stream are ordered by the stream, dependencies across streams become events (per other stream
// only the latest one). The happens-before sets are what the memory pass reuses buffers by.
#include <algorithm>
#include <map>
#include <set>

#include "executor/plan/plan_ir.h"

namespace stagecraft::executor::planning {

namespace {

void collect_subtree_writers(const PlanIR& ir, int v, std::vector<int>& out) {
  out.insert(out.end(), ir.values[v].writers.begin(), ir.values[v].writers.end());
  for (int c : ir.values[v].children) collect_subtree_writers(ir, c, out);
}

// Tasks that must finish before a task reading value v can start.
std::vector<int> producers_of(const PlanIR& ir, int v) {
  std::vector<int> deps;
  collect_subtree_writers(ir, v, deps);
  for (int p = ir.values[v].parent; p >= 0; p = ir.values[p].parent) {
    deps.insert(deps.end(), ir.values[p].writers.begin(), ir.values[p].writers.end());
  }
  return deps;
}

}  // namespace

void synchronise(PlanIR& ir) {
  const size_t n = ir.tasks.size();
  for (size_t t = 0; t < n; ++t) {
    for (int v : ir.tasks[t].dsts) ir.values[v].writers.push_back(static_cast<int>(t));
  }
  ir.before.assign(n, Bits(n));
  ir.waits.assign(n, {});
  std::vector<int> last_on_stream(static_cast<size_t>(std::max(1, ir.options.max_streams)), -1);
  std::vector<int> event_of(n, -1);
  int events = 0;
  for (size_t t = 0; t < n; ++t) {
    const int ti = static_cast<int>(t);
    std::set<int> deps;
    for (int v : ir.tasks[t].srcs)
      for (int d : producers_of(ir, v))
        if (d < ti) deps.insert(d);
    // Write-after-write of overlapping regions: a task writing a slice waits for whole writes.
    for (int v : ir.tasks[t].dsts)
      for (int p = ir.values[v].parent; p >= 0; p = ir.values[p].parent)
        for (int d : ir.values[p].writers)
          if (d < ti) deps.insert(d);
    const int stream = ir.tasks[t].stream;
    if (last_on_stream[stream] >= 0) {
      ir.before[t].merge(ir.before[last_on_stream[stream]]);
      ir.before[t].set(last_on_stream[stream]);
    }
    std::map<int, int> latest;  // other stream -> its latest dependency
    for (int d : deps) {
      ir.before[t].merge(ir.before[d]);
      ir.before[t].set(d);
      if (ir.tasks[d].stream != stream) {
        auto [it, inserted] = latest.emplace(ir.tasks[d].stream, d);
        if (!inserted) it->second = std::max(it->second, d);
      }
    }
    for (const auto& [other, d] : latest) {
      if (event_of[d] < 0) event_of[d] = events++;
      ir.waits[t].push_back(event_of[d]);
    }
    last_on_stream[stream] = ti;
  }
  ir.record = std::move(event_of);
  ir.num_events = events;
  ir.num_streams = 1;
  for (const Task& t : ir.tasks) ir.num_streams = std::max(ir.num_streams, t.stream + 1);
}

}  // namespace stagecraft::executor::planning
