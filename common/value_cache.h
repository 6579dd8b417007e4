#pragma once
/// A persistent cache of numbers by key for one device, one file per (kind, device) under a cache
/// directory: measured stage latencies (the profiler) and chosen convolution algorithms (the CUDA
/// backend). The device fingerprint names the file and is checked in its header. A file that is
/// corrupt (bad header, malformed or truncated lines) or made for another device is ignored with
/// one warning and rebuilt.
///
/// File format: a header line "stagecraft-profile-cache 1 <fingerprint>", one line per entry
/// "<value>\t<key>", and a last line "end <entries>".
///
/// Example:
///   ValueCache cache(ValueCache::default_dir(), backend->device().device_fingerprint());
///   if (auto ms = cache.find(key)) ...; else cache.insert(key, measure());
///   cache.save();

#include <functional>
#include <optional>
#include <string>
#include <unordered_map>

namespace stagecraft {

/// Numbers by key for one device, backed by a file.
class ValueCache {
 public:
  /// Opens (creating the directory) the cache of `fingerprint` in `dir`. Throws IoError naming
  /// the directory when it cannot be created or written. `warn` receives a one-line warning when
  /// an existing file is ignored (default: stderr).
  ValueCache(const std::string& dir, const std::string& fingerprint,
             std::function<void(const std::string&)> warn = {}, const std::string& kind = "profile");
  /// Saves unsaved entries (errors are reported as warnings, never thrown).
  ~ValueCache();
  ValueCache(const ValueCache&) = delete;
  ValueCache& operator=(const ValueCache&) = delete;

  /// `$STAGECRAFT_CACHE_DIR`, else `$XDG_CACHE_HOME/stagecraft`, else `~/.cache/stagecraft`.
  static std::string default_dir();

  /// The latency of a key, if cached; counts a hit.
  std::optional<double> find(const std::string& key);
  /// Adds or replaces an entry (saved by save() or the destructor).
  void insert(const std::string& key, double ms);
  /// Writes the file (atomically: temporary file and rename). Throws IoError.
  void save();

  /// The file's path.
  const std::string& path() const { return path_; }
  /// Entries held.
  size_t size() const { return entries_.size(); }
  /// Lookups answered from the cache since opening.
  size_t hits() const { return hits_; }
  /// Whether an existing file was ignored as corrupt or foreign when opening.
  bool rebuilt() const { return rebuilt_; }

 private:
  void load();

  std::string path_;
  std::string fingerprint_;
  std::function<void(const std::string&)> warn_;
  std::unordered_map<std::string, double> entries_;
  size_t hits_ = 0;
  size_t unsaved_ = 0;
  bool rebuilt_ = false;
};

}  // namespace stagecraft
