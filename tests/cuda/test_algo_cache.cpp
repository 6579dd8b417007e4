// The CUDA backend's convolution algorithm cache (CUDA-free, runs everywhere): keyed by device
// fingerprint and signature in memory and on disk, one file per fingerprint.
#include <gtest/gtest.h>

#include <filesystem>

#include "executor/cuda/algo_cache.h"

namespace stagecraft::executor::cuda {
namespace {

class AlgorithmCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("stagecraft_algo_cache_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

const std::string kH100 = "cuda:NVIDIA H100:sm90:driver13000:runtime13000:cudnn91900:cublas130100:fp32strict";
const std::string kH200 = "cuda:NVIDIA H200:sm90:driver13000:runtime13000:cudnn91900:cublas130100:fp32strict";
const std::string kConv = "conv k3 s1 p1 1x64x56x56 f32 nchw -> 1x64x56x56 f32 nchw";

TEST_F(AlgorithmCacheTest, AnotherDeviceFingerprintMissesInMemoryAndOnDisk) {
  {
    AlgorithmCache cache(dir_.string());
    EXPECT_FALSE(cache.find(kH100, kConv));
    cache.insert(kH100, kConv, 6);
    const auto again = cache.find(kH100, kConv);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->algo, 6);
    EXPECT_EQ(again->source, AlgorithmCache::Source::kProcess);
    EXPECT_FALSE(cache.find(kH200, kConv)) << "the same signature on another device must miss";
    cache.insert(kH200, kConv, 1);
    cache.insert(kH100, kConv + " +relu", AlgorithmCache::kUnfused);  // -1: kept as a word
    EXPECT_EQ(cache.find(kH100, kConv)->algo, 6);
    EXPECT_EQ(cache.find(kH200, kConv)->algo, 1);
    EXPECT_NE(cache.path(kH100), cache.path(kH200));
  }  // saved
  AlgorithmCache reopened(dir_.string());
  const auto h100 = reopened.find(kH100, kConv);
  ASSERT_TRUE(h100);
  EXPECT_EQ(h100->algo, 6);
  EXPECT_EQ(h100->source, AlgorithmCache::Source::kFile);
  EXPECT_EQ(reopened.find(kH200, kConv)->algo, 1);
  const auto unfused = reopened.find(kH100, kConv + " +relu");
  ASSERT_TRUE(unfused) << "the file with an unfused entry must load (not be rebuilt)";
  EXPECT_EQ(unfused->algo, AlgorithmCache::kUnfused);
  EXPECT_EQ(AlgorithmCache::algo_of("seven"), std::nullopt);
  EXPECT_FALSE(reopened.find(kH100 + ":tf32", kConv));
}

TEST_F(AlgorithmCacheTest, UnfusedMarkerAndMemoryOnlyCache) {
  AlgorithmCache memory("");
  memory.insert(kH100, kConv + " fused", AlgorithmCache::kUnfused);
  EXPECT_EQ(memory.find(kH100, kConv + " fused")->algo, AlgorithmCache::kUnfused);
  EXPECT_EQ(memory.path(kH100), "");
  EXPECT_NE(AlgorithmCache::key(kH100, kConv), AlgorithmCache::key(kH200, kConv));
}

}  // namespace
}  // namespace stagecraft::executor::cuda
