#pragma once
// Comparisons that a NaN, an infinity or a missing element cannot pass. std::max(worst, err)
// keeps `worst` when `err` is NaN, and a loop over the shorter of two arrays never sees what is
// missing: a kernel writing NaN, or nothing, would pass. Every hand-written error loop of the tests
// goes through these (whole tensors: executor::relative_error, which follows the same rules).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

namespace stagecraft::testing {

/// What an error is when nothing can make it small: a NaN, a size mismatch.
inline constexpr double kNeverClose = std::numeric_limits<double>::infinity();

/// The larger of `worst` and `err`, infinity once an error is NaN.
inline double worst_of(double worst, double err) { return std::isnan(err) ? kNeverClose : std::max(worst, err); }

/// max |got[i] - want[i]| (any indexable containers of numbers); infinity when the sizes differ or
/// a difference is NaN.
template <class Got, class Want>
double max_abs_error(const Got& got, const Want& want) {
  if (std::size(got) != std::size(want)) return kNeverClose;
  double worst = 0;
  for (size_t i = 0; i < std::size(want); ++i) {
    worst = worst_of(worst, std::fabs(static_cast<double>(got[i]) - static_cast<double>(want[i])));
  }
  return worst;
}

/// max_abs_error relative to the scale of `want` (max |want[i]|, at least 1e-6): infinity on a NaN
/// or a size mismatch.
template <class Got, class Want>
double max_relative_error(const Got& got, const Want& want) {
  double scale = 1e-6;
  for (size_t i = 0; i < std::size(want); ++i) scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  return max_abs_error(got, want) / scale;
}

/// max_relative_error where `want` may hold NaN and infinities on purpose (a where's -inf branch,
/// NaN a select keeps): such an element matches only the same special value in `got` (infinity
/// otherwise); the others as max_relative_error, scaled by the finite elements of `want`.
template <class Got, class Want>
double max_relative_error_with_specials(const Got& got, const Want& want) {
  if (std::size(got) != std::size(want)) return kNeverClose;
  double scale = 1e-6, worst = 0;
  for (size_t i = 0; i < std::size(want); ++i) {
    if (std::isfinite(static_cast<double>(want[i]))) scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  for (size_t i = 0; i < std::size(want); ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    if (std::isnan(w) || std::isinf(w)) {
      if (!(std::isnan(w) ? std::isnan(g) : g == w)) return kNeverClose;
      continue;
    }
    worst = worst_of(worst, std::fabs(g - w) / scale);
  }
  return worst;
}

}  // namespace stagecraft::testing
