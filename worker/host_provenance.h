// Host provenance: the facts about this worker that every run it executes inherits
// (source tree commit, dirty flag, diff hash, binary hash, host, devices, CUDA versions).
// Computed once at start: they cannot change while the process runs.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "worker/devices.h"

namespace headlab {

// Returns the absolute path of `name` found in $PATH (a name with a '/' is returned as
// given), or "" when there is none (ChildProcess does not search PATH).
std::string FindInPath(const std::string& name);

// Runs argv (argv[0] searched in PATH), feeds its stdout to `on_stdout` and waits for it.
// Returns its exit status (127 when it could not be started), or an error if it did not
// finish within `timeout_ms`.
StatusOr<int> RunAndCapture(const std::vector<std::string>& argv,
                            const std::function<void(const std::string&)>& on_stdout,
                            int timeout_ms = 30000);

// Returns the provenance fields (names as in schema/001_init.sql's provenance table):
//   git_commit, git_dirty, git_diff_sha256   ("unknown" when git or the tree is unavailable)
//   binary_sha256, exec_plugin_sha256 (libheadlab_exec.so beside the binary), host,
//   devices, driver_version, cuda_version ("none" without CUDA)
Json ComputeHostProvenance(const std::string& source_dir, const std::string& binary_path,
                           const DeviceInventory& inventory);

// Rewrites the host's provenance for an attempt that runs on the CPU only: `devices` names
// the CPU and driver_version / cuda_version say "none (CPU run)", so a CPU result never
// reads as a CUDA one on a host that has GPUs (or a CUDA runtime) for other runs.
void MarkCpuOnlyAttempt(Json* provenance);

// Returns "cuda:0 NVIDIA H200, cuda:1 ..." or "cpu: <model>" for the given devices.
std::string DescribeDevices(const std::vector<Device>& devices);

}  // namespace headlab
