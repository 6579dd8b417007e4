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
  const int64_t c_in = r.src.channels, sps = r.src.pixel_stride, dps = r.dst.pixel_stride;
  for_each_plane(r.dst, out, [&](int64_t n, int64_t oc, float* o) {
    const int64_t patch = oc / c_in, c = oc % c_in, bh = patch / r.block, bw = patch % r.block;
    const float* i = in + n * r.src.batch_stride + r.src.channel_offset(c);
    for (int64_t y = 0; y < r.dst.height; ++y) {
      const float* row = i + ((y * r.block + bh) * r.src.width + bw) * sps;
      float* orow = o + y * r.dst.width * dps;
      for (int64_t x = 0; x < r.dst.width; ++x) orow[x * dps] = row[x * r.block * sps];
    }
  });
}

// Reflect padding: per output pixel, the mirrored source pixel.
struct ReflectPad {
  HostLayout src, dst;
  int64_t top = 0, left = 0;
};

void run_reflect_pad(const ReflectPad& r, const float* in, float* out) {
  const int64_t sps = r.src.pixel_stride, dps = r.dst.pixel_stride;
  const auto mirror = [](int64_t i, int64_t size) { return i < 0 ? -i : i >= size ? 2 * (size - 1) - i : i; };
  for_each_plane(r.dst, out, [&](int64_t n, int64_t c, float* o) {
    const float* i = in + n * r.src.batch_stride + r.src.channel_offset(c);
    for (int64_t y = 0; y < r.dst.height; ++y) {
      const float* row = i + mirror(y - r.top, r.src.height) * r.src.width * sps;
      float* orow = o + y * r.dst.width * dps;
      for (int64_t x = 0; x < r.dst.width; ++x) orow[x * dps] = row[mirror(x - r.left, r.src.width) * sps];
    }
  });
}

KernelDesc check(const KernelSpec& spec, DnnlContext&) {
  return host_kernel_desc(spec, "space_to_depth host");
}

std::string build(DnnlKernel& k, const KernelSpec& spec, const KernelDesc&, DnnlContext&) {
  auto r = std::make_shared<SpaceToDepth>();
  r->src = host_layout(spec.srcs[0]);
  r->dst = host_layout(spec.dsts[0]);
  r->block = std::get<graph::SpaceToDepthAttrs>(spec.attrs).block;
  return k.add_host_f32([r](const float* from, float* to) { run_space_to_depth(*r, from, to); },
                        "space_to_depth host");
}

}  // namespace

KernelDesc check_reflect_pad(const KernelSpec& spec, DnnlContext&) {
  return host_kernel_desc(spec, "reflect pad host");
}

KernelDesc host_kernel_desc(const KernelSpec& spec, const std::string& impl, bool rank2) {
  const graph::TensorDesc &in = spec.srcs[0], &out = spec.dsts[0];
  if (in.dtype != graph::DataType::kF32 || out.dtype != graph::DataType::kF32) {
    return Support::unsupported(SupportReason::kDataType,
                                cat(graph::to_string(spec.kind), " runs in f32 only: dequantise its input first"));
  }
  const auto known = [&](const graph::TensorDesc& d) {
    if (rank2 && (d.shape.rank() == 2 || d.layout == graph::Layout::kRowMajor)) {
      return d.layout == graph::Layout::kNC || d.layout == graph::Layout::kRowMajor;
    }
    return host_layout_known(d);
  };
  if (!known(in) || !known(out)) {
    return Support::unsupported(SupportReason::kLayout,
                                cat(graph::to_string(spec.kind), " reads and writes ", rank2 ? "nc, plain, " : "",
                                    "nchw, nhwc, nChw8c or nChw16c, not ", graph::to_string(in.layout), " -> ",
                                    graph::to_string(out.layout)));
  }
  return described(impl, "", 0);
}

KernelDesc host_row_major_desc(const KernelSpec& spec, const std::string& impl) {
  const auto row_major = [](graph::Layout l) {
    return l == graph::Layout::kRowMajor || l == graph::Layout::kNC || l == graph::Layout::kNCHW;
  };
  for (const auto* list : {&spec.srcs, &spec.dsts}) {
    for (const auto& d : *list) {
      if (d.dtype != graph::DataType::kF32) {
        return Support::unsupported(SupportReason::kDataType, cat(graph::to_string(spec.kind), " runs in f32"));
      }
      if (!row_major(d.layout)) {
        return Support::unsupported(SupportReason::kLayout,
                                    cat(graph::to_string(spec.kind), " reads and writes row-major tensors (nchw or plain), not ",
                                        graph::to_string(d.layout)));
      }
    }
  }
  return described(impl, "", 0);
}

std::string add_reflect_pad(DnnlKernel& k, const KernelSpec& spec) {
  auto r = std::make_shared<ReflectPad>();
  r->src = host_layout(spec.srcs[0]);
  r->dst = host_layout(spec.dsts[0]);
  const auto& a = std::get<graph::PadAttrs>(spec.attrs);
  r->top = a.pads.top;
  r->left = a.pads.left;
  return k.add_host_f32([r](const float* from, float* to) { run_reflect_pad(*r, from, to); },
                        "reflect pad host");
}

const OpFamily kRearrangeFamily{"rearrangement", {graph::OpKind::kSpaceToDepth}, check, build};

}  // namespace stagecraft::executor::cpu
