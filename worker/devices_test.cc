#include "worker/devices.h"

#include <catch2/catch.hpp>

#include "common/log.h"
#include "worker/host_provenance.h"

namespace headlab {

TEST_CASE("DiscoverDevices returns at least one device, CPU fallback without a GPU") {
  DeviceInventory inv = DiscoverDevices();
  REQUIRE(!inv.devices.empty());
  LogInfo("discovered " + DescribeDevices(inv.devices) + "; driver " + inv.cuda_driver +
          ", runtime " + inv.cuda_runtime + (inv.note.empty() ? "" : " (" + inv.note + ")"));
  if (!inv.has_gpu) {
    REQUIRE(inv.devices.size() == 1);
    const Device& d = inv.devices[0];
    CHECK(d.kind == "cpu");
    CHECK(!d.name.empty());
    CHECK(d.memory_bytes > 0);
    CHECK(!inv.note.empty());
  } else {
    for (size_t i = 0; i < inv.devices.size(); ++i) {
      const Device& d = inv.devices[i];
      CHECK(d.index == int(i));
      CHECK(d.kind == "cuda");
      CHECK(!d.name.empty());
      CHECK(d.memory_bytes > 0);
      CHECK(d.cc_major > 0);
    }
    CHECK(inv.cuda_driver != "none");
    CHECK(inv.cuda_runtime != "none");
  }
}

TEST_CASE("DeviceToJson has the protocol's fields") {
  Device d = CpuDevice();
  Json j = DeviceToJson(d);
  for (const char* k : {"index", "name", "memory_bytes", "cc_major", "cc_minor", "kind"})
    CHECK(j.contains(k));
  CHECK(j["kind"] == "cpu");
}

TEST_CASE("ChildVisibleDevice maps ordinals through an inherited CUDA_VISIBLE_DEVICES") {
  CHECK(ChildVisibleDevice(1, nullptr) == "1");
  CHECK(ChildVisibleDevice(1, "") == "1");
  CHECK(ChildVisibleDevice(0, "4,5") == "4");
  CHECK(ChildVisibleDevice(1, "4,5") == "5");
  CHECK(ChildVisibleDevice(1, "GPU-aa,GPU-bb") == "GPU-bb");
  CHECK(ChildVisibleDevice(2, "4,5") == "2");
}

}  // namespace headlab
