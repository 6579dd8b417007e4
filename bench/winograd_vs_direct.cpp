// Our Winograd convolutions (executor/cpu/winograd.h) against oneDNN's direct ones, on the
// stride-1 3x3, 1xK and Kx1 convolutions of the models we run, in nChw8c with bias and ReLU,
// interleaved:
//   OMP_NUM_THREADS=2 ./build/bench/winograd_vs_direct [rounds] [--cold] [--nChw16c] [NAME]
// (--cold: weights read from memory on every call, as inside a run, see copies_for; --nChw16c:
// both in nChw16c, where oneDNN runs its AVX-512 kernels on CPUs that have them; NAME: only the
// shapes whose name contains it)
// Prints per shape oneDNN's implementation, the median of each method's per-round medians (µs),
// the speed-up and the largest difference to oneDNN's result relative to its largest |value|.
// 3x3: F(2x2,3x3) and F(4x4,3x3); 1xK / Kx1: F(2, K) and the tile the backend picks.
#include <dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "executor/cpu/host_simd.h"
#include "executor/cpu/winograd.h"

namespace {

using dnnl::memory;
using stagecraft::executor::cpu::HostLayout;
using stagecraft::executor::cpu::WinogradConv;
using stagecraft::executor::cpu::WinogradProblem;

struct Shape {
  const char* name;
  int64_t cin, h, cout, pad;  // pad on the long axis (3x3: both)
  int64_t kh = 3, kw = 3;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// --cold: each method runs round-robin over copies of its weights (distinct memory, together at
// least 96 MB, at most 256 copies), so that every call reads its weights from memory as inside a
// network's run (a model's weights together do not fit the last-level cache: each convolution's
// are evicted before the next run reaches them), while input and output stay in the caches.
bool cold = false;
bool blocked16 = false;  // --nChw16c
constexpr size_t kColdBytes = size_t{96} << 20;

size_t copies_for(size_t weight_bytes) {
  if (!cold) return 1;
  return std::clamp<size_t>((kColdBytes + weight_bytes - 1) / weight_bytes, 2, 256);
}

// f(i): the i-th call of a round.
template <class F>
double time_us(F&& f, int runs) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f(i);
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count());
  }
  return median(t);
}

}  // namespace

// The convolutions compared: inception_v3, resnet50, googlenet, densenet121, squeezenet and
// Inception-ResNet-v2 layers, square and 1xN / Nx1.
std::vector<Shape> bench_shapes() {
  return {
      {"inception_v3 32->32 147 p0", 32, 147, 32, 0},  {"inception_v3 32->64 147", 32, 147, 64, 1},
      {"inception_v3 80->192 73 p0", 80, 73, 192, 0},  {"inception_v3 64->96 35", 64, 35, 96, 1},
      {"inception_v3 96->96 35", 96, 35, 96, 1},       {"inception_v3 448->384 8", 448, 8, 384, 1},
      {"resnet50 64->64 56", 64, 56, 64, 1},           {"resnet50 128->128 28", 128, 28, 128, 1},
      {"resnet50 256->256 14", 256, 14, 256, 1},       {"resnet50 512->512 7", 512, 7, 512, 1},
      {"googlenet 64->192 56", 64, 56, 192, 1},        {"googlenet 96->128 28", 96, 28, 128, 1},
      {"googlenet 112->224 14", 112, 14, 224, 1},      {"densenet121 128->32 56", 128, 56, 32, 1},
      {"densenet121 128->32 14", 128, 14, 32, 1},      {"squeezenet 16->64 55", 16, 55, 64, 1},
      {"inception_v3 128->128 17 1x7", 128, 17, 128, 3, 1, 7},
      {"inception_v3 128->192 17 7x1", 128, 17, 192, 3, 7, 1},
      {"inception_v3 192->192 17 1x7", 192, 17, 192, 3, 1, 7},
      {"inception_v3 160->160 17 7x1", 160, 17, 160, 3, 7, 1},
      {"inception_v3 384->384 8 1x3", 384, 8, 384, 1, 1, 3},
      {"inception_v3 384->384 8 3x1", 384, 8, 384, 1, 3, 1},
      {"irv2 128->160 17 1x7", 128, 17, 160, 3, 1, 7},
      {"irv2 160->192 17 7x1", 160, 17, 192, 3, 7, 1},
      {"irv2 192->224 8 1x3", 192, 8, 224, 1, 1, 3},
      {"irv2 224->256 8 3x1", 224, 8, 256, 1, 3, 1},
  };
}

// One row: oneDNN's direct convolution against the two Winograd tiles on shape `s` (times in µs,
// medians of `rounds`, and the largest error relative to the output's scale).
void compare_shape(const Shape& s, dnnl::engine& eng, dnnl::stream& st, std::mt19937& rng, int rounds,
                   int threads) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t pad_h = s.kh > 1 ? s.pad : 0, pad_w = s.kw > 1 ? s.pad : 0;
  const int64_t oh = s.h + 2 * pad_h - s.kh + 1, ow = s.h + 2 * pad_w - s.kw + 1;
  const auto tag = blocked16 ? memory::format_tag::nChw16c : memory::format_tag::nChw8c;
  const memory::desc src_md({1, s.cin, s.h, s.h}, memory::data_type::f32, tag);
  const memory::desc dst_md({1, s.cout, oh, ow}, memory::data_type::f32, tag);
  const memory::desc w_user({s.cout, s.cin, s.kh, s.kw}, memory::data_type::f32, memory::format_tag::oihw);
  const memory::desc w_any({s.cout, s.cin, s.kh, s.kw}, memory::data_type::f32, memory::format_tag::any);
  const memory::desc b_md({s.cout}, memory::data_type::f32, memory::format_tag::x);
  dnnl::post_ops po;
  po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(po);
  const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                          dnnl::algorithm::convolution_direct, src_md, w_any, b_md,
                                          dst_md, {1, 1}, {0, 0}, {pad_h, pad_w}, {pad_h, pad_w});
  const dnnl::convolution_forward::primitive_desc pd(d, attr, eng);
  std::vector<float> w(static_cast<size_t>(s.cout * s.cin * s.kh * s.kw)), b(static_cast<size_t>(s.cout));
  for (float& x : w) x = normal(rng) / std::sqrt(static_cast<float>(s.kh * s.kw * s.cin));
  for (float& x : b) x = normal(rng) * 0.1f;
  dnnl::memory src(src_md, eng), dst(dst_md, eng), bias(b_md, eng, b.data()), wu(w_user, eng, w.data());
  std::vector<dnnl::memory> wp;
  for (size_t c = copies_for(pd.weights_desc().get_size()); c > 0; --c) {
    wp.emplace_back(pd.weights_desc(), eng);
    dnnl::reorder(wu, wp.back()).execute(st, wu, wp.back());
  }
  float* sp = static_cast<float*>(src.get_data_handle());
  for (size_t i = 0; i < src_md.get_size() / sizeof(float); ++i) sp[i] = normal(rng);
  dnnl::convolution_forward conv(pd);
  const auto direct = [&](int i) {
    conv.execute(st, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wp[static_cast<size_t>(i) % wp.size()]},
                      {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, dst}});
    st.wait();
  };
  direct(0);
  const size_t out_n = dst_md.get_size() / sizeof(float);
  const std::vector<float> ref(static_cast<float*>(dst.get_data_handle()),
                               static_cast<float*>(dst.get_data_handle()) + out_n);
  float scale = 0.0f;
  for (float x : ref) scale = std::max(scale, std::fabs(x));

  const auto layout = [](int64_t c, int64_t h, int64_t width) {
    stagecraft::graph::TensorDesc t;
    t.shape = stagecraft::graph::Shape{1, c, h, width};
    t.layout = blocked16 ? stagecraft::graph::Layout::kNChw16c : stagecraft::graph::Layout::kNChw8c;
    return stagecraft::executor::cpu::host_layout(t);
  };
  std::vector<double> times[3];
  double err[2] = {0, 0};
  std::vector<WinogradConv> wino[2];  // copies of each method
  std::vector<std::vector<float>> out(2, std::vector<float>(out_n));
  const bool line = s.kh != s.kw;
  const int taps = static_cast<int>(std::max(s.kh, s.kw));
  const int picked = line ? stagecraft::executor::cpu::winograd_1d_tile(taps, s.kh > 1 ? oh : ow) : 4;
  const int tiles[2] = {2, picked == 2 ? 3 : picked};
  std::string names[2];
  for (int at = 0; at < 2; ++at) {
    const int m = tiles[at];
    WinogradProblem p;
    p.src = layout(s.cin, s.h, s.h);
    p.dst = layout(s.cout, oh, ow);
    p.pad_top = pad_h;
    p.pad_left = pad_w;
    p.kernel_h = static_cast<int>(s.kh);
    p.kernel_w = static_cast<int>(s.kw);
    p.activation = stagecraft::graph::Activation::kRelu;
    p.tile = m;
    p.threads = threads;
    wino[at].emplace_back(p, w, b);
    names[at] = wino[at].back().name().substr(9, wino[at].back().name().find(')') - 8);
    // Transformed weights: points x in x out floats.
    const int64_t points = line ? m + taps - 1 : (m + 2) * (m + 2);
    for (size_t c = copies_for(static_cast<size_t>(points * s.cin * s.cout) * sizeof(float)); c > 1; --c) {
      wino[at].emplace_back(p, w, b);
    }
  }
  std::vector<std::vector<float>> ws(2);
  for (int i = 0; i < 2; ++i) ws[i].resize(wino[i][0].workspace_bytes() / sizeof(float) + 16);
  const auto run_wino = [&](int i, int call) {
    wino[i][static_cast<size_t>(call) % wino[i].size()].run(sp, nullptr, out[i].data(), ws[i].data());
  };
  for (int i = 0; i < 2; ++i) {
    run_wino(i, 0);
    for (size_t j = 0; j < out_n; ++j) err[i] = std::max<double>(err[i], std::fabs(out[i][j] - ref[j]) / scale);
  }
  const int runs = s.h >= 100 ? 20 : 100;
  for (int r = 0; r < rounds; ++r) {
    times[0].push_back(time_us(direct, runs));
    times[1].push_back(time_us([&](int i) { run_wino(0, i); }, runs));
    times[2].push_back(time_us([&](int i) { run_wino(1, i); }, runs));
  }
  const double t0 = median(times[0]), t1 = median(times[1]), t2 = median(times[2]);
  std::printf("%-30s %-10s %9.1f %-12s %9.1f %-12s %9.1f %6.2f %6.2f %9.1e %9.1e\n", s.name,
              pd.impl_info_str(), t0, names[0].c_str(), t1, names[1].c_str(), t2, t0 / t1, t0 / t2, err[0],
              err[1]);
}

int main(int argc, char** argv) {
  int rounds = 5;
  std::string filter;  // only shapes whose name contains it
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--cold") {
      cold = true;
    } else if (std::string(argv[i]) == "--nChw16c") {
      blocked16 = true;
    } else if (std::atoi(argv[i]) > 0) {
      rounds = std::atoi(argv[i]);
    } else {
      filter = argv[i];
    }
  }
  const int threads = omp_get_max_threads();
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream st(eng);
  std::mt19937 rng(1);
  // The FMA-width probe the backend's kernel choice reads (a timing: here, not in the tests).
  std::printf("512-bit / 256-bit FMA work per second (cpu::host_fma512_gain): %.2f (0: no AVX-512)\n",
              stagecraft::executor::cpu::host_fma512_gain());
  std::printf("threads %d\n%-30s %-10s %9s %-12s %9s %-12s %9s %6s %6s %9s %9s\n", threads, "shape", "oneDNN",
              "direct", "A", "µs", "B", "µs", "x A", "x B", "err A", "err B");
  for (const Shape& s : bench_shapes()) {
    if (!filter.empty() && std::string(s.name).find(filter) == std::string::npos) continue;
    compare_shape(s, eng, st, rng, rounds, threads);
  }
  return 0;
}
