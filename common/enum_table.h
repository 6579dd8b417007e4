// Tables that name the values of an enum (graph op kinds, layouts, data types; oneDNN's tags):
// each entry has `value` and `name` (and whatever else the table carries); these helpers look
// entries up either way and list the names, so no enum needs its own parse/names functions.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stagecraft {

/// The common entry: an enum value and its name.
template <class E>
struct Named {
  E value;
  std::string_view name;
};

/// The entry whose name is `name`, or nullptr.
template <class Entry, size_t N>
const Entry* entry_named(const Entry (&table)[N], std::string_view name) {
  for (const Entry& e : table)
    if (e.name == name) return &e;
  return nullptr;
}

/// The value whose name is `name`, or nullopt.
template <class Entry, size_t N>
auto value_named(const Entry (&table)[N], std::string_view name)
    -> std::optional<decltype(table[0].value)> {
  const Entry* e = entry_named(table, name);
  if (e == nullptr) return std::nullopt;
  return e->value;
}

/// The entry for `value`, or nullptr.
template <class Entry, size_t N, class E>
const Entry* entry_for(const Entry (&table)[N], E value) {
  for (const Entry& e : table)
    if (e.value == value) return &e;
  return nullptr;
}

/// Every name, in table order.
template <class Entry, size_t N>
std::vector<std::string> names_of(const Entry (&table)[N]) {
  std::vector<std::string> names;
  names.reserve(N);
  for (const Entry& e : table) names.emplace_back(e.name);
  return names;
}

}  // namespace stagecraft
