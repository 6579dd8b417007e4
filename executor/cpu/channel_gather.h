#pragma once
// Internal to the CPU backend: a native kernel step that moves whole channels between 4-D tensors
// of any CPU layout (nchw, nhwc, nChw8c, nChw16c) in one pass over the destination. It runs what
// oneDNN has only slow paths for: concatenations and slices whose channel ranges do not start on a
// block of a blocked layout (oneDNN: reference concat, or two reorders through nchw) and channel
// permutations outside nchw (oneDNN 2.x: reference shuffle in nhwc).
//
//   // destination channel j of a 2-group shuffle of 116 channels is source channel (j%2)*58 + j/2
//   std::vector<ChannelSource> from;
//   for (int64_t j = 0; j < 116; ++j) from.push_back({0, (j % 2) * 58 + j / 2});
//   add_channel_gather(kernel, {spec.srcs[0]}, spec.dsts[0], 0, from);

#include <vector>

#include "executor/cpu/dnnl_kernel.h"

namespace stagecraft::executor::cpu {

/// Where one destination channel comes from: channel `channel` of source slot `slot`.
struct ChannelSource {
  int slot;
  int64_t channel;
};

/// Whether add_channel_gather can move between these tensors: rank 4, CPU layouts, one element
/// type and scale, one batch and spatial size.
bool channel_gather_applies(const std::vector<graph::TensorDesc>& srcs,
                            const graph::TensorDesc& dst);

/// Appends a step writing destination `dst_index` (described by `dst`), whose channel j is
/// `from[j]` (a channel of source slot `from[j].slot`, described by `srcs[slot]`). The padding
/// lanes of a blocked destination are zeroed. Requires channel_gather_applies().
void add_channel_gather(DnnlKernel& kernel, const std::vector<graph::TensorDesc>& srcs,
                        const graph::TensorDesc& dst, int dst_index,
                        const std::vector<ChannelSource>& from);

/// Implementation name of kernels made of channel gathers.
inline constexpr const char* kChannelGatherImpl = "channel gather";

}  // namespace stagecraft::executor::cpu
