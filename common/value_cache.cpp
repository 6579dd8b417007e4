#include "common/value_cache.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include "common/error.h"
#include "common/files.h"
#include "common/hash.h"
#include "common/strings.h"

namespace stagecraft {

namespace {

constexpr int kVersion = 1;

// The header's first word of a cache of values of type V.
template <class V>
constexpr const char* magic();
template <>
constexpr const char* magic<double>() { return "stagecraft-profile-cache"; }
template <>
constexpr const char* magic<std::string>() { return "stagecraft-verdict-cache"; }

// A value as written before the tab, and read back (nothing when malformed).
std::string format_value(double ms) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), ms);
  return std::string(buffer, static_cast<size_t>(end - buffer));
}
std::string format_value(const std::string& verdict) { return verdict; }

template <class V>
std::optional<V> parse_value(std::string_view text);
template <>
std::optional<double> parse_value<double>(std::string_view text) {
  double ms = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
  if (ec != std::errc() || end != text.data() + text.size() || !(ms >= 0)) return std::nullopt;
  return ms;
}
template <>
std::optional<std::string> parse_value<std::string>(std::string_view text) {
  if (text.empty()) return std::nullopt;
  return std::string(text);
}

bool storable(double ms) { return ms >= 0; }  // infinity: measured as not runnable
bool storable(const std::string& verdict) {
  return !verdict.empty() && verdict.find_first_of("\t\n\r") == std::string::npos;
}

std::string file_name(const std::string& kind, const std::string& fingerprint) {
  Fnv1a hasher;
  hasher.add_string(fingerprint);
  return kind + "-" + hex64(hasher.digest()) + ".tsv";
}

}  // namespace

template <class V>
std::string FileCache<V>::default_dir() {
  if (const char* dir = std::getenv("STAGECRAFT_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    return (std::filesystem::path(xdg) / "stagecraft").string();
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return (std::filesystem::path(home) / ".cache" / "stagecraft").string();
  }
  return (std::filesystem::temp_directory_path() / "stagecraft-cache").string();
}

template <class V>
FileCache<V>::FileCache(const std::string& dir, const std::string& fingerprint,
                        std::function<void(const std::string&)> warn, const std::string& kind)
    : fingerprint_(fingerprint), warn_(std::move(warn)) {
  if (!warn_) warn_ = [](const std::string& m) { std::cerr << "stagecraft: warning: " << m << "\n"; };
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    throw IoError(cat("cannot use cache directory '", dir, "': ",
                      ec ? ec.message() : std::string("not a directory"),
                      " (choose another with --cache-dir)"));
  }
  path_ = (std::filesystem::path(dir) / file_name(kind, fingerprint)).string();
  // Probe writability now rather than after a long search.
  const std::string probe = path_ + ".probe";
  {
    std::ofstream out(probe);
    if (!out) {
      throw IoError(cat("cannot write to cache directory '", dir,
                        "': permission denied or read-only (choose another with --cache-dir)"));
    }
  }
  std::filesystem::remove(probe, ec);
  load();
}

template <class V>
FileCache<V>::~FileCache() {
  if (unsaved_ == 0) return;
  try {
    save();
  } catch (const std::exception& e) {
    warn_(cat("cache file not saved: ", e.what()));
  }
}

template <class V>
void FileCache<V>::load() {
  std::ifstream in(path_);
  if (!in) return;  // no cache yet
  auto reject = [&](const std::string& why) {
    entries_.clear();
    rebuilt_ = true;
    warn_(cat("ignoring cache file '", path_, "': ", why, "; it will be rebuilt"));
  };
  std::string line;
  if (!std::getline(in, line)) return reject("the file is empty");
  {
    std::istringstream header(line);
    std::string header_magic;
    int version = 0;
    header >> header_magic >> version;
    std::string fingerprint;
    std::getline(header >> std::ws, fingerprint);
    if (header_magic != magic<V>() || version != kVersion) {
      return reject("not a cache of this kind and version");
    }
    if (fingerprint != fingerprint_) {
      return reject(cat("it was measured on another device ('", fingerprint, "')"));
    }
  }
  size_t line_number = 1;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.rfind("end ", 0) == 0) {
      size_t count = 0;
      const char* first = line.data() + 4;
      auto [end, ec] = std::from_chars(first, line.data() + line.size(), count);
      if (ec != std::errc() || end != line.data() + line.size() || count != entries_.size()) {
        return reject(cat("line ", line_number, ": entry count does not match"));
      }
      return;  // complete
    }
    const auto tab = line.find('\t');
    if (tab != std::string::npos && tab + 1 < line.size()) {
      if (auto value = parse_value<V>(std::string_view(line).substr(0, tab))) {
        entries_[line.substr(tab + 1)] = std::move(*value);
        continue;
      }
    }
    return reject(cat("line ", line_number, " is malformed"));
  }
  reject("the file is truncated (no end line)");
}

template <class V>
std::optional<V> FileCache<V>::find(const std::string& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  ++hits_;
  return it->second;
}

template <class V>
void FileCache<V>::insert(const std::string& key, V value) {
  if (!storable(value)) {
    throw Error(cat("cache '", path_, "': value '", format_value(value), "' of key '", key,
                    "' cannot be stored"));
  }
  entries_[key] = std::move(value);
  ++unsaved_;
}

template <class V>
void FileCache<V>::save() {
  std::ostringstream out;
  out << magic<V>() << " " << kVersion << " " << fingerprint_ << "\n";
  std::vector<const std::pair<const std::string, V>*> sorted;
  for (const auto& entry : entries_) sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  for (const auto* entry : sorted) out << format_value(entry->second) << "\t" << entry->first << "\n";
  out << "end " << entries_.size() << "\n";
  write_text_file(path_, out.str());
  unsaved_ = 0;
}

template class FileCache<double>;
template class FileCache<std::string>;

}  // namespace stagecraft
