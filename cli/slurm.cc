// `headlab slurm submit-workers`: writes the sbatch script of slurm_script.h under
// DIR/slurm/ and submits it with `sbatch --parsable` (or, with --dry-run, only writes and
// prints it). The coordinator must listen on an address the nodes reach: by default the
// workers endpoint in DIR/coordinator.json, with a wildcard bind replaced by this host's
// name; a loopback endpoint is refused unless --coordinator names it explicitly.
#include <poll.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "cli/commands.h"
#include "cli/slurm_script.h"
#include "common/child_process.h"
#include "common/files.h"
#include "common/token_lookup.h"

namespace headlab {
namespace {

std::string Absolute(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char buf[PATH_MAX];
  if (!::getcwd(buf, sizeof buf)) return path;
  return std::string(buf) + "/" + path;
}

std::string HostName() {
  char buf[256] = {0};
  return ::gethostname(buf, sizeof buf - 1) == 0 && buf[0] ? buf : "localhost";
}

StatusOr<int> IntOption(const ParsedArgs& args, const std::string& name, int def) {
  if (!args.Has(name)) return def;
  std::string v = args.Get(name);
  char* end = nullptr;
  long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n < INT_MIN || n > INT_MAX)
    return Status::InvalidArgument(name + ": expected an integer, got \"" + v + "\"");
  return int(n);
}

// The workers endpoint the nodes should use, from DIR/coordinator.json.
StatusOr<std::string> CoordinatorFromDataDir(const std::string& dir) {
  const std::string file = dir + "/coordinator.json";
  auto text = ReadFile(file);
  if (!text.ok())
    return Status::InvalidArgument("--coordinator: not given, and " + file +
                                   " (written by a running coordinator) is unreadable");
  auto j = ParseJson(*text, file);
  if (!j.ok() || !j->is_object() || !(*j)["workers"].is_string())
    return Status::InvalidArgument(file + ": $.workers: expected the workers endpoint");
  std::string ep = (*j)["workers"].get<std::string>();
  const std::string prefix = "tcp://";
  size_t colon = ep.rfind(':');
  if (ep.rfind(prefix, 0) != 0 || colon == std::string::npos)
    return Status::InvalidArgument(file + ": $.workers: expected tcp://HOST:PORT, got \"" + ep +
                                   "\"");
  std::string host = ep.substr(prefix.size(), colon - prefix.size());
  if (host == "0.0.0.0" || host == "*") host = HostName();
  if (host == "localhost" || host.rfind("127.", 0) == 0 || host == "[::1]")
    return Status::InvalidArgument(
        "--coordinator: the coordinator's worker socket " + ep + " (from " + file +
        ") is loopback-only, so other nodes cannot reach it; restart it with --workers "
        "tcp://0.0.0.0:PORT or pass --coordinator tcp://HOST:PORT");
  return prefix + host + ep.substr(colon);
}

// Runs `sbatch --parsable script`; returns the job id.
StatusOr<std::string> Sbatch(const std::string& script) {
  SpawnOptions opt;
  opt.own_group = false;
  opt.die_with_parent = false;
  opt.search_path = true;
  opt.stderr_to = SpawnOptions::Output::kInherit;
  auto child = ChildProcess::Spawn({"sbatch", "--parsable", script}, {}, opt);
  if (!child.ok())
    return Status::Unavailable("cannot run sbatch (is Slurm's sbatch on PATH?): " +
                               child.status().message());
  std::string out;
  while ((*child)->stdout_fd() >= 0) {
    pollfd p{(*child)->stdout_fd(), POLLIN, 0};
    ::poll(&p, 1, -1);
    (*child)->Read((*child)->stdout_fd(), &out);
  }
  const ExitInfo exit = (*child)->Wait();
  if (exit.exit_code != 0)
    return Status::Unavailable("sbatch " + script + " failed (" + exit.Describe() + ")");
  // --parsable prints "JOBID" or "JOBID;CLUSTER".
  std::string id = out.substr(0, out.find_first_of(";\n"));
  if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
    return Status::Internal("sbatch printed no job id: \"" + out + "\"");
  return id;
}

}  // namespace

int RunSlurm(const CliContext& ctx, const ParsedArgs& args) {
  const std::string action = args.positional()[0];
  if (action != "submit-workers")
    return Fail(
        ctx, Status::InvalidArgument("unknown action \"" + action + "\" (known: submit-workers)"));
  SlurmWorkerJob job;
  job.partition = args.Get("--partition");
  if (!args.Has("--partition")) return Fail(ctx, Status::InvalidArgument("--partition: required"));
  for (auto [name, field, def] : {std::tuple<const char*, int*, int>{"--nodes", &job.nodes, 1},
                                  {"--gpus-per-node", &job.gpus_per_node, 0},
                                  {"--cpu-slots", &job.cpu_slots, 1},
                                  {"--cpus-per-node", &job.cpus_per_node, 0}}) {
    auto v = IntOption(args, name, def);
    if (!v.ok()) return Fail(ctx, v.status());
    *field = *v;
  }
  job.time = args.Get("--time");
  job.job_name = args.Get("--job-name", job.job_name);
  const std::string data_dir = Absolute(ctx.data_dir);
  if (args.Has("--coordinator")) {
    job.coordinator = args.Get("--coordinator");
  } else {
    auto ep = CoordinatorFromDataDir(data_dir);
    if (!ep.ok()) return Fail(ctx, ep.status());
    job.coordinator = *ep;
  }
  job.headlab = Absolute(args.Get("--headlab", SelfExe()));
  job.data_dir = data_dir;
  // The job's workers use the workers' own token (it grants nothing over HTTP: a compute
  // node cannot act as the user), looked up as the worker does (common/token_lookup.h,
  // kWorkerToken): pass on the file that LookUpToken chose here, or nothing when
  // $HEADLAB_WORKER_TOKEN gives it (sbatch passes the environment on).
  auto token =
      LookUpToken(args.Get("--token-file"), std::getenv(kWorkerToken.env), data_dir, kWorkerToken);
  if (!token.ok() && token.status().code() == Status::Code::kNotFound)
    return Fail(ctx, Status::InvalidArgument(
                         "no worker token for the job: pass --token-file FILE, set "
                         "HEADLAB_WORKER_TOKEN (sbatch passes the environment on), or point "
                         "--data-dir at the coordinator's data directory (its worker_token)"));
  if (!token.ok()) return Fail(ctx, token.status());
  if (token->from == TokenSource::kFlag) job.token_file = Absolute(args.Get("--token-file"));
  if (token->from == TokenSource::kDataDir) job.token_file = data_dir + "/" + kWorkerToken.file;
  // An encrypted worker port: the job's workers need the coordinator's key (shared file
  // system, as for the token).
  job.coordinator_key = WorkerKeyFile(data_dir);
  const std::string dir = data_dir + "/slurm";
  job.output = dir + "/slurm-%j.out";
  Status st = CheckSlurmWorkerJob(job);
  if (!st.ok()) return Fail(ctx, st);

  st = MakeDirs(dir);
  if (!st.ok()) return Fail(ctx, st);
  char stamp[32];
  std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", std::gmtime(&now));
  const std::string script =
      dir + "/" + job.job_name + "-" + stamp + "-" + std::to_string(::getpid()) + ".sbatch";
  const std::string text = SbatchScript(job);
  st = WriteFileAtomic(script, text, 0755);
  if (!st.ok()) return Fail(ctx, st);

  const bool dry = args.Has("--dry-run");
  std::string job_id;
  if (!dry) {
    auto id = Sbatch(script);
    if (!id.ok()) return Fail(ctx, id.status());
    job_id = *id;
  }
  if (args.Has("--json")) {
    PrintJson({{"script", script},
               {"submitted", !dry},
               {"job", dry ? Json(nullptr) : Json(job_id)},
               {"coordinator", job.coordinator},
               {"nodes", job.nodes},
               {"gpus_per_node", job.gpus_per_node},
               {"worker_names", "slurm-" + (dry ? std::string("<job>") : job_id) + "-<node>"}});
  } else if (dry) {
    std::printf("%s", text.c_str());
    std::fprintf(stderr, "headlab slurm: wrote %s (not submitted: --dry-run)\n", script.c_str());
  } else {
    std::printf(
        "submitted job %s: %d node(s) x %d GPU(s), workers slurm-%s-<node> -> %s\n"
        "  script %s\n",
        job_id.c_str(), job.nodes, job.gpus_per_node, job_id.c_str(), job.coordinator.c_str(),
        script.c_str());
  }
  return 0;
}

}  // namespace headlab
