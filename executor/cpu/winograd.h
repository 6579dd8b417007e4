#pragma once
// Internal to the CPU backend: f32 3x3 stride-1 convolutions by Winograd's minimal filtering,
// F(m x m, 3 x 3) with m = 2 (4x4 input tiles) or m = 4 (6x6 tiles), on AVX2 + FMA CPUs. oneDNN
// 2.x has Winograd kernels only for AVX-512; on AVX2 its direct jit kernels (like ONNX Runtime's
// MLAS) do 9 multiplications per output and input channel, F(4x4, 3x3) 2.25 and F(2x2, 3x3) 4.
//
// Each tile of m x m outputs reads an (m+2) x (m+2) input tile; with the transforms of Lavin and
// Gray ("Fast Algorithms for Convolutional Neural Networks", 2016)
//   Y = A^T [ (G g G^T) (.) (B^T d B) ] A
// the convolution becomes (m+2)^2 independent matrix products (tiles x in-channels) times
// (in-channels x out-channels), one per position of the transformed tile, between the input tiles
// transformed once per run and the weights transformed once at build. Tiles are processed in
// blocks that stay in the cache; the products run on an FMA register-tile kernel.
//
// Results differ from direct convolution by rounding only (the transforms' coefficients are small:
// measured relative errors are given in the tests), which is why the choice is visible in the
// kernel's implementation name and can be turned off (BackendConfig::winograd).

#include <cstdint>
#include <memory>
#include <vector>

#include "executor/cpu/host_layout.h"
#include "graph/op.h"

namespace stagecraft::executor::cpu {

/// What a Winograd convolution computes: y = act(conv3x3(x) + bias + residual).
struct WinogradProblem {
  HostLayout src, dst;            ///< the input and output (and residual) tensors
  int64_t pad_top = 0, pad_left = 0;
  graph::Activation activation = graph::Activation::kNone;
  bool residual = false;           ///< a residual input in dst's layout is added
  int tile = 4;                    ///< m: outputs per tile side (2 or 4)
  int threads = 1;                 ///< OpenMP threads it runs on (workspace per thread)
};

/// Whether a problem of this geometry can run as Winograd here: x86 with AVX2 and FMA, both
/// tensors with whole 8-channel groups (nhwc with channels % 8 == 0, nChw8c/nChw16c with channels
/// a multiple of the block), an activation of none, ReLU or ReLU6.
bool winograd_supported(const WinogradProblem& p);

/// A Winograd convolution with its transformed weights.
class WinogradConv {
 public:
  /// `weights` oihw (out x in x 3 x 3), `bias` empty or one per output channel.
  WinogradConv(const WinogradProblem& p, const std::vector<float>& weights,
               const std::vector<float>& bias);
  /// Scratch bytes `run` needs (all threads).
  size_t workspace_bytes() const;
  /// Runs on the calling thread's OpenMP team (at most problem().threads threads).
  void run(const float* src, const float* residual, float* dst, void* workspace) const;
  const WinogradProblem& problem() const { return p_; }
  /// "winograd F(4x4,3x3) (ours)".
  std::string name() const;

 private:
  WinogradProblem p_;
  int64_t alpha_ = 0, tiles_h_ = 0, tiles_w_ = 0;
  std::vector<float> u_;                 // transformed weights, packed per position and panel
  std::vector<float> bias_;              // one per output channel (zeros when none)
};

}  // namespace stagecraft::executor::cpu
