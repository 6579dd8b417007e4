// Plan pass 5: kernels. Every task becomes a backend kernel (created once: weights packed,
// algorithm chosen), each stream gets one workspace arena sized for its largest kernel, and every
// kernel is bound to its tensors and its stream's arena.
#include <algorithm>

#include "executor/plan/plan_ir.h"

namespace stagecraft::executor::planning {

std::vector<PlannedKernel> create_kernels(PlanIR& ir) {
  std::vector<PlannedKernel> kernels(ir.tasks.size());
  std::vector<size_t> workspace(static_cast<size_t>(ir.num_streams), 0);
  for (size_t t = 0; t < ir.tasks.size(); ++t) {
    Task& task = ir.tasks[t];
    PlannedKernel& k = kernels[t];
    if (task.copy) {
      k.kernel = ir.backend.create_copy(ir.values[task.srcs[0]].desc, ir.values[task.dsts[0]].desc);
    } else {
      // Described once: the kernel is built from what the description worked out.
      const KernelDesc desc = ir.backend.supports(task.spec);
      if (!desc.runnable()) throw unsupported(ir.backend.name(), task.spec, desc.support);
      k.kernel = ir.backend.create_kernel(task.spec, desc);
    }
    k.stream = task.stream;
    k.stage = task.stage;
    k.label = task.label;
    k.ops = task.ops;
    k.waits = ir.waits[t];
    k.record = ir.record[t];
    workspace[task.stream] = std::max(workspace[task.stream], k.kernel->workspace_bytes());
  }
  std::vector<void*> arena(workspace.size(), nullptr);
  for (size_t s = 0; s < workspace.size(); ++s) {
    if (workspace[s] == 0) continue;
    arena[s] = ir.allocate(workspace[s]);
    ir.memory.workspace_bytes += workspace[s];
  }
  ir.workspace = arena;
  ir.workspace_bytes = workspace;
  const auto ref = [&](int v) { return TensorRef{ir.address[v], ir.values[v].desc}; };
  for (size_t t = 0; t < ir.tasks.size(); ++t) {
    std::vector<TensorRef> srcs, dsts;
    for (int v : ir.tasks[t].srcs) srcs.push_back(ref(v));
    for (int v : ir.tasks[t].dsts) dsts.push_back(ref(v));
    kernels[t].kernel->bind(srcs, dsts, arena[ir.tasks[t].stream]);
  }
  return kernels;
}

}  // namespace stagecraft::executor::planning
