#pragma once
// Internal to the CPU backend: op families. Each family pairs its check with its builder (as
// oneDNN pairs a primitive descriptor with its primitive): the check describes the kernel — a
// KernelDesc: native, reference-only or unsupported, the implementation, the workspace where it
// knows it, and a state holding what it worked out — and the builder builds from that desc, so
// that what `supports()` answers is what `create_kernel()` builds, worked out once.
//
// Families whose desc carries a state the builder reads (and refuses a desc without, see
// state_of): convolution (Winograd problem or residual mode, attributes, primitive descriptors),
// linear (f32: the primitive descriptor), pooling (oneDNN's: the primitive descriptor),
// element-wise (the primitive descriptors), binary (broadcasting: the primitive descriptor).
// The others (additions, data movement, resize) decide again from the spec with the same
// functions their check used; their descs name the implementation without a state.
//
// To add an op kind: put it in a family's `kinds` (or add a family to the table of family_of in
// cpu_backend.cpp), give the family a check (library-specific rules; the backend-independent ones
// in executor/op_rules.h run before) and a builder appending oneDNN steps to a DnnlKernel.

#include <string>
#include <vector>

#include "executor/cpu/dnnl_kernel.h"

namespace stagecraft::executor::cpu {

/// A group of op kinds built alike.
struct OpFamily {
  const char* name;                 ///< for messages ("convolution")
  std::vector<graph::OpKind> kinds;  ///< kinds it builds
  /// Describes `spec`: whether oneDNN (or our own kernel) runs it natively, only by reference, or
  /// not at all; the implementation, the workspace where known, the state for `build` (the
  /// backend fills in the layouts).
  KernelDesc (*check)(const KernelSpec& spec, DnnlContext& ctx);
  /// Appends the steps of `spec`, described by `desc` (runnable, from check), to `kernel`;
  /// returns the implementation name.
  std::string (*build)(DnnlKernel& kernel, const KernelSpec& spec, const KernelDesc& desc, DnnlContext& ctx);
};

/// Whether our f32 host kernels (resize, layer norm, space to depth, reflect padding) run `spec`:
/// f32 in and out, in layouts they know (nchw, nhwc, nChw8c, nChw16c; nc for rank 2 and
/// row-major plain tensors where `rank2` allows it); the description `impl` with no workspace, or why not.
KernelDesc host_kernel_desc(const KernelSpec& spec, const std::string& impl, bool rank2 = false);
/// f32 row-major tensors in and out (row_major, nc, nchw: the same order), every source and
/// destination; the description `impl`, or why not.
KernelDesc host_row_major_desc(const KernelSpec& spec, const std::string& impl);

/// The family that builds `kind`.
const OpFamily& family_of(graph::OpKind kind);

// The families (one file each).
extern const OpFamily kConvolutionFamily;  // conv2d
extern const OpFamily kDeconvolutionFamily;  // conv_transpose2d
extern const OpFamily kLinearFamily;       // linear
extern const OpFamily kPoolingFamily;      // max_pool, avg_pool, global_avg_pool, global_max_pool
extern const OpFamily kElementwiseFamily;  // activations, scale, batch_norm, softmax
extern const OpFamily kBinaryFamily;       // add, binary
extern const OpFamily kDataMovementFamily;  // concat, split, slice, identity, pad, flatten, reshape,
                                            // channel_shuffle
extern const OpFamily kResizeFamily;        // resize (our own host kernel)
extern const OpFamily kNormalisationFamily;  // layer_norm (our own host kernel)
extern const OpFamily kRearrangeFamily;      // space_to_depth (our own host kernel)
extern const OpFamily kReductionFamily;      // reduce_mean, _max, _sum, _min, _prod (oneDNN reduction)
extern const OpFamily kTensorFamily;         // matmul, transpose, narrow, concat_constant (row-major)
extern const OpFamily kUnaryFamily;          // unary (our own host loop)
extern const OpFamily kWhereFamily;          // where (our own host loop)
extern const OpFamily kGridSampleFamily;     // grid_sample (our own host loop)
extern const OpFamily kPoolNdFamily;         // pool_nd (our own host loop)
extern const OpFamily kIndexFamily;          // top_k, gather_elements (our own host loops)
extern const OpFamily kResizeNdFamily;       // resize_nd (our own host loop)

/// A binary op with broadcasting on our own host loop (host_binary.cpp), for broadcasts oneDNN
/// runs only by reference: whether it applies (f32, row-major layouts, the first operand full),
/// and its build.
inline constexpr const char* kHostBinaryImpl = "binary host";
/// Row-major strides of an operand of `dims` broadcast to `rank` dimensions (leading 1s added), 0
/// along its dimensions of 1: how the host loops (binary, where) read a broadcast operand.
std::vector<int64_t> broadcast_strides(std::vector<int64_t> dims, size_t rank);
bool host_binary_applies(const KernelSpec& spec);
std::string add_host_binary(DnnlKernel& kernel, const KernelSpec& spec);

/// (Log) softmax over an axis of a row-major f32 tensor on our own host loop (softmax_host.cpp),
/// where oneDNN has only its reference kernel (every axis but the last): whether it applies (f32,
/// plain layouts in and out) and its build.
inline constexpr const char* kHostSoftmaxImpl = "softmax host";
bool host_softmax_applies(const KernelSpec& spec);
std::string add_host_softmax(DnnlKernel& kernel, const KernelSpec& spec);

/// The key of a linear layer's measured choice between oneDNN's inner product and its matmul
/// (linear_ops.cpp; verdicts "inner product" or "matmul" in ctx.choices): element types, the rows'
/// shapes, activation, bias, threads.
std::string linear_signature(const KernelSpec& spec);

/// Reflect padding (PadAttrs::reflect), our own host kernel in rearrange_ops.cpp, for the data
/// movement family's pad: its description and its build.
KernelDesc check_reflect_pad(const KernelSpec& spec, DnnlContext& ctx);
std::string add_reflect_pad(DnnlKernel& kernel, const KernelSpec& spec);

}  // namespace stagecraft::executor::cpu
