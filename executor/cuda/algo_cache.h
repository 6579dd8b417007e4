#pragma once
/// The CUDA backend's convolution algorithm cache: the algorithm chosen for a convolution
/// signature on a device, keyed by device fingerprint + signature, in memory for this process and
/// on disk one file per fingerprint (a VerdictCache, common/value_cache.h, kind "cudnn-algos": the
/// algorithm's id as a word, "unfused" for kUnfused). A lookup says
/// where the answer came from (the file, or a search earlier in this process), so that a plan can
/// tell cached choices from timed ones. CUDA-free (compiled in every build, tested without a GPU).
///
/// Example:
///   AlgorithmCache cache(ValueCache::default_dir());
///   if (auto hit = cache.find(backend.device().device_fingerprint(), signature)) use(hit->algo);
///   else cache.insert(backend.device().device_fingerprint(), signature, search());
///   cache.save();

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "common/value_cache.h"

namespace stagecraft::executor::cuda {

/// Chosen convolution algorithms by device fingerprint and signature.
class AlgorithmCache {
 public:
  /// Where a cached choice came from.
  enum class Source {
    kFile,     ///< the cache file of the fingerprint (chosen by an earlier process)
    kProcess,  ///< chosen earlier in this process (same signature seen before)
  };
  /// A cached choice.
  struct Entry {
    int algo = 0;   ///< the algorithm (a cudnnConvolutionFwdAlgo_t, or kUnfused)
    Source source = Source::kFile;
  };
  /// Stored for a fused convolution whose fused call cuDNN refused for every algorithm: it runs
  /// as a plain convolution and an own epilogue.
  static constexpr int kUnfused = -1;

  /// A cache with files under `dir` ("" or an unusable directory: in memory only, with one
  /// warning for an unusable one).
  explicit AlgorithmCache(std::string dir);
  ~AlgorithmCache();
  AlgorithmCache(const AlgorithmCache&) = delete;
  AlgorithmCache& operator=(const AlgorithmCache&) = delete;

  /// The choice for `signature` on the device `fingerprint`, if any.
  std::optional<Entry> find(const std::string& fingerprint, const std::string& signature);
  /// Records a choice (saved by save(), the destructor, and every few seconds, so that a process
  /// killed by a time limit keeps most of its searches).
  void insert(const std::string& fingerprint, const std::string& signature, int algo);
  /// Writes the files of every fingerprint seen; errors are warnings.
  void save();
  /// The in-memory key: fingerprint and signature.
  static std::string key(const std::string& fingerprint, const std::string& signature);
  /// An algorithm as its cache file writes it, and back (nothing for a word it never writes).
  static std::string word_of(int algo);
  static std::optional<int> algo_of(const std::string& word);
  /// The file of `fingerprint` ("" when in memory only).
  std::string path(const std::string& fingerprint);

 private:
  VerdictCache* file(const std::string& fingerprint);  // opened on first use; null: none
  void save_locked();

  std::string dir_;
  std::mutex mutex_;
  std::map<std::string, std::unique_ptr<VerdictCache>> files_;  // by fingerprint
  std::map<std::string, int> chosen_;  // key(fingerprint, signature) -> chosen in this process
  bool warned_ = false;
  std::chrono::steady_clock::time_point last_save_ = std::chrono::steady_clock::now();
};

}  // namespace stagecraft::executor::cuda
