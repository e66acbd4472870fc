// Is there a CUDA device to measure on? Torch-free.
#pragma once

#include <string>

namespace headlab::measure {

// Returns "" when a CUDA device is usable, else the reason there is none, starting
// "no GPU: " ("no GPU: CUDA driver version is insufficient for CUDA runtime version" on
// machines without a driver, "no GPU: built without CUDA" when compiled without it).
std::string NoGpuReason();

}  // namespace headlab::measure
