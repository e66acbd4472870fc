// Status: the one error type of headlab (leveldb style). Expected failures return a
// Status built by a named constructor; `assert` is only for invariants.
#pragma once

#include <string>
#include <type_traits>
#include <utility>

namespace headlab {

class Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,
    kNotFound,
    kIoError,
    kCorruption,
    kUnavailable,
    kPermissionDenied,
    kCancelled,
    kInternal
  };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) {
    return Status(Code::kInvalidArgument, std::move(m));
  }
  static Status NotFound(std::string m) { return Status(Code::kNotFound, std::move(m)); }
  static Status IoError(std::string m) { return Status(Code::kIoError, std::move(m)); }
  static Status Corruption(std::string m) { return Status(Code::kCorruption, std::move(m)); }
  static Status Unavailable(std::string m) { return Status(Code::kUnavailable, std::move(m)); }
  static Status PermissionDenied(std::string m) {
    return Status(Code::kPermissionDenied, std::move(m));
  }
  static Status Cancelled(std::string m) { return Status(Code::kCancelled, std::move(m)); }
  static Status Internal(std::string m) { return Status(Code::kInternal, std::move(m)); }

  // Returns true iff the status indicates success.
  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // Returns "OK" or "<CodeName>: <message>".
  std::string ToString() const;

 private:
  Status(Code c, std::string m) : code_(c), message_(std::move(m)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

namespace internal {
// LibTorch module holders (torch::nn::ModuleHolder: they name their ContainedType) have a
// default constructor that refuses to compile for modules without one; their empty state
// is construction from nullptr.
template <typename T, typename = void>
struct IsModuleHolder : std::false_type {};
template <typename T>
struct IsModuleHolder<T, std::void_t<typename T::ContainedType>> : std::true_type {};
template <typename T>
T EmptyValue() {
  if constexpr (IsModuleHolder<T>::value)
    return T(nullptr);
  else
    return T{};
}
}  // namespace internal

// StatusOr<T>: a value or the Status that explains why there is none.
template <typename T>
class StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)), has_value_(true) {}  // NOLINT
  StatusOr(Status status) : status_(std::move(status)) {}            // NOLINT
  bool ok() const { return has_value_; }
  const Status& status() const { return status_; }
  T& value() { return value_; }
  const T& value() const { return value_; }
  T* operator->() { return &value_; }
  T& operator*() { return value_; }

 private:
  Status status_;
  T value_ = internal::EmptyValue<T>();
  bool has_value_ = false;
};

}  // namespace headlab

#define HEADLAB_RETURN_IF_ERROR(expr) \
  do {                                \
    ::headlab::Status _st = (expr);   \
    if (!_st.ok()) return _st;        \
  } while (0)
