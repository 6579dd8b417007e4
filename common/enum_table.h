// Tables that name the values of an enum (graph op kinds, layouts, data types; oneDNN's tags):
// each entry has `value` and `name` (and whatever else the table carries); these helpers look
// entries up either way and list the names, so no enum needs its own parse/names functions.
// Tables of Mapped entries map an enum's values to another library's (value -> mapped).
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

/// An entry that maps an enum value to its counterpart in another library (oneDNN's data types,
/// tags, algorithms).
template <class E, class T>
struct Mapped {
  E value;
  T mapped;
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

/// The counterpart of `value` in a table of Mapped entries, or `fallback` where it has none.
template <class E, class T, size_t N>
T mapped_or(const Mapped<E, T> (&table)[N], E value, T fallback) {
  const Mapped<E, T>* e = entry_for(table, value);
  return e != nullptr ? e->mapped : fallback;
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
