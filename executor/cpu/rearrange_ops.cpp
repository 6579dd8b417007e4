// Space to depth and reflect padding on the CPU: our own host kernels in every CPU layout
// (gathers: each output channel plane reads pixels of one input channel). Images × output
// channels are spread over the threads.
#include <memory>

#include "common/strings.h"
#include "executor/cpu/host_layout.h"
#include "executor/cpu/ops.h"

namespace stagecraft::executor::cpu {

namespace {

struct SpaceToDepth {
  HostLayout src, dst;
  int64_t block = 2;
};

void run_space_to_depth(const SpaceToDepth& r, const float* in, float* out) {
  const int64_t planes = r.dst.images * r.dst.padded_channels, c_in = r.src.channels;
  const int64_t sps = r.src.pixel_stride, dps = r.dst.pixel_stride;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < planes; ++t) {
    const int64_t n = t / r.dst.padded_channels, oc = t % r.dst.padded_channels;
    float* o = out + n * r.dst.batch_stride + r.dst.channel_offset(oc);
    if (oc >= r.dst.channels) {  // the padding lanes of a blocked destination
      for (int64_t p = 0; p < r.dst.pixels; ++p) o[p * dps] = 0.0f;
      continue;
    }
    const int64_t patch = oc / c_in, c = oc % c_in, bh = patch / r.block, bw = patch % r.block;
    const float* i = in + n * r.src.batch_stride + r.src.channel_offset(c);
    for (int64_t y = 0; y < r.dst.height; ++y) {
      const float* row = i + ((y * r.block + bh) * r.src.width + bw) * sps;
      float* orow = o + y * r.dst.width * dps;
      for (int64_t x = 0; x < r.dst.width; ++x) orow[x * dps] = row[x * r.block * sps];
    }
  }
}

// Reflect padding: per output pixel, the mirrored source pixel.
struct ReflectPad {
  HostLayout src, dst;
  int64_t top = 0, left = 0;
};

void run_reflect_pad(const ReflectPad& r, const float* in, float* out) {
  const int64_t planes = r.dst.images * r.dst.padded_channels;
  const int64_t sps = r.src.pixel_stride, dps = r.dst.pixel_stride;
  const auto mirror = [](int64_t i, int64_t size) { return i < 0 ? -i : i >= size ? 2 * (size - 1) - i : i; };
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < planes; ++t) {
    const int64_t n = t / r.dst.padded_channels, c = t % r.dst.padded_channels;
    float* o = out + n * r.dst.batch_stride + r.dst.channel_offset(c);
    if (c >= r.dst.channels) {
      for (int64_t p = 0; p < r.dst.pixels; ++p) o[p * dps] = 0.0f;
      continue;
    }
    const float* i = in + n * r.src.batch_stride + r.src.channel_offset(c);
    for (int64_t y = 0; y < r.dst.height; ++y) {
      const float* row = i + mirror(y - r.top, r.src.height) * r.src.width * sps;
      float* orow = o + y * r.dst.width * dps;
      for (int64_t x = 0; x < r.dst.width; ++x) orow[x * dps] = row[mirror(x - r.left, r.src.width) * sps];
    }
  }
}

KernelDesc check(const KernelSpec& spec, DnnlContext&) {
  const graph::TensorDesc &in = spec.srcs[0], &out = spec.dsts[0];
  if (in.dtype != graph::DataType::kF32 || out.dtype != graph::DataType::kF32) {
    return Support::unsupported(SupportReason::kDataType, cat(graph::to_string(spec.kind), " runs in f32 only"));
  }
  if (!host_layout_known(in.layout) || !host_layout_known(out.layout)) {
    return Support::unsupported(SupportReason::kLayout,
                                cat(graph::to_string(spec.kind), " reads and writes nchw, nhwc, nChw8c or nChw16c, not ",
                                    graph::to_string(in.layout), " -> ", graph::to_string(out.layout)));
  }
  return described("space_to_depth host", "", 0);
}

std::string build(DnnlKernel& k, const KernelSpec& spec, const KernelDesc&, DnnlContext&) {
  auto r = std::make_shared<SpaceToDepth>();
  r->src = host_layout(spec.srcs[0]);
  r->dst = host_layout(spec.dsts[0]);
  r->block = std::get<graph::SpaceToDepthAttrs>(spec.attrs).block;
  k.add_host([r](const std::vector<void*>& data) {
    run_space_to_depth(*r, static_cast<const float*>(data[0]), static_cast<float*>(data[1]));
  }, {0, dst_slot(0)}, "space_to_depth host");
  return "space_to_depth host";
}

}  // namespace

KernelDesc check_reflect_pad(const KernelSpec& spec, DnnlContext& ctx) {
  const KernelDesc d = check(spec, ctx);
  return d.runnable() ? described("reflect pad host", "", 0) : d;
}

std::string add_reflect_pad(DnnlKernel& k, const KernelSpec& spec) {
  auto r = std::make_shared<ReflectPad>();
  r->src = host_layout(spec.srcs[0]);
  r->dst = host_layout(spec.dsts[0]);
  const auto& a = std::get<graph::PadAttrs>(spec.attrs);
  r->top = a.pads.top;
  r->left = a.pads.left;
  k.add_host([r](const std::vector<void*>& data) {
    run_reflect_pad(*r, static_cast<const float*>(data[0]), static_cast<float*>(data[1]));
  }, {0, dst_slot(0)}, "reflect pad host");
  return "reflect pad host";
}

const OpFamily kRearrangeFamily{"rearrangement", {graph::OpKind::kSpaceToDepth}, check, build};

}  // namespace stagecraft::executor::cpu
