// Collected input problems, reported together.
#include "common/error_list.h"

#include <string>

namespace headlab {

bool ErrorList::Add(const Status& s) {
  if (s.ok()) return true;
  // Another list's problems join this one's, one by one (a grid's base holds several).
  const std::string& m = s.message();
  const size_t head = m.find(" problems:\n  ");
  if (head != std::string::npos && m.find_first_not_of("0123456789") == head) {
    size_t start = head + 13;
    while (start < m.size()) {
      size_t end = m.find("\n  ", start);
      errors_.push_back(Status::InvalidArgument(m.substr(start, end == std::string::npos ? end : end - start)));
      if (end == std::string::npos) break;
      start = end + 3;
    }
    return false;
  }
  errors_.push_back(s);
  return false;
}

Status ErrorList::ToStatus() const {
  if (errors_.empty()) return Status::Ok();
  if (errors_.size() == 1) return errors_[0];
  std::string m = std::to_string(errors_.size()) + " problems:";
  for (size_t i = 0; i < errors_.size() && i < kMaxShown; ++i) m += "\n  " + errors_[i].message();
  if (errors_.size() > kMaxShown)
    m += "\n  ... and " + std::to_string(errors_.size() - kMaxShown) + " more";
  return Status::InvalidArgument(m);
}

}  // namespace headlab
