#include "executor/cuda/algo_cache.h"

#include <iostream>

#include "common/error.h"

namespace stagecraft::executor::cuda {

namespace {
constexpr const char* kKind = "cudnn-algos";
constexpr auto kSaveEvery = std::chrono::seconds(10);
}  // namespace

AlgorithmCache::AlgorithmCache(std::string dir) : dir_(std::move(dir)) {}

AlgorithmCache::~AlgorithmCache() { save(); }

std::string AlgorithmCache::key(const std::string& fingerprint, const std::string& signature) {
  return fingerprint + "|" + signature;
}

ValueCache* AlgorithmCache::file(const std::string& fingerprint) {
  if (dir_.empty()) return nullptr;
  auto it = files_.find(fingerprint);
  if (it != files_.end()) return it->second.get();
  std::unique_ptr<ValueCache> cache;
  try {
    cache = std::make_unique<ValueCache>(dir_, fingerprint, std::function<void(const std::string&)>{}, kKind);
  } catch (const IoError& e) {
    if (!warned_) {
      std::cerr << "stagecraft: warning: convolution algorithms are not cached on disk: " << e.what() << "\n";
      warned_ = true;
    }
  }
  return files_.emplace(fingerprint, std::move(cache)).first->second.get();
}

std::string AlgorithmCache::path(const std::string& fingerprint) {
  std::lock_guard<std::mutex> lock(mutex_);
  ValueCache* f = file(fingerprint);
  return f ? f->path() : std::string();
}

std::optional<AlgorithmCache::Entry> AlgorithmCache::find(const std::string& fingerprint,
                                                          const std::string& signature) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = chosen_.find(key(fingerprint, signature)); it != chosen_.end()) {
    return Entry{it->second, Source::kProcess};
  }
  if (ValueCache* f = file(fingerprint)) {
    if (auto value = f->find(signature)) return Entry{static_cast<int>(*value), Source::kFile};
  }
  return std::nullopt;
}

void AlgorithmCache::insert(const std::string& fingerprint, const std::string& signature, int algo) {
  std::lock_guard<std::mutex> lock(mutex_);
  chosen_[key(fingerprint, signature)] = algo;
  if (ValueCache* f = file(fingerprint)) f->insert(signature, static_cast<double>(algo));
  if (std::chrono::steady_clock::now() - last_save_ >= kSaveEvery) save_locked();
}

void AlgorithmCache::save() {
  std::lock_guard<std::mutex> lock(mutex_);
  save_locked();
}

void AlgorithmCache::save_locked() {
  last_save_ = std::chrono::steady_clock::now();
  for (auto& [fingerprint, f] : files_) {
    if (!f) continue;
    try {
      f->save();
    } catch (const std::exception& e) {
      std::cerr << "stagecraft: warning: convolution algorithm cache not saved: " << e.what() << "\n";
    }
  }
}

}  // namespace stagecraft::executor::cuda
