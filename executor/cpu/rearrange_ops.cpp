// Space to depth on the CPU: our own host kernel in every CPU layout (a gather: each output
// channel plane reads every block-th pixel of one input channel). Images × output channels are
// spread over the threads.
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

KernelDesc check(const KernelSpec& spec, DnnlContext&) {
  const graph::TensorDesc &in = spec.srcs[0], &out = spec.dsts[0];
  if (in.dtype != graph::DataType::kF32 || out.dtype != graph::DataType::kF32) {
    return Support::unsupported(SupportReason::kDataType, "space_to_depth runs in f32 only");
  }
  if (!host_layout_known(in.layout) || !host_layout_known(out.layout)) {
    return Support::unsupported(SupportReason::kLayout,
                                cat("space_to_depth reads and writes nchw, nhwc, nChw8c or nChw16c, not ",
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

const OpFamily kRearrangeFamily{"rearrangement", {graph::OpKind::kSpaceToDepth}, check, build};

}  // namespace stagecraft::executor::cpu
