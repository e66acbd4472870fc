// `headlab exec MANIFEST`: read the manifest, normalize its config, run the kind, map the
// outcome to the exit status of schema/exec.md.
#include "payload/exec/exec_main.h"

#include <cstdio>
#include <string>
#include <vector>

#include "common/files.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/run_config.h"
#include "payload/exec/events.h"
#include "payload/exec/exec_config.h"
#include "payload/exec/manifest.h"
#include "payload/exec/method_hooks.h"
#include "payload/exec/run_kinds.h"
#include "payload/exec/stop_flag.h"

namespace headlab {
namespace {

constexpr const char* kUsage =
    "usage: headlab exec MANIFEST\n"
    "\n"
    "Runs one attempt of one run as described by the manifest JSON (schema/exec.md):\n"
    "  {run, attempt, experiment, config, out_dir, resume, parent}\n"
    "Events go to stdout, one JSON object per line (metric, artifact, provenance, summary,\n"
    "log); progress goes to stderr. Normally spawned by `headlab worker`.\n"
    "`headlab exec --rank R MANIFEST` is data-parallel rank R of a train or bench-update run\n"
    "with train.ranks > 1, started by rank 0 (payload/exec/dist.h); it reports nothing on stdout.\n"
    "\n"
    "exit status: 0 succeeded, 1 failed, 2 bad manifest or config, 143 stopped by SIGTERM\n";

int ExitCodeFor(const Status& s) {
  switch (s.code()) {
    case Status::Code::kOk:
      return 0;
    case Status::Code::kCancelled:
      return kExitStopped;
    case Status::Code::kInvalidArgument:
      return 2;
    default:
      return 1;
  }
}

// Reads and validates the manifest and its config; every error names `file` and the field.
StatusOr<LoadedRun> LoadRun(const std::string& file, int rank) {
  LoadedRun run;
  run.rank = rank;
  run.file = file;
  StatusOr<std::string> text = ReadFile(file);
  if (!text.ok()) return text.status();
  StatusOr<Manifest> manifest = ParseManifest(text.value(), file);
  if (!manifest.ok()) return manifest.status();
  run.manifest = manifest.value();
  StatusOr<Json> normalized = NormalizeRunConfig(run.manifest.config, file, "$.config");
  if (!normalized.ok()) return normalized.status();
  run.normalized = normalized.value();
  StatusOr<ExecConfig> config = ExecConfigFromJson(run.normalized, file);
  if (!config.ok()) return config.status();
  run.config = config.value();
  StatusOr<HookList> hooks = MakeMethodHooks(run.config, run.normalized, file);
  if (!hooks.ok()) return hooks.status();
  run.hooks = hooks.value();
  return run;
}

}  // namespace

int ExecMain(int argc, char** argv) {
  // `exec --rank R MANIFEST`: a data-parallel peer that rank 0 started (dist.h).
  static const FlagsSpec kSpec{"headlab exec", {{"--rank", "", "R", ""}}, "MANIFEST", 1, 1};
  auto args = ParseFlags(kSpec, std::vector<std::string>(argv, argv + argc));
  if (args.ok() && args->help()) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  StatusOr<long> rank_flag = args.ok()
                                 ? ParseIntFlag("--rank", args->Get("--rank", "0"), 0, 1 << 20)
                                 : StatusOr<long>(args.status());
  if (!rank_flag.ok()) {
    std::fprintf(stderr, "%s\n%s", rank_flag.status().message().c_str(), kUsage);
    return 2;
  }
  const int rank = int(*rank_flag);
  SetLogRole(rank ? "exec rank " + std::to_string(rank) : "exec");
  InstallStopHandler();
  const std::string file = args->positional()[0];

  StatusOr<LoadedRun> run = LoadRun(file, rank);
  if (!run.ok()) {
    LogError(run.status().message());
    return run.status().code() == Status::Code::kInvalidArgument ? 2 : 1;
  }
  EventSink events(stdout);
  Status result = RunOneKind(FindRunKind(run->config.kind), *run, &events);
  if (!result.ok()) {
    if (result.code() == Status::Code::kCancelled)
      LogInfo(result.message());
    else
      LogError(result.message());
  }
  return ExitCodeFor(result);
}

}  // namespace headlab
