// The CUDA/CUPTI check macros against stand-in types with the CUDA runtime's and CUPTI's
// names (this test builds without CUDA; the device build uses the real headers).
#include <catch2/catch.hpp>
#include <string>

namespace {

enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidValue = 1 };
const char* cudaGetErrorString(cudaError_t e) {
  return e == cudaErrorInvalidValue ? "invalid argument" : "no error";
}
enum CUptiResult {
  CUPTI_SUCCESS = 0,
  CUPTI_ERROR_UNKNOWN = 999,
  CUPTI_ERROR_INSUFFICIENT_PRIVILEGES = 35
};
int cupti_string_calls = 0;
CUptiResult cuptiGetResultString(CUptiResult r, const char** text) {
  ++cupti_string_calls;
  *text = r == CUPTI_ERROR_UNKNOWN ? "CUPTI_ERROR_UNKNOWN" : nullptr;
  return CUPTI_SUCCESS;
}

}  // namespace

#include "common/gpu_check.h"

namespace headlab {
namespace {

int calls = 0;
cudaError_t Fails() {
  ++calls;
  return cudaErrorInvalidValue;
}
cudaError_t Works() {
  ++calls;
  return cudaSuccess;
}

Status TwoCudaCalls(bool first_fails, int* reached) {
  HEADLAB_CUDA_CHECK(first_fails ? Fails() : Works());
  *reached = 1;
  HEADLAB_CUDA_CHECK(Works());
  *reached = 2;
  return Status::Ok();
}

StatusOr<int> CuptiValue(CUptiResult r) {
  HEADLAB_CUPTI_CHECK(r);
  return 7;
}

}  // namespace

TEST_CASE("HEADLAB_CUDA_STATUS: Ok on success, else the call, file, line and error string") {
  calls = 0;
  CHECK(HEADLAB_CUDA_STATUS(Works()).ok());
  const int line = __LINE__ + 1;
  Status s = HEADLAB_CUDA_STATUS(Fails());
  CHECK(calls == 2);  // each call evaluated once
  CHECK(s.code() == Status::Code::kUnavailable);
  CHECK(s.message() ==
        "CUDA Fails() failed (gpu_check_test.cc:" + std::to_string(line) + "): invalid argument");
}

TEST_CASE("HEADLAB_CUDA_CHECK returns the failure from the enclosing function") {
  int reached = 0;
  Status s = TwoCudaCalls(true, &reached);
  CHECK(reached == 0);
  CHECK(s.message().rfind("CUDA first_fails ? Fails() : Works() failed (gpu_check_test.cc:", 0) ==
        0);
  CHECK(TwoCudaCalls(false, &reached).ok());
  CHECK(reached == 2);
}

TEST_CASE("HEADLAB_CUPTI_CHECK: Unavailable, or PermissionDenied for missing privileges") {
  cupti_string_calls = 0;
  CHECK(*CuptiValue(CUPTI_SUCCESS) == 7);
  CHECK(cupti_string_calls == 0);
  StatusOr<int> unknown = CuptiValue(CUPTI_ERROR_UNKNOWN);
  REQUIRE(!unknown.ok());
  CHECK(unknown.status().code() == Status::Code::kUnavailable);
  CHECK(unknown.status().message().rfind("CUPTI r failed (gpu_check_test.cc:", 0) == 0);
  CHECK(unknown.status().message().find("): CUPTI_ERROR_UNKNOWN") != std::string::npos);
  StatusOr<int> denied = CuptiValue(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES);
  REQUIRE(!denied.ok());
  CHECK(denied.status().code() == Status::Code::kPermissionDenied);
  CHECK(denied.status().message().rfind("no counter permission: CUPTI r failed (", 0) == 0);
  CHECK(denied.status().message().find("): unknown error (needs root") != std::string::npos);
}

TEST_CASE("GpuCallFailed shortens the file to its base name") {
  CHECK(GpuCallFailed(GpuApi::kCuda, "f()", "boom", "/a/b/c.cc", 3).message() ==
        "CUDA f() failed (c.cc:3): boom");
  CHECK(GpuCallFailed(GpuApi::kCupti, "g()", nullptr, "c.cc", 4).message() ==
        "CUPTI g() failed (c.cc:4): unknown error");
}

}  // namespace headlab
