#include "executor/cpu/conv_timing.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "executor/cpu/host_memory.h"

namespace stagecraft::executor::cpu {

bool first_conv_faster(const dnnl::convolution_forward::primitive_desc& first,
                       const dnnl::convolution_forward::primitive_desc& second,
                       const dnnl::memory::desc& post_op_src, int threads, const dnnl::engine& engine) {
  double ms[2] = {0, 0};
  std::thread timer([&] {
    omp_set_num_threads(std::max(1, threads));
    dnnl::stream stream(engine);
    std::vector<HostMemory> keep;
    const auto scratch_memory = [&](const dnnl::memory::desc& d) {
      keep.push_back(host_allocate(std::max<size_t>(d.get_size(), 1)));
      std::memset(keep.back().get(), 0x3F, d.get_size());
      return dnnl::memory(d, engine, keep.back().get());
    };
    std::vector<std::pair<dnnl::convolution_forward, std::unordered_map<int, dnnl::memory>>> runs;
    for (const auto* pd : {&first, &second}) {
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, scratch_memory(pd->src_desc())},
                                                 {DNNL_ARG_WEIGHTS, scratch_memory(pd->weights_desc())},
                                                 {DNNL_ARG_DST, scratch_memory(pd->dst_desc())}};
      if (pd->bias_desc().get_size() > 0) args.emplace(DNNL_ARG_BIAS, scratch_memory(pd->bias_desc()));
      if (post_op_src.get_size() > 0) {
        args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, scratch_memory(post_op_src));
      }
      if (pd->scratchpad_desc().get_size() > 0) {
        args.emplace(DNNL_ARG_SCRATCHPAD, scratch_memory(pd->scratchpad_desc()));
      }
      runs.emplace_back(dnnl::convolution_forward(*pd), std::move(args));
    }
    const auto run = [&](size_t i) {
      const auto t0 = std::chrono::steady_clock::now();
      runs[i].first.execute(stream, runs[i].second);
      stream.wait();
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    };
    run(0);
    run(1);
    ms[0] = ms[1] = std::numeric_limits<double>::infinity();
    for (int i = 0; i < 5; ++i) {
      ms[0] = std::min(ms[0], run(0));
      ms[1] = std::min(ms[1], run(1));
    }
  });
  timer.join();
  return ms[0] <= ms[1];
}

}  // namespace stagecraft::executor::cpu
