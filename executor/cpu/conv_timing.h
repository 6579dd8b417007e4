#pragma once
// Internal to the CPU backend: two oneDNN convolutions of one problem timed against each other
// (the measured choice between oneDNN's AMX kernel and its next candidate, conv_ops.cpp).

#include <dnnl.hpp>

namespace stagecraft::executor::cpu {

/// Whether `first`'s kernel ran faster than `second`'s here: both on scratch tensors of bytes 0x3F
/// (small finite values in every type), a binary post-op reading `post_op_src` where it is not
/// empty (a residual), warmed up, then five alternating runs each, fastest against fastest; on a
/// thread of its own with `threads` OpenMP threads (a parallel region on the calling thread would
/// leave it an OpenMP pool).
bool first_conv_faster(const dnnl::convolution_forward::primitive_desc& first,
                       const dnnl::convolution_forward::primitive_desc& second,
                       const dnnl::memory::desc& post_op_src, int threads, const dnnl::engine& engine);

}  // namespace stagecraft::executor::cpu
