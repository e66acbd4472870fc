// Command-line flags of `headlab worker` and how they become WorkerOptions.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "worker/devices.h"
#include "worker/worker.h"

namespace headlab {

struct WorkerFlags {
  std::string coordinator = "tcp://127.0.0.1:8322";
  std::string data_dir = ".headlab";
  std::string token_file;  // "" = HEADLAB_WORKER_TOKEN, else <data_dir>/worker_token
  // The coordinator's CURVE public key file (DIR/curve_server.pub); "" = unencrypted.
  std::string coordinator_key;
  std::string name;  // "" = the host name
  int slots = 0;     // 0 = one per GPU, or 1 CPU-only
  bool cpu_only = false;
  std::string work_dir;  // "" = <data_dir>/worker-<name>
  bool help = false;
};

// Returns the usage text.
std::string WorkerUsage();

// Parses argv (argv[0] is "worker"); `--flag value` and `--flag=value` both work.
// Errors are InvalidArgument "headlab worker: ..." naming the flag.
StatusOr<WorkerFlags> ParseWorkerFlags(int argc, char** argv);

// Returns the workers' token found by LookUpToken (common/token_lookup.h, kWorkerToken:
// --token-file, else $HEADLAB_WORKER_TOKEN, else <data_dir>/worker_token written by the
// coordinator). InvalidArgument with a message saying where it looked when there is none.
// The user's token (DIR/token, $HEADLAB_TOKEN) is never used: the worker port refuses it.
StatusOr<std::string> ResolveToken(const WorkerFlags& flags, const char* env_token);

// Returns the coordinator's CURVE public key from --coordinator-key ("" without one), or
// InvalidArgument naming the file when it cannot be read or is not a 40-character Z85 key.
StatusOr<std::string> ResolveCoordinatorKey(const WorkerFlags& flags);

// Returns the options for these flags and devices: identity worker-<host>-<pid>, slots
// (one per GPU, at most --slots of them; CPU-only: --slots, default 1), each slot's
// CUDA_VISIBLE_DEVICES, work dir, and `exec_command`.
WorkerOptions MakeWorkerOptions(const WorkerFlags& flags, const std::string& token,
                                const DeviceInventory& inventory,
                                const std::vector<std::string>& exec_command);

}  // namespace headlab
