// KernelChoices: the per-machine verdicts of the CPU backend's measured kernel choices (Winograd
// or direct per convolution signature), measured once and kept in the cache directory.
#include <unistd.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "common/strings.h"
#include "executor/cpu/kernel_choices.h"

namespace stagecraft::executor {
namespace {

TEST(KernelChoices, MeasuresASignatureOnceAndKeepsTheVerdictOnDisk) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / cat("sc-choices-", getpid());
  std::filesystem::remove_all(dir);
  int measured = 0;
  {
    cpu::KernelChoices choices(dir.string(), "test-device");
    EXPECT_EQ(choices.choose("a", [&] { ++measured; return std::string("winograd"); }), "winograd");
    EXPECT_EQ(choices.choose("a", [&] { ++measured; return std::string("direct"); }), "winograd");
    EXPECT_EQ(choices.choose("b", [&] { ++measured; return std::string("direct"); }), "direct");
    EXPECT_EQ(measured, 2);
    EXPECT_NE(choices.path().find("cpu-kernels"), std::string::npos) << choices.path();
  }
  cpu::KernelChoices again(dir.string(), "test-device");  // another process, the same machine
  EXPECT_EQ(again.choose("a", [&] { ++measured; return std::string("direct"); }), "winograd");
  EXPECT_EQ(again.measured(), 0u);
  cpu::KernelChoices other(dir.string(), "other-device");  // another machine measures again
  EXPECT_EQ(other.choose("a", [&] { ++measured; return std::string("direct"); }), "direct");
  cpu::KernelChoices memory_only("", "test-device");
  EXPECT_EQ(memory_only.choose("a", [&] { ++measured; return std::string("direct"); }), "direct");
  EXPECT_EQ(memory_only.path(), "");
  EXPECT_EQ(measured, 4);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stagecraft::executor
