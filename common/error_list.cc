// Collected input problems, reported together.
#include "common/error_list.h"

#include <string>

namespace headlab {

namespace {

constexpr char kProblems[] = " problems:\n  ";

// The "FILE" of "FILE: rest" ("" when `m` has no ": ").
std::string SourceOf(const std::string& m) {
  const size_t colon = m.find(": ");
  return colon == std::string::npos ? "" : m.substr(0, colon);
}

}  // namespace

bool ErrorList::Add(const Status& s) {
  if (s.ok()) return true;
  // Another list's problems join this one's, one by one (a grid's base holds several).
  const std::string& m = s.message();
  const size_t head = m.find(kProblems);
  if (head != std::string::npos) {
    const std::string lead = m.substr(0, head);  // "N" or "FILE: N"
    const size_t sp = lead.rfind(": ");
    const std::string count = sp == std::string::npos ? lead : lead.substr(sp + 2);
    if (!count.empty() && count.find_first_not_of("0123456789") == std::string::npos) {
      size_t start = head + sizeof kProblems - 1;
      while (start < m.size()) {
        size_t end = m.find("\n  ", start);
        errors_.push_back(
            Status::InvalidArgument(m.substr(start, end == std::string::npos ? end : end - start)));
        if (end == std::string::npos) break;
        start = end + 3;
      }
      return false;
    }
  }
  errors_.push_back(s);
  return false;
}

Status ErrorList::ToStatus() const {
  if (errors_.empty()) return Status::Ok();
  if (errors_.size() == 1) return errors_[0];
  std::string source = SourceOf(errors_[0].message());
  for (const Status& e : errors_)
    if (SourceOf(e.message()) != source) source.clear();
  std::string m =
      (source.empty() ? "" : source + ": ") + std::to_string(errors_.size()) + " problems:";
  for (size_t i = 0; i < errors_.size() && i < kMaxShown; ++i) m += "\n  " + errors_[i].message();
  if (errors_.size() > kMaxShown)
    m += "\n  ... and " + std::to_string(errors_.size() - kMaxShown) + " more";
  return Status::InvalidArgument(m);
}

}  // namespace headlab
