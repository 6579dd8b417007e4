#pragma once
// What the host tests of the CUDA bodies share (test_element_ops.cpp, test_element_ops_models.cpp):
// a traced element type whose loads and stores are recorded (coalescing), descriptors, random
// tensors, the CPU backend's run of a spec and differences between results.
#include <cmath>
#include <functional>
#include <random>
#include <set>

#include "executor/backend.h"
#include "executor/cuda/element_ops.h"
#include "support/kernels.h"
#include "support/models.h"
#include "support/compare.h"

namespace stagecraft::executor::cuda::element_test {

using graph::DataType;
using graph::Layout;
using graph::OpKind;
using graph::Shape;
using graph::TensorDesc;
using stagecraft::testing::Bytes;
using stagecraft::testing::kernel_spec;

inline constexpr int kWarpSize = 32;
inline constexpr int kSegmentBytes = 128;  // a warp's access is served in 128-byte segments

// ---- A traced element type: its loads and stores are recorded (found by argument-dependent
// lookup from the bodies' unqualified load/store calls) ------------------------------------------

struct Traced {
  float v = 0;
};
struct Trace {
  std::vector<int64_t> loads, stores;
};
inline Trace* g_trace = nullptr;
inline float load(const Traced* p, int64_t i) {
  if (g_trace) g_trace->loads.push_back(i);
  return p[i].v;
}
inline void store(Traced* p, int64_t i, float v) {
  if (g_trace) g_trace->stores.push_back(i);
  p[i].v = v;
}

// The mean number of 128-byte segments a warp of 32 consecutive threads touches per access step
// (the k-th load, or store, of each thread), for elements of `bytes` bytes: 1-2 is coalesced, 32
// is one segment per thread.
inline double segments_per_access(int64_t threads, int bytes, const std::function<void(int64_t)>& body,
                           bool loads) {
  std::vector<std::vector<int64_t>> per_thread(static_cast<size_t>(threads));
  for (int64_t i = 0; i < threads; ++i) {
    Trace t;
    g_trace = &t;
    body(i);
    g_trace = nullptr;
    per_thread[static_cast<size_t>(i)] = loads ? t.loads : t.stores;
  }
  double total = 0;
  int64_t accesses = 0;
  for (int64_t w = 0; w < threads; w += kWarpSize) {
    size_t steps = 0;
    for (int64_t i = w; i < std::min(threads, w + kWarpSize); ++i) steps = std::max(steps, per_thread[i].size());
    for (size_t k = 0; k < steps; ++k) {
      std::set<int64_t> segments;
      for (int64_t i = w; i < std::min(threads, w + kWarpSize); ++i) {
        if (k < per_thread[i].size()) segments.insert(per_thread[i][k] * bytes / kSegmentBytes);
      }
      total += static_cast<double>(segments.size());
      ++accesses;
    }
  }
  return accesses ? total / static_cast<double>(accesses) : 0;
}

inline std::vector<Traced> traced(int64_t n) {
  std::vector<Traced> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i].v = static_cast<float>(i % 17) - 8.0f;
  return v;
}

inline Dims4 dims(int64_t n, int64_t c, int64_t h, int64_t w, bool nhwc) {
  Dims4 d;
  d.n = n, d.c = c, d.h = h, d.w = w, d.nhwc = nhwc;
  return d;
}


// ---- The bodies against the CPU backend --------------------------------------------------------

inline Backend& cpu() { return stagecraft::testing::cpu_backend(); }

inline TensorDesc desc(Shape shape, Layout layout, DataType dtype = DataType::kF32, float scale = 1.0f) {
  TensorDesc d = graph::make_desc(std::move(shape), dtype);
  d.layout = layout;
  d.scale = scale;
  return d;
}

inline Bytes random_bytes(const TensorDesc& d, uint32_t seed) {
  std::mt19937 rng(seed);
  Bytes b(static_cast<size_t>(d.bytes()));
  if (d.dtype == DataType::kF32) {
    std::uniform_real_distribution<float> u(-2.f, 2.f);
    auto* f = reinterpret_cast<float*>(b.data());
    for (int64_t i = 0; i < d.shape.numel(); ++i) f[i] = u(rng);
  } else {
    for (auto& v : b) v = static_cast<uint8_t>(rng());
  }
  return b;
}

inline float value(const Bytes& b, DataType t, int64_t i) {
  switch (t) {
    case DataType::kU8:
      return b[static_cast<size_t>(i)];
    case DataType::kI8:
      return static_cast<int8_t>(b[static_cast<size_t>(i)]);
    default:
      return reinterpret_cast<const float*>(b.data())[i];
  }
}

// Runs `spec` (or a copy when spec.kind is kIdentity and copy is set) on the CPU backend.
inline std::vector<Bytes> run_cpu(const KernelSpec& spec, const std::vector<Bytes>& srcs, bool copy = false) {
  auto kernel = copy ? cpu().create_copy(spec.srcs[0], spec.dsts[0]) : cpu().create_kernel(spec);
  return stagecraft::testing::run_kernel(cpu(), *kernel, spec, srcs);
}

// The largest |difference| between two tensors of one descriptor, in its units.
inline double max_difference(const Bytes& a, const Bytes& b, const TensorDesc& d) {
  double worst = 0;
  for (int64_t i = 0; i < d.shape.numel(); ++i) {
    worst = stagecraft::testing::worst_of(worst, static_cast<double>(std::fabs(value(a, d.dtype, i) - value(b, d.dtype, i))));
  }
  return worst;
}

template <class T>
T* as(Bytes& b) {
  return reinterpret_cast<T*>(b.data());
}
template <class T>
const T* as(const Bytes& b) {
  return reinterpret_cast<const T*>(b.data());
}

}  // namespace stagecraft::executor::cuda::element_test
