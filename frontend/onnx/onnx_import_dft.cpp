// The ONNX importer's expansion of DFT (opsets 17 and 20): MatMuls by constant cosine and sine
// matrices along the signal axis.
#include <cmath>
#include <numbers>
#include <vector>

#include "common/strings.h"
#include "frontend/onnx/onnx_import_expansion.h"

namespace stagecraft::graph::onnx_import {

void Importer::expand_dft(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in) {
  // A DFT is linear along its signal axis: the real and imaginary parts each a MatMul by constant
  // matrices of cosines and sines, the axis moved last and back. Forward: W[k, n] = e^(-2πi kn/L);
  // inverse: e^(+2πi kn/L) / L; one-sided forward keeps k <= L/2; one-sided inverse (irfft) takes
  // the half spectrum and gives the real signal (Hermitian extension, numpy's rules).
  const auto rank = static_cast<int64_t>(in.rank);
  const int64_t parts = in.dims.back();
  if (rank < 3 || (parts != 1 && parts != 2)) {
    fail(node, cat("the input must be [..., signal, 1 or 2] (real or complex), got [", join(in.dims, ", "), "]"));
  }
  int64_t axis = opset_ >= 20 ? (has_input(node, 2) ? constant_ints(node, 2, "axis").at(0) : -2) : attr_int(node, "axis", 1);
  axis = axis < 0 ? axis + rank : axis;
  if (axis < 0 || axis >= rank - 1) fail(node, cat("axis ", axis, " must be a signal axis (not the last) of rank ", rank));
  const bool inverse = attr_int(node, "inverse", 0) != 0, onesided = attr_int(node, "onesided", 0) != 0;
  const int64_t n_in = in.dims[static_cast<size_t>(axis)];
  int64_t length = inverse && onesided ? 2 * (n_in - 1) : n_in;
  if (has_input(node, 1)) length = constant_ints(node, 1, "dft_length").at(0);
  if (length < 1) fail(node, cat("dft_length ", length, " must be >= 1"));
  const bool irfft = inverse && onesided;
  const int64_t k_out = irfft ? length : onesided ? length / 2 + 1 : length;
  // [n_in, k_out] matrices: yr = xr·A + xi·B, yi = xr·C + xi·D.
  std::vector<float> a(static_cast<size_t>(n_in * k_out)), b(a.size()), c(a.size()), d(a.size());
  const double pi2 = 2 * std::acos(-1.0);
  for (int64_t n = 0; n < n_in; ++n)
    for (int64_t k = 0; k < k_out; ++k) {
      const auto at = static_cast<size_t>(n * k_out + k);
      if (irfft) {  // n: frequency (only n <= L/2 count), k: time
        if (n > length / 2) continue;
        const double w = (n == 0 || 2 * n == length) ? 1.0 : 2.0;
        const double angle = pi2 * static_cast<double>(n * k % length) / static_cast<double>(length);
        a[at] = static_cast<float>(w * std::cos(angle) / static_cast<double>(length));
        b[at] = n == 0 || 2 * n == length ? 0.0f : static_cast<float>(-w * std::sin(angle) / static_cast<double>(length));
        continue;
      }
      if (n >= length) continue;  // the signal truncated to dft_length
      const double angle = pi2 * static_cast<double>(n * k % length) / static_cast<double>(length);
      const double scale = inverse ? 1.0 / static_cast<double>(length) : 1.0;
      const double cs = std::cos(angle) * scale, sn = (inverse ? 1.0 : -1.0) * std::sin(angle) * scale;
      a[at] = static_cast<float>(cs);   // Re(W) xr
      b[at] = static_cast<float>(-sn);  // -Im(W) xi
      c[at] = static_cast<float>(sn);   // Im(W) xr
      d[at] = static_cast<float>(cs);   // Re(W) xi
    }
  // The parts without their last axis, the signal axis last.
  std::vector<int64_t> perm(static_cast<size_t>(rank - 1));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  std::swap(perm[static_cast<size_t>(axis)], perm.back());
  const auto part = [&](int64_t i) {
    const std::string p = e.op("Slice", {node.input(0), e.ints({i}), e.ints({i + 1}), e.ints({rank - 1})});
    return e.op("Transpose", {e.unsqueeze("Squeeze", p, {rank - 1})}, {ints_attr("perm", perm)});
  };
  const std::string xr = part(0), xi = parts == 2 ? part(1) : "";
  const auto times = [&](const std::string& x, const std::vector<float>& m) {
    return e.op("MatMul", {x, e.floats(m, {n_in, k_out})});
  };
  const auto back = [&](const std::string& y) {
    return e.unsqueeze("Unsqueeze", e.op("Transpose", {y}, {ints_attr("perm", perm)}), {rank - 1});
  };
  std::string yr = times(xr, a);
  if (!xi.empty()) yr = e.op("Add", {yr, times(xi, b)});
  if (irfft) {
    e.op("Identity", {back(yr)}, {}, output_of(node, 0));
    return;
  }
  std::string yi = times(xr, c);
  if (!xi.empty()) yi = e.op("Add", {yi, times(xi, d)});
  e.op("Concat", {back(yr), back(yi)}, {int_attr("axis", -1)}, output_of(node, 0));
}

}  // namespace stagecraft::graph::onnx_import
