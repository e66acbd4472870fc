// CheckpointTracker: retention applied to one attempt's checkpoint artifacts.
#include "worker/checkpoint_tracker.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/log.h"

namespace headlab {

std::vector<CheckpointTracker::Checkpoint> CheckpointTracker::Add(Checkpoint c) {
  std::vector<Checkpoint> gone;
  for (auto it = held_.begin(); it != held_.end();) {
    if (it->path != c.path) {
      ++it;
      continue;
    }
    gone.push_back(*it);  // rewritten in place: the file now holds c's bytes
    it = held_.erase(it);
  }
  const int64_t newest_seq = c.seq;
  held_.insert(
      std::upper_bound(held_.begin(), held_.end(), c,
                       [](const Checkpoint& a, const Checkpoint& b) { return a.step < b.step; }),
      c);
  std::vector<int64_t> steps;
  for (const Checkpoint& h : held_) steps.push_back(h.step);
  const std::vector<bool> kept = KeptCheckpoints(steps, policy_);
  std::vector<Checkpoint> keep;
  for (size_t i = 0; i < held_.size(); ++i) {
    // The one just written stays whatever its step: it is the newest complete checkpoint.
    if (kept[i] || held_[i].seq == newest_seq)
      keep.push_back(held_[i]);
    else if (Remove(held_[i].path))
      gone.push_back(held_[i]);
    // else: not ours to delete, or undeletable (logged): no longer tracked, not reported.
  }
  held_ = std::move(keep);
  return gone;
}

int64_t CheckpointTracker::bytes_held() const {
  int64_t total = 0;
  for (const Checkpoint& h : held_) total += h.bytes;
  return total;
}

bool CheckpointTracker::Remove(const std::string& path) const {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir = fs::canonical(out_dir_, ec);
  const fs::path parent = ec ? fs::path() : fs::canonical(fs::path(path).parent_path(), ec);
  struct stat st;
  const bool inside = !ec && parent == dir;
  if (inside && ::lstat(path.c_str(), &st) != 0) return errno == ENOENT;  // already gone
  if (!inside || !S_ISREG(st.st_mode)) {
    LogWarn("checkpoint retention: not deleting " + path + ": not a regular file directly in " +
            out_dir_);
    return false;
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    LogWarn("checkpoint retention: cannot delete " + path + ": " + std::strerror(errno));
    return false;
  }
  return true;
}

}  // namespace headlab
