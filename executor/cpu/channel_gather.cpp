// Channel gathers: each destination channel copied from a channel of a source, in any CPU layout.
//
// A destination (host_layout.h) is walked as groups of channels that sit together at one pixel
// (one channel in nchw, all of them in nhwc, a block in nChw8c/nChw16c): per group, per pixel, per
// lane. Lanes whose sources are consecutive in memory are copied as runs.
//
// f32 into nChw8c/nChw16c from sources whose pixels hold whole 8-channel chunks (blocked, or nhwc
// with a multiple of 8 channels) take a vector path on CPUs with AVX2: each 8 destination lanes of
// a pixel are the source chunks they come from, loaded, permuted and blended (a 2-group shuffle:
// two loads, two permutes, a blend and a store per pixel, where the run copy moved lane by lane).
#include "executor/cpu/channel_gather.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>

#include "common/strings.h"
#include "executor/cpu/host_layout.h"
#include "executor/cpu/host_simd.h"

namespace stagecraft::executor::cpu {

namespace {

using graph::Layout;
using graph::TensorDesc;

// Lanes [lane, lane + count) of a destination group, copied from consecutive elements of source
// `slot` (slot < 0: zeros, the padding lanes of a blocked destination).
struct Run {
  int slot;
  int64_t lane, count;
  int64_t offset, pixel_stride, batch_stride;  // of the source, in elements
};

// Eight destination lanes taken from one 8-element chunk of a source pixel: lane l is element
// index[l] of the chunk where select[l] is all ones.
struct Chunk {
  int slot;
  int64_t offset, pixel_stride, batch_stride;  // of the chunk's first element, in elements
  std::array<int32_t, 8> index{}, select{};
};

// The vector path: 8 destination lanes at a time (vectors per group = block / 8).
struct Vector8 {
  std::vector<Chunk> chunks;  // lanes in no chunk are zero
};

struct Gather {
  HostLayout dst;
  std::vector<std::vector<Run>> groups;  // per destination group, in lane order
  std::vector<Vector8> vectors;          // per 8 destination lanes, when the vector path applies
};

template <class T>
void copy_runs(const std::vector<Run>& runs, const std::vector<void*>& data, int64_t image,
               T* out, int64_t p0, int64_t p1, int64_t out_pixel_stride) {
  // Whole pixels on both sides (a plane of nchw, a block from the same block layout) are one
  // copy; zeros are set per pixel; the other runs are copied pixel by pixel, run after run (a
  // chunk's destination lines stay in cache; faster than all runs of a pixel together).
  struct Strided {
    T* out;
    const T* in;
    int64_t count, pixel_stride;
  };
  std::vector<Strided> strided;
  for (const Run& r : runs) {
    T* o = out + r.lane;
    if (r.slot < 0) {
      for (int64_t p = p0; p < p1; ++p) std::memset(o + p * out_pixel_stride, 0, sizeof(T) * r.count);
      continue;
    }
    const T* in = static_cast<const T*>(data[static_cast<size_t>(r.slot)]) + image * r.batch_stride + r.offset;
    if (r.pixel_stride == out_pixel_stride && (r.count == out_pixel_stride || out_pixel_stride == 1)) {
      std::memcpy(o + p0 * out_pixel_stride, in + p0 * r.pixel_stride,
                  sizeof(T) * static_cast<size_t>((p1 - p0) * r.count));
    } else {
      strided.push_back({o, in, r.count, r.pixel_stride});
    }
  }
  for (const Strided& r : strided) {
    if (r.count == 1) {
      for (int64_t p = p0; p < p1; ++p) r.out[p * out_pixel_stride] = r.in[p * r.pixel_stride];
      continue;
    }
    for (int64_t p = p0; p < p1; ++p) {
      T* op = r.out + p * out_pixel_stride;
      const T* ip = r.in + p * r.pixel_stride;
      for (int64_t l = 0; l < r.count; ++l) op[l] = ip[l];
    }
  }
}

#ifdef STAGECRAFT_HOST_AVX2
__attribute__((target("avx2"))) void copy_vector(const Vector8& v, const std::vector<void*>& data,
                                                 int64_t image, float* out, int64_t p0, int64_t p1,
                                                 int64_t out_pixel_stride) {
  struct Source {
    const float* in;
    int64_t pixel_stride;
    __m256i index, select;
  };
  std::array<Source, 8> sources;
  const size_t n = v.chunks.size();
  for (size_t i = 0; i < n; ++i) {
    const Chunk& c = v.chunks[i];
    sources[i] = {static_cast<const float*>(data[static_cast<size_t>(c.slot)]) + image * c.batch_stride + c.offset,
                  c.pixel_stride,
                  _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c.index.data())),
                  _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c.select.data()))};
  }
  for (int64_t p = p0; p < p1; ++p) {
    __m256 acc = _mm256_setzero_ps();
    for (size_t i = 0; i < n; ++i) {
      const Source& s = sources[i];
      const __m256 lanes = _mm256_permutevar8x32_ps(_mm256_loadu_ps(s.in + p * s.pixel_stride), s.index);
      acc = _mm256_blendv_ps(acc, lanes, _mm256_castsi256_ps(s.select));
    }
    _mm256_storeu_ps(out + p * out_pixel_stride, acc);
  }
}
#endif

// Tasks: (image, unit, pixel chunk), a unit being a destination group or 8 lanes of one; a chunk
// keeps a task's lines in cache. fn(image, unit, p0, p1) runs once per task, in parallel.
constexpr int64_t kPixelChunk = 256;

template <class Fn>
void for_each_task(const HostLayout& dst, int64_t units, Fn fn) {
  const int64_t chunks = (dst.pixels + kPixelChunk - 1) / kPixelChunk;
  const int64_t tasks = dst.images * units * chunks;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t p0 = t % chunks * kPixelChunk;
    fn(t / (units * chunks), t / chunks % units, p0, std::min(dst.pixels, p0 + kPixelChunk));
  }
}

void run_vectors(const Gather& g, const std::vector<void*>& data) {
#ifdef STAGECRAFT_HOST_AVX2
  float* const out = static_cast<float*>(data.back());
  const int64_t per_group = g.dst.group() / 8;
  const int64_t group_stride = g.dst.group_stride();
  for_each_task(g.dst, static_cast<int64_t>(g.vectors.size()), [&](int64_t image, int64_t vector, int64_t p0, int64_t p1) {
    copy_vector(g.vectors[static_cast<size_t>(vector)], data, image,
                out + image * g.dst.batch_stride + vector / per_group * group_stride + vector % per_group * 8,
                p0, p1, g.dst.pixel_stride);
  });
#else
  (void)g;
  (void)data;
#endif
}

template <class T>
void run_gather(const Gather& g, const std::vector<void*>& data) {
  if constexpr (sizeof(T) == 4) {
    if (!g.vectors.empty()) {
      run_vectors(g, data);
      return;
    }
  }
  T* const out = static_cast<T*>(data.back());
  const int64_t group_stride = g.dst.group_stride();
  for_each_task(g.dst, static_cast<int64_t>(g.groups.size()), [&](int64_t image, int64_t group, int64_t p0, int64_t p1) {
    copy_runs(g.groups[static_cast<size_t>(group)], data, image,
              out + image * g.dst.batch_stride + group * group_stride, p0, p1, g.dst.pixel_stride);
  });
}

// The vector path's plan, or nothing when it does not apply: f32, a destination in 8- or 16-channel
// blocks, every source channel inside an 8-element chunk of its pixel (a pixel stride of a multiple
// of 8 elements: blocked layouts, nhwc with a multiple of 8 channels), an AVX2 CPU.
std::vector<Vector8> plan_vectors(const std::vector<HostLayout>& srcs, const HostLayout& dst,
                                  graph::DataType dtype, const std::vector<ChannelSource>& from) {
#ifdef STAGECRAFT_HOST_AVX2
  const bool applies = host_has_avx2() && dtype == graph::DataType::kF32 && dst.block > 0 && dst.block % 8 == 0 &&
                       std::all_of(srcs.begin(), srcs.end(), [](const HostLayout& s) { return s.pixel_stride % 8 == 0; });
  if (!applies) return {};
  std::vector<Vector8> vectors;
  for (int64_t j0 = 0; j0 < dst.padded_channels; j0 += 8) {
    Vector8 v;
    for (int64_t lane = 0; lane < 8 && j0 + lane < dst.channels; ++lane) {
      const ChannelSource& f = from[static_cast<size_t>(j0 + lane)];
      const HostLayout& s = srcs[static_cast<size_t>(f.slot)];
      const int64_t offset = s.channel_offset(f.channel), start = offset - offset % 8;
      auto same = [&](const Chunk& c) { return c.slot == f.slot && c.offset == start; };
      auto it = std::find_if(v.chunks.begin(), v.chunks.end(), same);
      if (it == v.chunks.end()) {
        v.chunks.push_back({f.slot, start, s.pixel_stride, s.batch_stride, {}, {}});
        it = v.chunks.end() - 1;
      }
      it->index[static_cast<size_t>(lane)] = static_cast<int32_t>(offset % 8);
      it->select[static_cast<size_t>(lane)] = -1;
    }
    vectors.push_back(std::move(v));
  }
  return vectors;
#else
  (void)srcs, (void)dst, (void)dtype, (void)from;
  return {};
#endif
}

}  // namespace

bool channel_gather_applies(const std::vector<TensorDesc>& srcs, const TensorDesc& dst) {
  auto fits = [&](const TensorDesc& d) {
    return d.shape.rank() == 4 && host_layout_known(d.layout) && d.dtype == dst.dtype &&
           d.scale == dst.scale && d.shape[0] == dst.shape[0] && d.shape[2] == dst.shape[2] &&
           d.shape[3] == dst.shape[3];
  };
  const int64_t bytes = graph::size_of(dst.dtype);
  return (bytes == 1 || bytes == 2 || bytes == 4) && fits(dst) && std::all_of(srcs.begin(), srcs.end(), fits);
}

void add_channel_gather(DnnlKernel& kernel, const std::vector<TensorDesc>& srcs,
                        const TensorDesc& dst, int dst_index, const std::vector<ChannelSource>& from) {
  if (!channel_gather_applies(srcs, dst) || static_cast<int64_t>(from.size()) != dst.shape[1]) {
    throw BackendError(cat("cpu: channel gather into ", dst.to_string(), " from ", from.size(),
                           " channels is not possible"));
  }
  auto gather = std::make_shared<Gather>();
  gather->dst = host_layout(dst);
  std::vector<HostLayout> src_geometry;
  for (const TensorDesc& s : srcs) src_geometry.push_back(host_layout(s));
  const int64_t group = gather->dst.group();
  for (int64_t g0 = 0; g0 < gather->dst.padded_channels; g0 += group) {
    std::vector<Run> runs;
    for (int64_t lane = 0; lane < group; ++lane) {
      const int64_t j = g0 + lane;
      Run next{-1, lane, 1, 0, 0, 0};
      if (j < dst.shape[1]) {
        const ChannelSource& f = from[static_cast<size_t>(j)];
        const HostLayout& s = src_geometry.at(static_cast<size_t>(f.slot));
        next = {f.slot, lane, 1, s.channel_offset(f.channel), s.pixel_stride, s.batch_stride};
      }
      if (!runs.empty()) {  // extends the last run when it continues it in memory
        Run& last = runs.back();
        const bool zeros = last.slot < 0 && next.slot < 0;
        if (zeros || (last.slot == next.slot && next.slot >= 0 && last.pixel_stride != 1 &&
                      last.pixel_stride == next.pixel_stride && last.offset + last.count == next.offset)) {
          ++last.count;
          continue;
        }
      }
      runs.push_back(next);
    }
    gather->groups.push_back(std::move(runs));
  }
  gather->vectors = plan_vectors(src_geometry, gather->dst, dst.dtype, from);
  std::vector<int> slots;
  for (size_t i = 0; i < srcs.size(); ++i) slots.push_back(static_cast<int>(i));
  slots.push_back(dst_slot(dst_index));
  DnnlKernel::HostFunction fn;
  switch (graph::size_of(dst.dtype)) {
    case 1:
      fn = [gather](const std::vector<void*>& data) { run_gather<uint8_t>(*gather, data); };
      break;
    case 2:
      fn = [gather](const std::vector<void*>& data) { run_gather<uint16_t>(*gather, data); };
      break;
    default:
      fn = [gather](const std::vector<void*>& data) { run_gather<float>(*gather, data); };
  }
  kernel.add_host(std::move(fn), std::move(slots), kChannelGatherImpl);
}

}  // namespace stagecraft::executor::cpu
