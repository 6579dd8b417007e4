// Plan pass 3: synchronisation. A task depends on the earlier tasks that wrote any byte it reads
// or writes (views resolve to byte ranges of their root tensor, so a concatenation's part, the
// whole, and a smaller concatenation placed inside it all see each other's writers); tasks on one
// stream are ordered by the stream, dependencies across streams become events (per other stream
// only the latest one). The happens-before sets are what the memory pass reuses buffers by.
#include <algorithm>
#include <map>
#include <set>

#include "executor/plan/plan_ir.h"

namespace stagecraft::executor::planning {

namespace {

// Where each value's bytes lie: its root and the byte range inside it.
struct Extent {
  int root = -1;
  size_t begin = 0, end = 0;
  bool overlaps(const Extent& o) const { return root == o.root && begin < o.end && o.begin < end; }
};

// The writes to each root, as (task, extent written).
class Writes {
 public:
  explicit Writes(const PlanIR& ir) : extents_(ir.values.size()), by_root_(ir.values.size()) {
    for (size_t v = 0; v < ir.values.size(); ++v) {
      const int i = static_cast<int>(v);
      const size_t begin = ir.offset_in_root(i);
      extents_[v] = {ir.root(i), begin, begin + static_cast<size_t>(ir.values[v].desc.bytes())};
    }
    for (size_t t = 0; t < ir.tasks.size(); ++t) {
      for (int v : ir.tasks[t].dsts) by_root_[extents_[v].root].push_back({static_cast<int>(t), extents_[v]});
    }
  }
  // Tasks before `task` that write bytes of value v.
  void earlier_writers(int v, int task, std::set<int>& out) const {
    const Extent& e = extents_[v];
    for (const auto& [t, written] : by_root_[e.root]) {
      if (t < task && written.overlaps(e)) out.insert(t);
    }
  }

 private:
  std::vector<Extent> extents_;
  std::vector<std::vector<std::pair<int, Extent>>> by_root_;
};

}  // namespace

void synchronise(PlanIR& ir) {
  const size_t n = ir.tasks.size();
  const Writes writes(ir);
  ir.before.assign(n, Bits(n));
  ir.waits.assign(n, {});
  std::vector<int> last_on_stream(static_cast<size_t>(std::max(1, ir.options.max_streams)), -1);
  std::vector<int> event_of(n, -1);
  int events = 0;
  for (size_t t = 0; t < n; ++t) {
    const int ti = static_cast<int>(t);
    std::set<int> deps;
    // Read-after-write and write-after-write of the same bytes, whichever values name them.
    for (int v : ir.tasks[t].srcs) writes.earlier_writers(v, ti, deps);
    for (int v : ir.tasks[t].dsts) writes.earlier_writers(v, ti, deps);
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
