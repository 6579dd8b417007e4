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

constexpr const char* kMagic = "stagecraft-profile-cache";
constexpr int kVersion = 1;

std::string file_name(const std::string& kind, const std::string& fingerprint) {
  Fnv1a hasher;
  hasher.add_string(fingerprint);
  return kind + "-" + hex64(hasher.digest()) + ".tsv";
}

}  // namespace

std::string ValueCache::default_dir() {
  if (const char* dir = std::getenv("STAGECRAFT_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    return (std::filesystem::path(xdg) / "stagecraft").string();
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return (std::filesystem::path(home) / ".cache" / "stagecraft").string();
  }
  return (std::filesystem::temp_directory_path() / "stagecraft-cache").string();
}

ValueCache::ValueCache(const std::string& dir, const std::string& fingerprint,
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

ValueCache::~ValueCache() {
  if (unsaved_ == 0) return;
  try {
    save();
  } catch (const std::exception& e) {
    warn_(cat("cache file not saved: ", e.what()));
  }
}

void ValueCache::load() {
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
    std::string magic;
    int version = 0;
    header >> magic >> version;
    std::string fingerprint;
    std::getline(header >> std::ws, fingerprint);
    if (magic != kMagic || version != kVersion) return reject("not a profile cache of this version");
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
    double ms = 0;
    if (tab != std::string::npos) {
      auto [end, ec] = std::from_chars(line.data(), line.data() + tab, ms);
      if (ec == std::errc() && end == line.data() + tab && ms >= 0 && tab + 1 < line.size()) {
        entries_[line.substr(tab + 1)] = ms;
        continue;
      }
    }
    return reject(cat("line ", line_number, " is malformed"));
  }
  reject("the file is truncated (no end line)");
}

std::optional<double> ValueCache::find(const std::string& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  ++hits_;
  return it->second;
}

void ValueCache::insert(const std::string& key, double ms) {
  entries_[key] = ms;
  ++unsaved_;
}

void ValueCache::save() {
  std::ostringstream out;
  out << kMagic << " " << kVersion << " " << fingerprint_ << "\n";
  std::vector<const std::pair<const std::string, double>*> sorted;
  for (const auto& entry : entries_) sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  char buffer[64];
  for (const auto* entry : sorted) {
    auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), entry->second);
    out << std::string_view(buffer, static_cast<size_t>(end - buffer)) << "\t" << entry->first << "\n";
  }
  out << "end " << entries_.size() << "\n";
  write_text_file(path_, out.str());
  unsaved_ = 0;
}

}  // namespace stagecraft
