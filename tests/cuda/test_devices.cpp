// GPU tests (ctest label `gpu`): skip with the runtime's reason when no GPU is usable.
#include <gtest/gtest.h>

#include "executor/cuda/devices.h"

namespace stagecraft::executor {
namespace {

TEST(CudaDevices, QueryNeverFailsAndExplainsAnEmptyList) {
  const DeviceQuery q = query_cuda_devices();
  if (q.devices.empty()) {
    EXPECT_FALSE(q.reason.empty());
  } else {
    EXPECT_TRUE(q.reason.empty());
  }
#ifdef STAGECRAFT_HAVE_CUDA
  EXPECT_TRUE(q.compiled);
  EXPECT_GE(q.cudnn_version, 90000);  // cuDNN 9
#else
  EXPECT_FALSE(q.compiled);
#endif
}

TEST(CudaDevices, UsableDeviceHasSaneProperties) {
  const DeviceQuery q = query_cuda_devices();
  if (q.devices.empty()) GTEST_SKIP() << "no usable GPU: " << q.reason;
  for (const auto& d : q.devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GE(d.compute_major * 10 + d.compute_minor, 75);  // CUDA 13's lowest architecture
    EXPECT_GT(d.sm_count, 0);
    EXPECT_GT(d.memory_bytes, int64_t{1} << 30);
  }
}

}  // namespace
}  // namespace stagecraft::executor
