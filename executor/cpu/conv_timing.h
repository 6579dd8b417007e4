#pragma once
// Internal to the CPU backend: two oneDNN kernels of one problem timed against each other (the
// measured choices between oneDNN's AMX convolution and its next candidate, conv_ops.cpp, and
// between an inner product and a matmul for a linear layer, linear_ops.cpp).

#include <dnnl.hpp>
#include <unordered_map>

namespace stagecraft::executor::cpu {

/// Arguments for one run of `pd`'s primitive on scratch tensors of bytes 0x3F (small finite values
/// in every type): source, weights, bias where it has one, destination, scratchpad, and
/// `post_op_src` as binary post-op 0's second source where not empty.
std::unordered_map<int, dnnl::memory> scratch_arguments(const dnnl::primitive_desc_base& pd, const dnnl::engine& engine,
                                                        const dnnl::memory::desc& post_op_src = {});

/// Whether `first`'s kernel ran faster than `second`'s here (two primitive descriptors of one
/// problem, of any primitive kinds): both on scratch tensors of bytes 0x3F (small finite values in
/// every type), a binary post-op reading `post_op_src` where it is not empty (a residual), warmed
/// up, then five alternating runs each, fastest against fastest; on a thread of its own with
/// `threads` OpenMP threads (a parallel region on the calling thread would leave it an OpenMP pool).
bool first_kernel_faster(const dnnl::primitive_desc_base& first, const dnnl::primitive_desc_base& second,
                         const dnnl::memory::desc& post_op_src, int threads, const dnnl::engine& engine);

}  // namespace stagecraft::executor::cpu
