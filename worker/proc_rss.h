// Resident memory of a process group on this host, from /proc (Linux): what an attempt's
// `headlab exec` child and everything it started hold in RAM right now.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "common/status.h"

namespace headlab {

// Returns the summed resident set size in bytes of the processes whose process group is
// `pgid` (an attempt's child leads its own group), from `proc_root`/PID/stat (field 24,
// rss in pages, times the page size). Processes that exit while being read are skipped.
// NotFound when no process of the group is left.
StatusOr<uint64_t> GroupRssBytes(pid_t pgid, const std::string& proc_root = "/proc");

}  // namespace headlab
