// The Cook-Toom transforms of winograd_transforms.h.
#include "executor/cpu/winograd_transforms.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace stagecraft::executor::cpu {

namespace {

std::vector<double> interpolation_points(int64_t alpha) {
  std::vector<double> p = {0, 1, -1, 2, -2, 0.5, -0.5};
  if (alpha == 9) p.push_back(1.5);
  if (alpha == 10) p.insert(p.end(), {0.75, -0.75});
  p.resize(static_cast<size_t>(alpha - 1));
  return p;
}

// E(k): alpha x k.
std::vector<double> evaluation(const std::vector<double>& points, int64_t k) {
  const int64_t alpha = static_cast<int64_t>(points.size()) + 1;
  std::vector<double> e(static_cast<size_t>(alpha * k), 0.0);
  for (int64_t j = 0; j + 1 < alpha; ++j) {
    double power = 1.0;
    for (int64_t i = 0; i < k; ++i, power *= points[static_cast<size_t>(j)]) e[static_cast<size_t>(j * k + i)] = power;
  }
  e[static_cast<size_t>((alpha - 1) * k + k - 1)] = 1.0;
  return e;
}

// The inverse of an n x n matrix (Gauss-Jordan, partial pivoting; E(alpha) is a Vandermonde
// matrix with distinct points, so it is invertible).
std::vector<double> inverse(std::vector<double> a, int64_t n) {
  std::vector<double> inv(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) inv[static_cast<size_t>(i * n + i)] = 1.0;
  const auto at = [n](std::vector<double>& m, int64_t r, int64_t c) -> double& { return m[static_cast<size_t>(r * n + c)]; };
  for (int64_t c = 0; c < n; ++c) {
    int64_t pivot = c;
    for (int64_t r = c + 1; r < n; ++r) {
      if (std::fabs(at(a, r, c)) > std::fabs(at(a, pivot, c))) pivot = r;
    }
    for (int64_t k = 0; k < n; ++k) {
      std::swap(at(a, c, k), at(a, pivot, k));
      std::swap(at(inv, c, k), at(inv, pivot, k));
    }
    const double d = at(a, c, c);
    for (int64_t k = 0; k < n; ++k) {
      at(a, c, k) /= d;
      at(inv, c, k) /= d;
    }
    for (int64_t r = 0; r < n; ++r) {
      if (r == c || at(a, r, c) == 0.0) continue;
      const double f = at(a, r, c);
      for (int64_t k = 0; k < n; ++k) {
        at(a, r, k) -= f * at(a, c, k);
        at(inv, r, k) -= f * at(inv, c, k);
      }
    }
  }
  return inv;
}

}  // namespace

LineTransforms line_transforms(int64_t m, int64_t taps) {
  const int64_t alpha = m + taps - 1;
  const std::vector<double> points = interpolation_points(alpha);
  LineTransforms t;
  const std::vector<double> em = evaluation(points, m);
  t.at.resize(static_cast<size_t>(m * alpha));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < alpha; ++j) t.at[static_cast<size_t>(i * alpha + j)] = em[static_cast<size_t>(j * m + i)];
  t.g = evaluation(points, taps);
  const std::vector<double> e_inv = inverse(evaluation(points, alpha), alpha);
  t.bt.resize(static_cast<size_t>(alpha * alpha));
  for (int64_t i = 0; i < alpha; ++i) {
    double largest = 0.0;
    for (int64_t j = 0; j < alpha; ++j) {
      const double v = e_inv[static_cast<size_t>(j * alpha + i)];
      t.bt[static_cast<size_t>(i * alpha + j)] = v;
      largest = std::max(largest, std::fabs(v));
    }
    for (int64_t j = 0; j < alpha; ++j) t.bt[static_cast<size_t>(i * alpha + j)] /= largest;
    for (int64_t k = 0; k < taps; ++k) t.g[static_cast<size_t>(i * taps + k)] *= largest;
  }
  return t;
}

}  // namespace stagecraft::executor::cpu
