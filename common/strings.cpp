#include "common/strings.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <iomanip>

namespace stagecraft {

std::string fixed(double value, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

std::string si_count(double value, int digits) {
  static constexpr const char* kSuffixes[] = {"", "K", "M", "G", "T", "P"};
  int index = 0;
  while (std::fabs(value) >= 1000.0 && index < 5) {
    value /= 1000.0;
    ++index;
  }
  return fixed(value, index == 0 ? 0 : digits) + kSuffixes[index];
}

std::string byte_size(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int index = 0;
  while (bytes >= 1024.0 && index < 4) {
    bytes /= 1024.0;
    ++index;
  }
  return fixed(bytes, index == 0 ? 0 : 2) + " " + kUnits[index];
}

TextTable::TextTable(std::vector<std::string> header, std::vector<Align> align)
    : header_(std::move(header)), align_(std::move(align)) {
  align_.resize(header_.size(), kLeft);
}

void TextTable::add_row(std::vector<std::string> row) {
  assert(row.size() == header_.size());
  rows_.push_back(std::move(row));
}

std::string TextTable::render() const {
  std::vector<size_t> width(header_.size(), 0);
  auto widen = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  };
  widen(header_);
  for (const auto& row : rows_) widen(row);

  std::ostringstream out;
  auto emit = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size(); ++i) {
      if (i > 0) out << "  ";
      const size_t pad = width[i] - row[i].size();
      const bool last = i + 1 == row.size();
      if (align_[i] == kRight) out << std::string(pad, ' ') << row[i];
      else out << row[i] << (last ? "" : std::string(pad, ' '));
    }
    out << "\n";
  };
  emit(header_);
  size_t total = 0;
  for (size_t w : width) total += w;
  constexpr size_t kMaxRule = 100;  // a very wide last column should not make the rule wrap
  out << std::string(std::min(kMaxRule, total + 2 * (width.size() - 1)), '-') << "\n";
  for (const auto& row : rows_) emit(row);
  return out.str();
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest_match(std::string_view name, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = name.size() / 2 + 2;  // farther than this is not a plausible typo
  for (const auto& candidate : candidates) {
    const size_t d = edit_distance(name, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

}  // namespace stagecraft
