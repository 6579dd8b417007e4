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


namespace stagecraft::executor::cpu {

std::unordered_map<int, dnnl::memory> scratch_arguments(const dnnl::primitive_desc_base& pd, const dnnl::engine& engine,
                                                        const dnnl::memory::desc& post_op_src) {
  std::unordered_map<int, dnnl::memory> args;
  const auto add = [&](int arg, const dnnl::memory::desc& d) {
    if (d.get_size() == 0) return;
    dnnl::memory m(d, engine);
    std::memset(m.get_data_handle(), 0x3F, d.get_size());
    args.emplace(arg, m);
  };
  add(DNNL_ARG_SRC, pd.src_desc());
  add(DNNL_ARG_WEIGHTS, pd.weights_desc());
  add(DNNL_ARG_BIAS, pd.weights_desc(1));
  add(DNNL_ARG_DST, pd.dst_desc());
  add(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, post_op_src);
  add(DNNL_ARG_SCRATCHPAD, pd.scratchpad_desc());
  return args;
}

bool first_kernel_faster(const dnnl::primitive_desc_base& first, const dnnl::primitive_desc_base& second,
                         const dnnl::memory::desc& post_op_src, int threads, const dnnl::engine& engine) {
  double ms[2] = {0, 0};
  std::thread timer([&] {
    omp_set_num_threads(std::max(1, threads));
    dnnl::stream stream(engine);
    std::vector<std::pair<dnnl::primitive, std::unordered_map<int, dnnl::memory>>> runs;
    for (const auto* pd : {&first, &second}) {
      runs.emplace_back(dnnl::primitive(pd->get()), scratch_arguments(*pd, engine, post_op_src));
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
