#pragma once
/// The CPU backend's measured kernel choices: for a kernel signature (a convolution's shapes,
/// layouts, tile and thread count), which of two implementations ran faster on this machine
/// (our Winograd kernel or oneDNN's direct one; on AMX, oneDNN's AMX kernel or its next
/// candidate), in memory for this process and on disk in the
/// cache directory's "cpu-kernels" file of the device fingerprint (a VerdictCache,
/// common/value_cache.h), so a choice is measured once per machine, not once per process.
///
/// Example:
///   KernelChoices choices(dir, device.device_fingerprint());
///   const std::string v = choices.choose(signature, [&] { return measure(); });  // "winograd"

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "common/value_cache.h"

namespace stagecraft::executor::cpu {

class KernelChoices {
 public:
  /// Choices backed by the file of `fingerprint` under `dir`, opened at the first choose() ("" or
  /// an unusable directory: in memory only, with one warning for an unusable one).
  KernelChoices(const std::string& dir, const std::string& fingerprint);
  ~KernelChoices();
  KernelChoices(const KernelChoices&) = delete;
  KernelChoices& operator=(const KernelChoices&) = delete;

  /// The verdict for `signature`: cached, or `measure()`'s answer (then cached and saved).
  /// Measurements of different signatures may run at once; one signature is measured once.
  std::string choose(const std::string& signature, const std::function<std::string()>& measure);
  /// Verdicts measured in this process (not answered by the file).
  size_t measured() const { return measured_; }
  /// The file ("" when in memory only, or before the first choose()).
  std::string path() const;

 private:
  void open();  // the file, on first use

  std::mutex mutex_;
  std::string dir_, fingerprint_;
  bool opened_ = false;
  std::unique_ptr<VerdictCache> file_;
  std::unordered_map<std::string, std::string> memory_;  // when there is no file
  size_t measured_ = 0;
};

}  // namespace stagecraft::executor::cpu
