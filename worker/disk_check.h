// The worker's disk check before it accepts an attempt: the run's checkpoints, as many as
// retention holds at once (common/checkpoint_retention.h), must fit the free space of the
// work directory's file system, less what the attempts already running here still need.
// A run that does not fit is refused (REJECT, charged to its attempts) with the need and
// the free space named, instead of failing at its last step with "No space left on device".
#pragma once

#include <cstdint>
#include <string>

#include "common/checkpoint_retention.h"
#include "common/json.h"
#include "common/status.h"

namespace headlab {

// Slack on top of the checkpoints: the archive's framing and the estimate's error (10%),
// and the attempt's other files (log-probs, head maps, manifest, logs).
inline constexpr double kCheckpointDiskMargin = 1.10;
inline constexpr int64_t kAttemptFilesBytes = int64_t(64) << 20;

struct CheckpointDiskNeed {
  int64_t checkpoint_bytes = 0;  // one checkpoint (common/checkpoint_size.h); 0 = unknown
  int64_t checkpoints = 0;       // on disk at once (PeakCheckpointsOnDisk)
  int64_t bytes = 0;             // checkpoints x checkpoint_bytes x margin + attempt files
};

// Returns what a run of normalized `config` needs under `policy`: nothing (bytes 0) for
// kinds that write no checkpoints (only train and mqar do) and for model.init_from, whose
// size only exec knows.
CheckpointDiskNeed DiskNeedOf(const Json& config, const RetentionPolicy& policy);

// Returns Ok when `need` fits `free_bytes` less `reserved_bytes` (what running attempts
// still need); else "not enough disk for the run's checkpoints in DIR: needs 4.61 GiB (3
// checkpoints at once of 1.39 GiB, train.keep_checkpoints 2, + 10% + 64 MiB), 2.10 GiB
// free", Unavailable when it fits once the running attempts are done (the run waits: a
// busy REJECT), IoError when it does not fit the free space at all (charged to the run's
// attempts). `keep_last` is train.keep_checkpoints, named in the message.
Status CheckDiskRoom(const CheckpointDiskNeed& need, int64_t keep_last, const std::string& dir,
                     int64_t free_bytes, int64_t reserved_bytes);

// Returns the bytes an unprivileged process may still write on the file system of `dir`
// (statvfs f_bavail x f_frsize), or of its nearest existing ancestor.
StatusOr<int64_t> FreeDiskBytes(const std::string& dir);

}  // namespace headlab
