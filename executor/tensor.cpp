#include "executor/tensor.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/random.h"

namespace stagecraft::executor {

namespace {
constexpr double kMinScale = 1e-6;
}  // namespace

HostTensor random_host_tensor(const graph::Shape& shape, uint64_t seed) {
  HostTensor t{shape, std::vector<float>(static_cast<size_t>(shape.numel()))};
  SplitMix64 rng(seed);
  for (float& x : t.data) x = static_cast<float>(2.0 * rng.uniform() - 1.0);
  return t;
}

double relative_error(const HostTensor& got, const HostTensor& want) {
  if (got.shape != want.shape || got.data.size() != want.data.size()) {
    return std::numeric_limits<double>::infinity();
  }
  double scale = kMinScale, worst = 0;
  for (size_t i = 0; i < want.data.size(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(want.data[i])));
    const double diff = std::fabs(static_cast<double>(got.data[i]) - want.data[i]);
    if (std::isnan(diff)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, diff);
  }
  return worst / scale;
}

}  // namespace stagecraft::executor
