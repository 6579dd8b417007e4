#include "executor/cuda/algo_cache.h"

#include <charconv>
#include <iostream>

#include "common/error.h"

namespace stagecraft::executor::cuda {

namespace {
constexpr const char* kKind = "cudnn-algos";
constexpr auto kSaveEvery = std::chrono::seconds(10);
}  // namespace

AlgorithmCache::AlgorithmCache(std::string dir) : dir_(std::move(dir)) {}

AlgorithmCache::~AlgorithmCache() { save(); }

std::string AlgorithmCache::word_of(int algo) {
  return algo == kUnfused ? std::string("unfused") : std::to_string(algo);
}

std::optional<int> AlgorithmCache::algo_of(const std::string& word) {
  if (word == "unfused") return kUnfused;
  int algo = 0;
  auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), algo);
  if (ec != std::errc() || end != word.data() + word.size() || algo < 0) return std::nullopt;
  return algo;
}

std::string AlgorithmCache::key(const std::string& fingerprint, const std::string& signature) {
  return fingerprint + "|" + signature;
}

VerdictCache* AlgorithmCache::file(const std::string& fingerprint) {
  if (dir_.empty()) return nullptr;
  auto it = files_.find(fingerprint);
  if (it != files_.end()) return it->second.get();
  std::unique_ptr<VerdictCache> cache;
  try {
    cache = std::make_unique<VerdictCache>(dir_, fingerprint, std::function<void(const std::string&)>{}, kKind);
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
  VerdictCache* f = file(fingerprint);
  return f ? f->path() : std::string();
}

std::optional<AlgorithmCache::Entry> AlgorithmCache::find(const std::string& fingerprint,
                                                          const std::string& signature) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = chosen_.find(key(fingerprint, signature)); it != chosen_.end()) {
    return Entry{it->second, Source::kProcess};
  }
  if (VerdictCache* f = file(fingerprint)) {
    if (auto value = f->find(signature)) {
      if (auto algo = algo_of(*value)) return Entry{*algo, Source::kFile};
    }
  }
  return std::nullopt;
}

void AlgorithmCache::insert(const std::string& fingerprint, const std::string& signature, int algo) {
  std::lock_guard<std::mutex> lock(mutex_);
  chosen_[key(fingerprint, signature)] = algo;
  if (VerdictCache* f = file(fingerprint)) f->insert(signature, word_of(algo));
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
