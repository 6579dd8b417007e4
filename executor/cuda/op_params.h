#pragma once
// Internal to the CUDA backend: what the builders of the own kernels pass to them, derived from a
// KernelSpec: geometries, activation and binary codes, the parameters of standalone activations
// and the operand order of binary ops. CUDA-free (compiled in every build), so that host tests
// (tests/cuda/test_element_ops.cpp) run the bodies of element_ops.h with exactly these values.

#include <cstddef>
#include <vector>

#include "executor/backend.h"
#include "executor/cuda/element_ops.h"
#include "executor/cuda/movement_ops.h"

namespace stagecraft::executor::cuda {

/// The own kernels' element type of a data type.
Elem elem_of(graph::DataType t);
/// The geometry of a rank-4 (or rank-2: N × C) tensor. A row-major tensor of another rank is
/// N × C × (the rest) × 1 in NCHW order: its memory order is its plain order, dimension 1 is the
/// channel (copies of channel windows, concatenations along dimension 1, reshapes).
Dims4 dims_of(const graph::TensorDesc& d);
/// Whether d is a row-major tensor of the transformer ops (layout kRowMajor, any rank).
bool row_major(const graph::TensorDesc& d);
/// The own kernels' activation code of a fused activation.
Act act_of(graph::Activation a);
/// The own kernels' binary operation code.
BinOp binop_of(graph::BinaryOp op);

/// The activation and parameters of a standalone activation op (relu, relu6, sigmoid,
/// hard_sigmoid with its slope and offset, hard_swish, silu, leaky_relu with its slope); ReLU6's
/// bound in the destination's units.
ActParams act_params(const KernelSpec& spec);

/// How a binary kernel reads its operands: y = act(x OP o), or act(o OP x) with params.swap.
struct BinaryOperands {
  int x_src = 0;          ///< the source read as x (the destination's shape where one has it)
  int o_src = 1;          ///< the source read as o; -1: the constant
  Dims4 xd, od;           ///< their geometries (the constant: plain order, destination's rank)
  Dims4 yd;               ///< the destination's
  bool folded = true;     ///< false: a row-major broadcast needs more than 4 merged dimensions
  BinaryParams params;    ///< operation, order, fused activation
};

/// The operands of a supported binary spec (executor/cuda/binary_ops.cpp checks support): a
/// constant first operand swaps the operation; a broadcast first input is read as o, swapped, when
/// the second has the destination's shape (so that x can be read in packs).
/// Row-major operands of any rank are folded into rank-4 geometries first (fold_broadcast).
BinaryOperands binary_operands(const KernelSpec& spec);

/// Row-major shapes of one rank broadcast to `out` (each dimension equal to out's or 1) as rank-4
/// plain geometries with the same offsets: dimensions of extent 1 in `out` dropped, neighbouring
/// dimensions merged where every operand is broadcast in both or in neither, 1s prepended. The
/// operands' geometries, then out's; empty when more than 4 dimensions remain.
std::vector<Dims4> fold_broadcast(const std::vector<std::vector<int64_t>>& operands,
                                  const std::vector<int64_t>& out);

// ---- Row-major tensors (transformers) -----------------------------------------------------------

/// The geometries of a reduction from `in` to `out` (reduced dimensions 1 in out): rank-4 tensors
/// in their layouts; row-major ones folded (fold_broadcast) so that the dimensions reduced alike
/// merge. False when the fold needs more than 4 dimensions or would reduce its first.
bool reduce_dims(const graph::TensorDesc& in, const graph::TensorDesc& out, Dims4* in_dims, Dims4* out_dims);
/// The geometry of a layer normalisation: the channels of each pixel of a rank-4 tensor in its
/// layout; the last axis of a rank-2 or row-major one (N = the rows).
Dims4 norm_dims(const graph::TensorDesc& d);
/// The rows of a softmax over `axis` of d: [outer, extent, inner] in memory (rank 2 and row-major
/// tensors: around the axis; rank 4: the channels in d's layout).
SoftmaxGeometry softmax_geometry(const graph::TensorDesc& d, int64_t axis);
/// What a transpose (TransposeAttrs) or a narrow (NarrowAttrs) reads: the source's strides in the
/// destination's dimension order. Ranks up to kMaxRank.
StridedView gather_view(const KernelSpec& spec);
/// A concat_constant's geometry (ConcatConstantAttrs).
ConcatConstantParams concat_constant_params(const KernelSpec& spec);

/// One cuBLAS strided batched GEMM, in cuBLAS's column-major terms: C (m × n, ldc) = A (m × k,
/// lda) · B (k × n, ldb), `batch` times, each operand `stride_*` elements after the previous (0:
/// the same matrix for every batch), starting `offset_*` elements into its tensor. For a row-major
/// matmul [.., M, K] x [.., K, N] = [.., M, N], Cᵀ = Bᵀ · Aᵀ: cuBLAS's A is the second input
/// (m = N, lda = N), its B the first (n = M, ldb = K), C the output (ldc = N).
struct GemmCall {
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  int64_t offset_a = 0, offset_b = 0, offset_c = 0;
  int64_t batch = 1;
};

/// The GEMMs of a matmul of row-major a [..., M, K] and b [..., K, N] (equal ranks >= 3, batch
/// dimensions broadcast): the longest run of trailing batch dimensions over which each input is
/// either whole or broadcast throughout (stride 0) is one strided batched call; each combination
/// of the leading batch dimensions before it (a broadcast group) is one more call.
std::vector<GemmCall> matmul_gemms(const graph::Shape& a, const graph::Shape& b);

}  // namespace stagecraft::executor::cuda
