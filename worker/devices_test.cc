#include "worker/devices.h"

#include <catch2/catch.hpp>

namespace headlab {

TEST_CASE("DiscoverDevices returns at least one device, CPU fallback without a GPU") {
  DeviceInventory inv = DiscoverDevices();
  REQUIRE(!inv.devices.empty());
  if (!inv.has_gpu) {
    REQUIRE(inv.devices.size() == 1);
    const Device& d = inv.devices[0];
    CHECK(d.kind == "cpu");
    CHECK(!d.name.empty());
    CHECK(d.memory_bytes > 0);
    CHECK(!inv.note.empty());
  } else {
    for (const Device& d : inv.devices) {
      CHECK(d.kind == "cuda");
      CHECK(d.memory_bytes > 0);
      CHECK(d.cc_major > 0);
    }
    CHECK(inv.cuda_driver != "none");
  }
}

TEST_CASE("DeviceToJson has the protocol's fields") {
  Device d = CpuDevice();
  Json j = DeviceToJson(d);
  for (const char* k : {"index", "name", "memory_bytes", "cc_major", "cc_minor", "kind"})
    CHECK(j.contains(k));
  CHECK(j["kind"] == "cpu");
}

}  // namespace headlab
