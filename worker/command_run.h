// The `command` run kind (schema/command.md): for a run whose config.kind is "command",
// `headlab exec MANIFEST` runs the user's program instead of the LibTorch payload. The
// program starts in the attempt's directory with the run's config as JSON there, sees
// only the GPUs the worker gave the attempt (CUDA_VISIBLE_DEVICES), and reports metrics,
// summaries and artifacts as lines on the file descriptor $HEADLAB_FD (command_report.h);
// this process turns them into exec events on stdout for the worker, so pairing, retries,
// results and the dashboard treat such runs like built-in ones. No LibTorch here.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace headlab {

// The report descriptor's number in the program (also passed as $HEADLAB_FD).
inline constexpr int kCommandReportFd = 3;

// Returns exec's exit code when argv (argv[0] = "exec") is `exec MANIFEST` and the
// manifest's config.kind is "command"; nullopt otherwise (the LibTorch payload runs it).
std::optional<int> MaybeRunCommandExec(int argc, char** argv);

// Runs the attempt of the manifest at `manifest_path` (schema/exec.md). Returns 0 when the
// program exits 0, 2 for a bad manifest or program, else the program's exit status (128 +
// signal when killed).
int RunCommandExec(const std::string& manifest_path);

// Returns the program's argv for a run config: [interpreter found in PATH] program
// [command.args split at blanks]. A relative command.program is taken relative to
// `base_dir`. InvalidArgument names the config key for a missing program, a missing
// interpreter or a program that is not executable without one.
StatusOr<std::vector<std::string>> CommandArgv(const Json& config, const std::string& base_dir);

}  // namespace headlab
