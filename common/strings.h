#pragma once
/// Small string helpers shared by every folder: concatenation of streamable values, joining,
/// human-readable numbers, and an aligned text table for the CLI.

#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace stagecraft {

/// Concatenates any streamable values: `cat("op '", name, "' has ", n, " inputs")`.
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

/// Joins `items` with `sep`, streaming each item.
template <class Range>
std::string join(const Range& items, std::string_view sep) {
  std::ostringstream out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out << sep;
    out << item;
    first = false;
  }
  return out.str();
}

/// Formats a count with an SI suffix and `digits` decimals: 5712000000 -> "5.71G".
std::string si_count(double value, int digits = 2);

/// Formats a byte count in binary units: 1536 -> "1.50 KiB".
std::string byte_size(double bytes);

/// Formats a double with a fixed number of decimals.
std::string fixed(double value, int digits);

/// A plain text table with aligned columns, for CLI output.
///
/// Example:
///   TextTable t({"name", "ops"}, {TextTable::kLeft, TextTable::kRight});
///   t.add_row({"resnet50", "122"});
///   std::cout << t.render();
class TextTable {
 public:
  /// Column alignment.
  enum Align { kLeft, kRight };

  /// Creates a table with a header row; `align` defaults to left for every column.
  explicit TextTable(std::vector<std::string> header, std::vector<Align> align = {});

  /// Appends a row; it must have as many cells as the header.
  void add_row(std::vector<std::string> row);

  /// Renders the table with a separator line under the header.
  std::string render() const;

 private:
  std::vector<std::string> header_;
  std::vector<Align> align_;
  std::vector<std::vector<std::string>> rows_;
};

/// Levenshtein distance, used to suggest the closest known name in error messages.
size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate closest to `name`, or "" when none is reasonably close.
std::string closest_match(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace stagecraft
