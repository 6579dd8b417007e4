#pragma once
// Internal to the CPU backend's Winograd convolutions (winograd.cpp): the 1-D transform matrices
// of F(m, K) by Cook-Toom, computed in double once per convolution.
//
// F(m, K) with alpha = m + K - 1 evaluates at alpha - 1 finite points and at infinity. With E(k)
// the alpha x k matrix that evaluates a polynomial of k coefficients there (row of a point p:
// 1, p, .., p^(k-1); the row of infinity picks the leading coefficient), the correlation
//   y_i = sum_k g_k d_(i+k), i < m,
// is the transpose of the linear convolution g * y' = E(alpha)^-1 [(E(K) g) (.) (E(m) y')], so
//   y = A^T [(G g) (.) (B^T d)]   with  A^T = E(m)^T,  G = E(K),  B^T = (E(alpha)^-1)^T.
// B^T's rows are scaled to a largest |entry| of 1 and G's rows by the inverse factors (the
// weights are transformed once, in double). Points: 0, 1, -1, 2, -2, 1/2, -1/2, then 3/2
// (alpha 9) or +-3/4 (alpha 10), the sets with the smallest float32 error we measured.
#include <cstdint>
#include <vector>

namespace stagecraft::executor::cpu {

/// The transforms of F(m, taps), row-major.
struct LineTransforms {
  std::vector<double> at, g, bt;  ///< m x alpha, alpha x taps, alpha x alpha
};

/// A^T, G and B^T of F(m, taps) (alpha = m + taps - 1 <= 10).
LineTransforms line_transforms(int64_t m, int64_t taps);

}  // namespace stagecraft::executor::cpu
