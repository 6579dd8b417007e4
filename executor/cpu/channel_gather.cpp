// Channel gathers: each destination channel copied from a channel of a source, in any CPU layout.
//
// A destination (host_layout.h) is walked as groups of channels that sit together at one pixel
// (one channel in nchw, all of them in nhwc, a block in nChw8c/nChw16c): per group, per pixel, per
// lane. Lanes whose sources are consecutive in memory are copied as runs.
#include "executor/cpu/channel_gather.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "common/strings.h"
#include "executor/cpu/host_layout.h"

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

struct Gather {
  HostLayout dst;
  std::vector<std::vector<Run>> groups;  // per destination group, in lane order
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

template <class T>
void run_gather(const Gather& g, const std::vector<void*>& data) {
  T* const out = static_cast<T*>(data.back());
  // Tasks: (image, group, pixel chunk); a chunk keeps a task's lines in cache.
  constexpr int64_t kChunk = 256;
  const int64_t chunks = (g.dst.pixels + kChunk - 1) / kChunk;
  const int64_t n_groups = static_cast<int64_t>(g.groups.size());
  const int64_t tasks = g.dst.images * n_groups * chunks;
  const int64_t group_stride = g.dst.group_stride();
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t image = t / (n_groups * chunks);
    const int64_t group = t / chunks % n_groups;
    const int64_t p0 = t % chunks * kChunk, p1 = std::min(g.dst.pixels, p0 + kChunk);
    copy_runs(g.groups[static_cast<size_t>(group)], data, image,
              out + image * g.dst.batch_stride + group * group_stride, p0, p1, g.dst.pixel_stride);
  }
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
