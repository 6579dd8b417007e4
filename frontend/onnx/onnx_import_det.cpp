// The ONNX importer's Det of small matrices: the determinant of each [M, M] matrix of a [..., M, M]
// tensor by Leibniz's formula, the sum over the permutations s of sign(s) · x[0, s(0)] · ... ·
// x[M-1, s(M-1)], written as element slices, products and sums (M <= 4: at most 24 terms of 4).
// Larger matrices would need a factorisation with pivoting and are refused by name.
#include <algorithm>
#include <numeric>
#include <vector>

#include "common/strings.h"
#include "frontend/onnx/onnx_import_expansion.h"

namespace stagecraft::graph::onnx_import {

namespace {

constexpr int64_t kLargestDet = 4;

// The sign of a permutation: +1 for an even number of inversions, -1 for an odd one.
int sign_of(const std::vector<int64_t>& p) {
  int inversions = 0;
  for (size_t i = 0; i < p.size(); ++i)
    for (size_t j = i + 1; j < p.size(); ++j) inversions += p[i] > p[j] ? 1 : 0;
  return inversions % 2 == 0 ? 1 : -1;
}

}  // namespace

void Importer::expand_det(const onnx::NodeProto& node, Expansion& e, const ExpandedInput& in) {
  if (in.rank < 3) {
    fail(node, cat("the determinant of one matrix is a scalar (rank 0): not supported (give a batch: [N, M, M])"));
  }
  const int64_t m = in.dims[in.rank - 1];
  if (in.dims[in.rank - 2] != m) fail(node, cat("the matrices must be square, got ", in.dims[in.rank - 2], " x ", m));
  if (m < 1 || m > kLargestDet) fail(node, cat("matrices of ", m, " x ", m, " are not supported (1 to ", kLargestDet, ")"));
  const auto rows = static_cast<int64_t>(in.rank) - 2;
  // x[..., i, j] as a tensor of the batch dimensions, each element taken once.
  std::vector<std::vector<std::string>> at(static_cast<size_t>(m), std::vector<std::string>(static_cast<size_t>(m)));
  for (int64_t i = 0; i < m; ++i) {
    const std::string row = e.element(node.input(0), rows, i);
    for (int64_t j = 0; j < m; ++j) at[static_cast<size_t>(i)][static_cast<size_t>(j)] = e.element(row, rows, j);
  }
  std::vector<int64_t> p(static_cast<size_t>(m));
  std::iota(p.begin(), p.end(), 0);
  std::string sum;
  do {
    std::string term = at[0][static_cast<size_t>(p[0])];
    for (int64_t i = 1; i < m; ++i) term = e.op("Mul", {term, at[static_cast<size_t>(i)][static_cast<size_t>(p[static_cast<size_t>(i)])]});
    if (sum.empty()) {
      sum = sign_of(p) > 0 ? term : e.op("Neg", {term});
    } else {
      sum = e.op(sign_of(p) > 0 ? "Add" : "Sub", {sum, term});
    }
  } while (std::next_permutation(p.begin(), p.end()));
  e.op("Identity", {sum}, {}, output_of(node, 0));
}

}  // namespace stagecraft::graph::onnx_import
