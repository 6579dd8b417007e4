// Ops on row-major tensors of any rank (a transformer's tokens, heads and attention scores), on
// oneDNN: matmul of two activations (its matmul primitive, batch dimensions broadcast), transpose
// (a reorder from the source seen through permuted strides; a swap of two blocks of axes, the
// [N, C, L] -> [N, L, C] of detection heads and attention, by our tiled host loop: oneDNN 2.6's
// reorder walks it element by element), narrow (a reorder from a
// sub-memory) and concat_constant (the input reordered into its place, the constant block —
// packed once per sample at creation — into the rest).
#include <algorithm>
#include <cstring>
#include <optional>

#include "common/strings.h"
#include "executor/cpu/ops.h"

namespace stagecraft::executor::cpu {

namespace {

using dnnl::memory;
using graph::OpKind;

constexpr const char* kReorderImpl = "reorder";
constexpr const char* kSwapImpl = "transpose host (tiled swap)";

// A transpose that moves whole blocks: input [O, A, B, I] to output [O, B, A, I] (O, I may be 1),
// after joining the axes the permutation keeps together.
struct BlockSwap {
  int64_t outer = 1, a = 1, b = 1, inner = 1;
};

std::optional<BlockSwap> block_swap(const KernelSpec& spec) {
  const auto& perm = std::get<graph::TransposeAttrs>(spec.attrs).perm;
  const graph::Shape& in = spec.srcs[0].shape;
  // Runs of output axes that read consecutive input axes, each as one axis: (first input axis,
  // extent), in output order.
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (size_t i = 0; i < perm.size(); ++i) {
    const int64_t extent = in[static_cast<size_t>(perm[i])];
    if (!runs.empty() && perm[i] == perm[i - 1] + 1) {
      runs.back().second *= extent;
    } else {
      runs.emplace_back(perm[i], extent);
    }
  }
  // Leading and trailing runs that stay in place are the outer and inner blocks.
  std::vector<std::pair<int64_t, int64_t>> sorted = runs;
  std::sort(sorted.begin(), sorted.end());
  BlockSwap s;
  size_t first = 0, last = runs.size();
  if (runs.size() >= 3 && runs.front() == sorted.front()) s.outer = runs[first++].second;
  if (last - first >= 3 && runs.back() == sorted.back()) s.inner = runs[--last].second;
  if (last - first != 2 || runs[first].first < runs[first + 1].first) return std::nullopt;
  s.b = runs[first].second;
  s.a = runs[first + 1].second;
  return s;
}

// out[o][j][i][:] = in[o][i][j][:], in tiles of 16 x 16 blocks.
void swap_blocks(const BlockSwap& s, const float* in, float* out) {
  constexpr int64_t kTile = 16;
  const int64_t tiles_a = (s.a + kTile - 1) / kTile, tiles_b = (s.b + kTile - 1) / kTile;
  const auto bytes = static_cast<size_t>(s.inner) * sizeof(float);
#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < s.outer * tiles_a * tiles_b; ++task) {
    const int64_t o = task / (tiles_a * tiles_b), ta = task / tiles_b % tiles_a, tb = task % tiles_b;
    const float* from = in + o * s.a * s.b * s.inner;
    float* to = out + o * s.a * s.b * s.inner;
    const int64_t i_end = std::min(s.a, (ta + 1) * kTile), j_end = std::min(s.b, (tb + 1) * kTile);
    for (int64_t i = ta * kTile; i < i_end; ++i) {
      for (int64_t j = tb * kTile; j < j_end; ++j) {
        if (s.inner == 1) {
          to[j * s.a + i] = from[i * s.b + j];
        } else {
          std::memcpy(to + (j * s.a + i) * s.inner, from + (i * s.b + j) * s.inner, bytes);
        }
      }
    }
  }
}

dnnl::matmul::primitive_desc matmul_pd(const KernelSpec& spec, const DnnlContext& ctx) {
  dnnl::matmul::desc d(md(spec.srcs[0]), md(spec.srcs[1]), md(spec.dsts[0]));
  return {d, make_attr(), ctx.engine, /*allow_empty=*/true};
}

// The source of a transpose seen in the destination's dimension order: output dimension i reads
// input dimension perm[i] with its stride.
memory::desc permuted_source(const KernelSpec& spec) {
  const graph::TensorDesc& in = spec.srcs[0];
  const auto& perm = std::get<graph::TransposeAttrs>(spec.attrs).perm;
  memory::dims in_strides(in.shape.rank(), 1);
  for (size_t i = in.shape.rank(); i-- > 1;) in_strides[i - 1] = in_strides[i] * in.shape[i];
  memory::dims strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) strides[i] = in_strides[static_cast<size_t>(perm[i])];
  return memory::desc(dims_of(spec.dsts[0].shape), dnnl_type(in.dtype), strides);
}

// Where the input and the constant block sit in a concat_constant's destination.
struct ConcatPlaces {
  memory::dims offset_input, offset_constant;
};
ConcatPlaces places_of(const KernelSpec& spec) {
  const auto& a = std::get<graph::ConcatConstantAttrs>(spec.attrs);
  const size_t rank = spec.dsts[0].shape.rank();
  ConcatPlaces p{memory::dims(rank, 0), memory::dims(rank, 0)};
  const int64_t input_extent = spec.srcs[0].shape[static_cast<size_t>(a.axis)];
  (a.before ? p.offset_input : p.offset_constant)[static_cast<size_t>(a.axis)] =
      a.before ? a.count : input_extent;
  return p;
}

// Whether the tiled host swap runs `spec`: a block swap of f32 elements (the host loop moves
// floats; bf16 transposes take oneDNN's reorder).
std::optional<BlockSwap> host_swap(const KernelSpec& spec) {
  if (spec.srcs[0].dtype != graph::DataType::kF32) return std::nullopt;
  return block_swap(spec);
}

// f32 everywhere, or bf16 where oneDNN moves 2-byte elements (transpose, narrow: the destination
// in the source's type) or multiplies them (matmul: two bf16 sources, a bf16 or f32 destination
// from its f32 accumulators). concat_constant's constant is f32.
bool types_supported(const KernelSpec& spec) {
  using graph::DataType;
  const DataType in = spec.srcs[0].dtype, out = spec.dsts[0].dtype;
  if (in == DataType::kF32) return out == DataType::kF32 && (spec.kind != OpKind::kMatMul || spec.srcs[1].dtype == in);
  if (in != DataType::kBF16 || spec.kind == OpKind::kConcatConstant) return false;
  if (spec.kind == OpKind::kMatMul) return spec.srcs[1].dtype == in && (out == DataType::kBF16 || out == DataType::kF32);
  return out == in;
}

KernelDesc check(const KernelSpec& spec, DnnlContext& ctx) {
  if (!types_supported(spec)) {
    return Support::unsupported(SupportReason::kDataType,
                                cat(graph::to_string(spec.kind), " runs in f32", spec.kind == OpKind::kConcatConstant ? "" : " or bf16",
                                    " (got ", graph::to_string(spec.srcs[0].dtype), " -> ",
                                    graph::to_string(spec.dsts[0].dtype), ")"));
  }
  for (const auto* d : {&spec.srcs[0], &spec.dsts[0]}) {
    if (d->layout != graph::Layout::kRowMajor && d->layout != graph::Layout::kNC &&
        d->layout != graph::Layout::kNCHW) {
      return Support::unsupported(SupportReason::kLayout,
                                  cat(graph::to_string(spec.kind), " reads and writes row-major tensors, not ",
                                      graph::to_string(d->layout)));
    }
  }
  if (spec.kind == OpKind::kMatMul) {
    if (spec.srcs[1].layout != graph::Layout::kRowMajor && spec.srcs[1].layout != graph::Layout::kNCHW) {
      return Support::unsupported(SupportReason::kLayout, "matmul reads row-major tensors");
    }
    const auto pd = matmul_pd(spec, ctx);
    if (!pd) return Support::unsupported(SupportReason::kLibrary, "oneDNN has no matmul for these shapes");
    return described(pd.impl_info_str(), "a matmul", workspace_of(pd),
                     std::make_shared<PdState<dnnl::matmul::primitive_desc>>(pd));
  }
  if (spec.kind == OpKind::kConcatConstant && (!spec.weights || spec.weights->weight.empty())) {
    return Support::unsupported(SupportReason::kWeights, "concat_constant needs its constant (weight)");
  }
  if (spec.kind == OpKind::kTranspose && host_swap(spec)) return described(kSwapImpl, "");
  return described(kReorderImpl, "");
}

std::string build(DnnlKernel& k, const KernelSpec& spec, const KernelDesc& desc, DnnlContext& ctx) {
  const memory::desc dst = md(spec.dsts[0]);
  switch (spec.kind) {
    case OpKind::kMatMul: {
      const auto& pd = state_of<PdState<dnnl::matmul::primitive_desc>>(desc, spec).pd;
      k.add({dnnl::matmul(pd),
             {{DNNL_ARG_SRC, 0, md(spec.srcs[0])},
              {DNNL_ARG_WEIGHTS, 1, md(spec.srcs[1])},
              {DNNL_ARG_DST, dst_slot(0), dst}}},
            scratch(pd));
      return pd.impl_info_str();
    }
    case OpKind::kTranspose:
      if (const std::optional<BlockSwap> swap = host_swap(spec)) {
        return k.add_host_f32([s = *swap](const float* src, float* out) { swap_blocks(s, src, out); }, kSwapImpl);
      }
      k.add_reorder(ctx, permuted_source(spec), 0, dst, dst_slot(0));
      return kReorderImpl;
    case OpKind::kNarrow: {
      const auto& a = std::get<graph::NarrowAttrs>(spec.attrs);
      memory::dims offsets(spec.srcs[0].shape.rank(), 0);
      offsets[static_cast<size_t>(a.axis)] = a.begin;
      k.add_reorder(ctx, md(spec.srcs[0]).submemory_desc(dims_of(spec.dsts[0].shape), offsets), 0,
                    dst, dst_slot(0));
      return kReorderImpl;
    }
    default: {  // concat_constant
      const auto& a = std::get<graph::ConcatConstantAttrs>(spec.attrs);
      const ConcatPlaces p = places_of(spec);
      k.add_reorder(ctx, md(spec.srcs[0]), 0,
                    dst.submemory_desc(dims_of(spec.srcs[0].shape), p.offset_input), dst_slot(0));
      // The constant repeated for every sample, copied into its block by one reorder.
      graph::Shape block = spec.srcs[0].shape;
      block[static_cast<size_t>(a.axis)] = a.count;
      const std::vector<float>& one = spec.weights->weight;
      std::vector<float> all;
      all.reserve(one.size() * static_cast<size_t>(block[0]));
      for (int64_t n = 0; n < block[0]; ++n) all.insert(all.end(), one.begin(), one.end());
      const memory::desc plain = plain_md(block, graph::DataType::kF32);
      const memory::desc into = dst.submemory_desc(dims_of(block), p.offset_constant);
      dnnl::reorder::primitive_desc rpd(ctx.engine, plain, ctx.engine, into, make_attr());
      DnnlKernel::StepSpec step{dnnl::reorder(rpd), {{DNNL_ARG_DST, dst_slot(0), into}}};
      step.add_constant(DNNL_ARG_SRC, pack(ctx, plain, plain, all));
      k.add(std::move(step), scratch(rpd));
      return kReorderImpl;
    }
  }
}

}  // namespace

const OpFamily kTensorFamily{"tensor",
                             {OpKind::kMatMul, OpKind::kTranspose, OpKind::kNarrow, OpKind::kConcatConstant},
                             check,
                             build};

}  // namespace stagecraft::executor::cpu
