#include "executor/cpu/kernel_choices.h"

#include <iostream>

#include "common/error.h"

namespace stagecraft::executor::cpu {

KernelChoices::KernelChoices(const std::string& dir, const std::string& fingerprint)
    : dir_(dir), fingerprint_(fingerprint) {}

void KernelChoices::open() {
  if (opened_) return;
  opened_ = true;
  if (dir_.empty()) return;
  try {
    file_ = std::make_unique<VerdictCache>(
        dir_, fingerprint_, [](const std::string& w) { std::cerr << "stagecraft: warning: " << w << "\n"; },
        "cpu-kernels");
  } catch (const Error& e) {
    std::cerr << "stagecraft: warning: measured kernel choices stay in memory: " << e.what() << "\n";
  }
}

KernelChoices::~KernelChoices() = default;

std::string KernelChoices::choose(const std::string& signature,
                                  const std::function<std::string()>& measure) {
  // One lock over lookup, measurement and insertion: two measurements at once would time each
  // other's interference, and a signature must not be measured twice.
  const std::lock_guard<std::mutex> lock(mutex_);
  open();
  if (file_) {
    if (auto hit = file_->find(signature)) return *hit;
  } else if (auto it = memory_.find(signature); it != memory_.end()) {
    return it->second;
  }
  const std::string verdict = measure();
  ++measured_;
  if (file_) {
    file_->insert(signature, verdict);
    try {
      file_->save();
    } catch (const Error& e) {
      std::cerr << "stagecraft: warning: " << e.what() << "\n";
    }
  } else {
    memory_.emplace(signature, verdict);
  }
  return verdict;
}

std::string KernelChoices::path() const { return file_ ? file_->path() : std::string(); }

}  // namespace stagecraft::executor::cpu
