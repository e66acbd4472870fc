// Disk check: the checkpoint estimate against statvfs.
#include "worker/disk_check.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "common/checkpoint_size.h"

namespace headlab {
namespace {

std::string GiB(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(int64_t(1) << 30));
  return buf;
}

}  // namespace

CheckpointDiskNeed DiskNeedOf(const Json& config, const RetentionPolicy& policy) {
  CheckpointDiskNeed need;
  const std::string& kind = config.at("kind").get_ref<const std::string&>();
  if (kind != "train" && kind != "mqar") return need;
  need.checkpoint_bytes = CheckpointBytesEstimate(config);
  if (need.checkpoint_bytes == 0) return need;
  need.checkpoints = PeakCheckpointsOnDisk(ScheduleOf(config), policy);
  need.bytes = int64_t(std::ceil(double(need.checkpoints) * double(need.checkpoint_bytes) *
                                 kCheckpointDiskMargin)) +
               kAttemptFilesBytes;
  return need;
}

Status CheckDiskRoom(const CheckpointDiskNeed& need, int64_t keep_last, const std::string& dir,
                     int64_t free_bytes, int64_t reserved_bytes) {
  if (need.bytes <= free_bytes - reserved_bytes) return Status::Ok();
  std::string why =
      "not enough disk for the run's checkpoints in " + dir + ": needs " + GiB(need.bytes) + " (" +
      std::to_string(need.checkpoints) + " checkpoint(s) at once of " + GiB(need.checkpoint_bytes) +
      ", train.keep_checkpoints " + std::to_string(keep_last) + ", + " +
      std::to_string(std::lround((kCheckpointDiskMargin - 1) * 100)) + "% + " +
      std::to_string(kAttemptFilesBytes >> 20) + " MiB), " + GiB(free_bytes) + " free" +
      (reserved_bytes > 0
           ? ", of which " + GiB(reserved_bytes) + " is held for the attempts running here"
           : std::string());
  // Room the attempts running here will give back: the run waits (a busy REJECT, not
  // charged to its attempts); room no attempt here holds: the run cannot fit this disk.
  if (need.bytes <= free_bytes) return Status::Unavailable(std::move(why));
  return Status::IoError(std::move(why));
}

StatusOr<int64_t> FreeDiskBytes(const std::string& dir) {
  // A directory not created yet will be on its nearest existing ancestor's file system.
  std::string at = dir;
  struct statvfs st;
  while (::statvfs(at.c_str(), &st) != 0) {
    const size_t slash = at.find_last_of('/');
    if (errno != ENOENT || slash == std::string::npos || at == "/")
      return Status::IoError("statvfs " + dir + ": " + std::strerror(errno));
    at = slash == 0 ? "/" : at.substr(0, slash);
  }
  return int64_t(st.f_bavail) * int64_t(st.f_frsize);
}

}  // namespace headlab
