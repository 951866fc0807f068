// The device listing's errors, on whatever machine runs the tests: with a GPU the listing must
// succeed and agree with check_device; without one (CI) every entry point must say "no CUDA
// device" in words rather than pass on the runtime's raw error.
#include <gtest/gtest.h>

#include <string>

#include "strata/cuda/device.h"

namespace strata::cuda {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

TEST(CudaDevice, ListingOrNoDeviceInWords) {
  auto devices = list_devices();
  if (!devices) {
    EXPECT_TRUE(starts_with(devices.error(), "no CUDA device")) << devices.error();
    const Status st = check_device(0);
    ASSERT_FALSE(st.ok());
    EXPECT_TRUE(starts_with(st.message(), "no CUDA device")) << st.message();
    return;
  }
  ASSERT_FALSE(devices->empty());  // none is an error, never an empty list
  for (const DeviceInfo& d : *devices) EXPECT_TRUE(check_device(d.index).ok()) << d.index;
}

TEST(CudaDevice, IndexPastTheDevicesIsNamed) {
  for (int index : {-1, 4096}) {
    const Status st = check_device(index);
    ASSERT_FALSE(st.ok());
    EXPECT_TRUE(starts_with(st.message(), "no CUDA device")) << st.message();
  }
}

TEST(CudaDevice, ProbeOfAMissingDeviceFailsInWords) {
  auto bw = measure_read_bandwidth(4096, 1 << 20, 1);
  ASSERT_FALSE(bw);
  EXPECT_TRUE(starts_with(bw.error(), "no CUDA device")) << bw.error();
}

}  // namespace
}  // namespace strata::cuda
