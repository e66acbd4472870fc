// plain_test.h: what the LibTorch op tests share (plain mains, so that the device machine
// needs no Catch2): a failure count, Expect, and the result line.
#pragma once

#include <cstdio>
#include <string>

#include <torch/torch.h>

namespace headlab {
namespace kernels {
namespace plain_test {

inline int failures = 0;

// Prints `what` as passed or failed and counts a failure.
inline void Expect(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  failures += !ok;
}

// Returns true iff a CUDA device is visible, else says there is nothing to test here.
inline bool CudaDevice() {
  if (torch::cuda::is_available()) return true;
  std::printf("no CUDA device: nothing to test here\n");
  return false;
}

// Prints the count and returns main's exit status: 0 iff nothing failed.
inline int Finish() {
  std::printf("%d failures: %s\n", failures, failures ? "FAILED" : "PASSED");
  return failures ? 1 : 0;
}

}  // namespace plain_test
}  // namespace kernels
}  // namespace headlab
