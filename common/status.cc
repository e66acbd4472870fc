// Status formatting.
#include "common/status.h"

namespace headlab {

std::string Status::ToString() const {
  const char* name = "OK";
  switch (code_) {
    case Code::kOk:
      return "OK";
    case Code::kInvalidArgument:
      name = "InvalidArgument";
      break;
    case Code::kNotFound:
      name = "NotFound";
      break;
    case Code::kIoError:
      name = "IoError";
      break;
    case Code::kCorruption:
      name = "Corruption";
      break;
    case Code::kUnavailable:
      name = "Unavailable";
      break;
    case Code::kPermissionDenied:
      name = "PermissionDenied";
      break;
    case Code::kCancelled:
      name = "Cancelled";
      break;
    case Code::kInternal:
      name = "Internal";
      break;
  }
  return std::string(name) + ": " + message_;
}

}  // namespace headlab
