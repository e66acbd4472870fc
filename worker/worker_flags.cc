// Flag parsing for `headlab worker`.
#include "worker/worker_flags.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "common/files.h"
#include "common/flags.h"
#include "common/token_lookup.h"

namespace headlab {
namespace {

std::string HostName() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0 || !buf[0]) return "localhost";
  return buf;
}

// The default worker name: the host name, or under Slurm (e.g. started by srun without
// --name) slurm-<job id>-<node>, the name `headlab slurm submit-workers` gives.
std::string DefaultName(const std::string& host) {
  const char* job = std::getenv("SLURM_JOB_ID");
  if (!job || !*job) return host;
  const char* node = std::getenv("SLURMD_NODENAME");
  return std::string("slurm-") + job + "-" + (node && *node ? node : host);
}

// Accepts tcp://HOST:PORT (PORT in 1..65535) and ipc://PATH.
Status CheckEndpoint(const std::string& ep) {
  auto bad = [&] {
    return Status::InvalidArgument("--coordinator: expected tcp://ADDR:PORT, got \"" + ep + "\"");
  };
  if (ep.rfind("ipc://", 0) == 0) return ep.size() > 6 ? Status::Ok() : bad();
  if (ep.rfind("tcp://", 0) != 0) return bad();
  size_t colon = ep.rfind(':');
  if (colon <= 6 || colon + 1 >= ep.size()) return bad();
  std::string port = ep.substr(colon + 1);
  if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5) return bad();
  int p = std::stoi(port);
  return p >= 1 && p <= 65535 ? Status::Ok() : bad();
}

// Returns `s` with its message starting "headlab worker: ", as ParseFlags's errors do.
Status Named(const Status& s) {
  return s.ok() ? s : Status::InvalidArgument("headlab worker: " + s.message());
}

// The worker's options, for ParseFlags and the --help text alike.
const FlagsSpec& WorkerSpec() {
  static const FlagsSpec kSpec{
      "headlab worker",
      {{"--coordinator", "", "URL",
        "the coordinator's worker socket (default tcp://127.0.0.1:8322)"},
       {"--data-dir", "", "DIR",
        "data directory (default .headlab); the workers' token is\n"
        "read from DIR/worker_token unless HEADLAB_WORKER_TOKEN\n"
        "or --token-file gives it"},
       {"--token-file", "", "FILE",
        "file holding the workers' token (the coordinator's\n"
        "DIR/worker_token; its user token DIR/token is refused)"},
       {"--coordinator-key", "", "FILE",
        "the coordinator's CURVE public key (its\n"
        "DIR/curve_server.pub): encrypts the link; needed when\n"
        "the coordinator's worker port is beyond loopback"},
       {"--name", "", "NAME",
        "worker name (default: the host name; in a Slurm job\n"
        "slurm-<job id>-<node>)"},
       {"--slots", "", "N",
        "concurrent attempts when CPU-only (default 1); with GPUs one\n"
        "slot per GPU, at most N when given"},
       {"--cpu-only", "", "", "ignore GPUs"},
       {"--work-dir", "", "DIR", "manifests and run outputs (default DIR/worker-NAME)"}},
      /*args=*/"",
      /*min_positional=*/0,
      /*max_positional=*/0};
  return kSpec;
}

}  // namespace

std::string WorkerUsage() {
  return HelpText(
      WorkerSpec(),
      "Runs a worker: registers this host's devices with the coordinator, runs each\n"
      "assigned attempt as a `headlab exec` child, relays its results, cancels on request.\n",
      "Stops on SIGTERM/SIGINT: cancels running attempts, reports them, exits 0.\n"
      "Exit codes: 0 stopped, 1 refused by the coordinator or failed, 2 bad input.\n");
}

StatusOr<WorkerFlags> ParseWorkerFlags(int argc, char** argv) {
  auto args = ParseFlags(WorkerSpec(), std::vector<std::string>(argv, argv + argc));
  if (!args.ok()) return args.status();
  WorkerFlags f;
  f.help = args->help();
  f.cpu_only = args->Has("--cpu-only");
  for (const auto& [name, out] :
       {std::pair<const char*, std::string*>{"--coordinator", &f.coordinator},
        {"--data-dir", &f.data_dir},
        {"--token-file", &f.token_file},
        {"--coordinator-key", &f.coordinator_key},
        {"--name", &f.name},
        {"--work-dir", &f.work_dir}}) {
    if (!args->Has(name)) continue;
    *out = args->Get(name);
    if (out->empty()) return Named(Status::InvalidArgument(std::string(name) + ": empty value"));
  }
  if (args->Has("--coordinator")) HEADLAB_RETURN_IF_ERROR(Named(CheckEndpoint(f.coordinator)));
  if (args->Has("--slots")) {
    auto n = ParseIntFlag("--slots", args->Get("--slots"), 1, 1024);
    if (!n.ok()) return Named(n.status());
    f.slots = int(*n);
  }
  return f;
}

StatusOr<std::string> ResolveToken(const WorkerFlags& flags, const char* env_token) {
  auto found = LookUpToken(flags.token_file, env_token, flags.data_dir, kWorkerToken);
  if (found.ok()) return found->token;
  if (found.status().code() == Status::Code::kNotFound)
    return Status::InvalidArgument(
        "no worker token: pass --token-file FILE (the coordinator's DIR/worker_token), set "
        "HEADLAB_WORKER_TOKEN, or point --data-dir at the coordinator's data directory (" +
        flags.data_dir + "/worker_token does not exist)");
  return Status::InvalidArgument("no worker token: " + found.status().message());
}

StatusOr<std::string> ResolveCoordinatorKey(const WorkerFlags& flags) {
  if (flags.coordinator_key.empty()) return std::string();
  auto key = ReadTokenFile(flags.coordinator_key);
  if (!key.ok()) return Status::InvalidArgument("--coordinator-key: " + key.status().message());
  if (key->size() != 40)
    return Status::InvalidArgument("--coordinator-key " + flags.coordinator_key +
                                   ": expected a 40-character Z85 key (the coordinator's "
                                   "curve_server.pub), got " +
                                   std::to_string(key->size()) + " characters");
  return key;
}

WorkerOptions MakeWorkerOptions(const WorkerFlags& flags, const std::string& token,
                                const DeviceInventory& inventory,
                                const std::vector<std::string>& exec_command) {
  WorkerOptions o;
  std::string host = HostName();
  o.connection.endpoint = flags.coordinator;
  // READY.id must be printable ASCII of at most wire::kMaxWorkerIdBytes (a hostname is).
  std::string id_host = host.substr(0, 96);
  for (char& c : id_host)
    if (c <= ' ' || c > '~') c = '_';
  o.connection.identity = "worker-" + id_host + "-" + std::to_string(::getpid());
  o.connection.token = token;
  o.name = flags.name.empty() ? DefaultName(host) : flags.name;
  o.work_dir = flags.work_dir.empty() ? flags.data_dir + "/worker-" + o.name : flags.work_dir;
  o.exec_command = exec_command;
  if (flags.cpu_only || !inventory.has_gpu) {
    o.inventory.devices = {inventory.has_gpu ? CpuDevice() : inventory.devices[0]};
    o.inventory.cuda_driver = inventory.cuda_driver;
    o.inventory.cuda_runtime = inventory.cuda_runtime;
    o.inventory.note = flags.cpu_only ? "--cpu-only" : inventory.note;
    o.slots = flags.slots > 0 ? flags.slots : 1;
    o.slot_devices.assign(o.slots, "");
  } else {
    o.inventory = inventory;
    if (flags.slots > 0 && size_t(flags.slots) < o.inventory.devices.size())
      o.inventory.devices.resize(flags.slots);
    o.slots = int(o.inventory.devices.size());
    for (const Device& d : o.inventory.devices) o.slot_devices.push_back(std::to_string(d.index));
  }
  return o;
}

}  // namespace headlab
