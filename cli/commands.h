// The CLI commands. Each takes the resolved context and its parsed arguments and returns
// the exit code (0 ok, 1 failed, 2 bad input); output goes to stdout, diagnostics to stderr.
#pragma once

#include "cli/args.h"
#include "cli/cli_context.h"

namespace headlab {

int RunSubmit(const CliContext& ctx, const ParsedArgs& args);     // submit.cc
int RunStatus(const CliContext& ctx, const ParsedArgs& args);     // inspect.cc
int RunRuns(const CliContext& ctx, const ParsedArgs& args);       // inspect.cc
int RunShow(const CliContext& ctx, const ParsedArgs& args);       // inspect.cc
int RunCancel(const CliContext& ctx, const ParsedArgs& args);     // control.cc
int RunRetry(const CliContext& ctx, const ParsedArgs& args);      // control.cc
int RunWait(const CliContext& ctx, const ParsedArgs& args);       // wait.cc
int RunResults(const CliContext& ctx, const ParsedArgs& args);    // results.cc
int RunQuery(const CliContext& ctx, const ParsedArgs& args);      // query.cc
int RunExport(const CliContext& ctx, const ParsedArgs& args);     // export.cc
int RunUp(const CliContext& ctx, const ParsedArgs& args);         // up.cc
int RunDown(const CliContext& ctx, const ParsedArgs& args);       // up.cc
int RunSlurm(const CliContext& ctx, const ParsedArgs& args);      // slurm.cc
int RunLogs(const CliContext& ctx, const ParsedArgs& args);       // logs.cc
int RunArtifacts(const CliContext& ctx, const ParsedArgs& args);  // artifacts.cc
int RunTag(const CliContext& ctx, const ParsedArgs& args);        // annotate.cc
int RunNote(const CliContext& ctx, const ParsedArgs& args);       // annotate.cc
int RunDiff(const CliContext& ctx, const ParsedArgs& args);       // diff.cc
int RunSchema(const CliContext& ctx, const ParsedArgs& args);     // schema.cc

// Prints `j` as indented JSON plus a newline to stdout (the --json output of every read).
void PrintJson(const Json& j);

}  // namespace headlab
