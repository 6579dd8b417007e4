#pragma once
/// Persistent caches by key for one device, one file per (kind, device) under a cache directory,
/// in two types: ValueCache holds measurements (non-negative numbers: stage and op latencies in
/// ms), VerdictCache holds decisions as words (the layout the layout search chose, the algorithm
/// cuDNN chose for a convolution). The device fingerprint names the file and is checked in its
/// header. A file that is corrupt (bad header, malformed or truncated lines) or made for another
/// device is ignored with one warning and rebuilt.
///
/// File format: a header line "stagecraft-profile-cache 1 <fingerprint>" (verdicts:
/// "stagecraft-verdict-cache 1 <fingerprint>"), one line per entry "<value>\t<key>", and a last
/// line "end <entries>". A verdict is one line without tabs.
///
/// Example:
///   ValueCache cache(ValueCache::default_dir(), backend->device().device_fingerprint());
///   if (auto ms = cache.find(key)) ...; else cache.insert(key, measure());
///   cache.save();
///   VerdictCache verdicts(dir, fingerprint, {}, "layout-verdicts");
///   verdicts.insert(key, "uniform nChw8c");

#include <functional>
#include <optional>
#include <string>
#include <unordered_map>

namespace stagecraft {

/// Values of type V (double: measurements; std::string: verdicts) by key for one device, backed
/// by a file.
template <class V>
class FileCache {
 public:
  /// Opens (creating the directory) the cache of `fingerprint` in `dir`. Throws IoError naming
  /// the directory when it cannot be created or written. `warn` receives a one-line warning when
  /// an existing file is ignored (default: stderr).
  FileCache(const std::string& dir, const std::string& fingerprint,
            std::function<void(const std::string&)> warn = {}, const std::string& kind = "profile");
  /// Saves unsaved entries (errors are reported as warnings, never thrown).
  ~FileCache();
  FileCache(const FileCache&) = delete;
  FileCache& operator=(const FileCache&) = delete;

  /// `$STAGECRAFT_CACHE_DIR`, else `$XDG_CACHE_HOME/stagecraft`, else `~/.cache/stagecraft`.
  static std::string default_dir();

  /// The value of a key, if cached; counts a hit.
  std::optional<V> find(const std::string& key);
  /// Adds or replaces an entry (saved by save() or the destructor). Throws Error for a value the
  /// file cannot hold (a negative number or NaN, an empty verdict or one with a tab or a line
  /// break).
  void insert(const std::string& key, V value);
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
  std::unordered_map<std::string, V> entries_;
  size_t hits_ = 0;
  size_t unsaved_ = 0;
  bool rebuilt_ = false;
};

/// Measurements (ms) by key.
using ValueCache = FileCache<double>;
/// Decisions by key, as words.
using VerdictCache = FileCache<std::string>;

extern template class FileCache<double>;
extern template class FileCache<std::string>;

}  // namespace stagecraft
