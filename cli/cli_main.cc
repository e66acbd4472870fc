// The CLI's dispatcher: one table of commands, each with its spec (options, usage) and
// handler; global options and the token are resolved once here.
#include "cli/cli_main.h"

#include <cstdio>

#include "cli/commands.h"
#include "common/suggest.h"

namespace headlab {

namespace {

struct Command {
  CommandSpec spec;
  int (*run)(const CliContext&, const ParsedArgs&);
};

const OptionSpec kJson = {"--json", "", "", "print JSON instead of a table"};

const std::vector<Command>& Commands() {
  static const std::vector<Command> kCommands = {
      {{"submit",
        "FILE",
        "Submit a grid file (JSON with comments; schema/grid.md) to the coordinator.",
        {{"--set", "", "KEY=V1,V2",
          "add or replace the axis KEY (values: JSON numbers/bools, else strings)", true},
         {"--rerun", "", "", "run every config again instead of reusing finished runs"},
         {"--dry-run", "", "", "expand the grid locally and print its runs; submit nothing"},
         {"--json", "", "",
          "print {\"experiment\": ID, \"runs\": N, \"reused\": R} (dry run: {\"runs\": N, "
          "\"configs\": [...]})"}},
        1,
        1},
       RunSubmit},
      {{"status", "", "Show the coordinator, its workers and recent experiments.", {kJson}, 0, 0},
       RunStatus},
      {{"runs",
        "[EXP]",
        "List an experiment's runs (the config values its grid varies, key metrics, tags), or\n"
        "search runs across experiments by status, tag and config value. EXP is an id or a\n"
        "grid name (the newest experiment of that name).",
        {{"--status", "", "S[,S]",
          "only runs with these statuses (queued, running, succeeded, failed, lost, cancelled)",
          true},
         {"--tag", "", "T", "only runs tagged T, or in an experiment tagged T", true},
         {"--where", "", "KEY OP V",
          "only runs whose config KEY compares so to V (OP: = != < <= > >=), e.g. train.lr=1e-3",
          true},
         {"--limit", "", "N", "at most N runs of a search (default 1000)"},
         kJson},
        0,
        1},
       RunRuns},
      {{"show",
        "RUN",
        "Show one run in full: why it failed, the config keys that matter (--all: every key),\n"
        "attempts, summary, provenance, artifacts.",
        {{"--all", "", "", "print every config key, defaults of unused methods included"}, kJson},
        1,
        1},
       RunShow},
      {{"diff",
        "RUN RUN",
        "Show the config keys whose values differ between two runs (of any experiments),\n"
        "then the summary metrics that differ.",
        {{"--json", "", "", "print {a, b, config: [{key, a, b}], summary: [...]}"}},
        2,
        2},
       RunDiff},
      {{"logs",
        "RUN",
        "Show why a run did what it did: its events (assigned, lost, done, cancelled, ...)\n"
        "and the end and stderr tail of each attempt.",
        {{"--attempt", "", "N", "only attempt N"}, kJson},
        1,
        1},
       RunLogs},
      {{"artifacts",
        "RUN",
        "List a run's artifacts (checkpoints, logprobs, head maps, logs) with their SHA-256;\n"
        "--get downloads one through the API and checks its hash.",
        {{"--get", "", "ATTEMPT/SEQ", "download this artifact (ids as listed)"},
         {"--output", "-o", "FILE", "where --get writes (default: the artifact's file name)"},
         kJson},
        1,
        1},
       RunArtifacts},
      {{"cancel",
        "TARGET",
        "Cancel a run (`cancel run 7`) or every queued/running run of an experiment\n"
        "(`cancel experiment 3`, `cancel demo`). A bare number is refused as ambiguous.",
        {{"--experiment", "", "EXP", "the same as `cancel experiment EXP`"}, kJson},
        0,
        2},
       RunCancel},
      {{"tag",
        "TARGET [TAG...]",
        "Tag a run (`tag run 7 good`) or an experiment (`tag experiment 3 paper`, `tag demo\n"
        "paper`); with no TAG, print the tags. `headlab runs --tag T` finds them.",
        {{"--remove", "", "TAG", "remove TAG", true}, kJson},
        1,
        1000},
       RunTag},
      {{"note",
        "TARGET [TEXT]",
        "Set the note of a run or experiment (`note run 7 \"diverged at step 80\"`); \"\" removes\n"
        "it; with no TEXT, print it.",
        {kJson},
        1,
        3},
       RunNote},
      {{"retry", "RUN", "Requeue a failed, cancelled or lost run as a new attempt.", {kJson}, 1, 1},
       RunRetry},
      {{"wait",
        "EXP",
        "Wait until no run of EXP is queued or running, with a progress bar on stderr.\n"
        "Exit 0 when every run succeeded, 1 when any failed, was lost or cancelled (or on "
        "timeout).",
        {{"--timeout", "", "S", "give up after S seconds (exit 1)"},
         {"--quiet", "", "", "no progress output"},
         {"--json", "", "", "print the final counts as JSON"}},
        1,
        1},
       RunWait},
      {{"results",
        "EXP",
        "Show one row per arm (n, succeeded, summary metrics as mean ± SE) and the grid's\n"
        "comparisons with their confidence intervals. Arms and comparisons are broken down by\n"
        "every axis the grid does not pair on (a comparison never pools its levels), and by\n"
        "--by keys. Exit 1 when no run has succeeded (yet).",
        {{"--by", "", "KEY", "also break arms and comparisons down by config KEY (e.g. train.lr)",
          true},
         {"--level", "", "L", "confidence level of the intervals (default 0.95; e.g. 0.99)"},
         kJson},
        1,
        1},
       RunResults},
      {{"query",
        "SQL",
        "Run read-only SQL on the coordinator's database.",
        {{"--csv", "", "", "print CSV"}, {"--json", "", "", "print {columns, rows} JSON"}},
        1,
        1},
       RunQuery},
      {{"export",
        "EXP",
        "Export an experiment's runs with config and summary, or with --history every metric\n"
        "point of every run as JSON lines (pandas.read_json(F, lines=True)).",
        {{"--format", "", "json|csv",
          "json (default) or csv: one row per run, flattened config and summary"},
         {"--history", "", "",
          "per-step metrics as JSON lines: {experiment, run, arm, attempt, step, key, value, "
          "time_s, params}"},
         {"--all-attempts", "", "",
          "with --history: every attempt's points, not only the current attempt's"},
         {"--output", "-o", "FILE", "write to FILE instead of stdout"}},
        1,
        1},
       RunExport},
      {{"up",
        "",
        "Start a coordinator and one local worker (children of this process) and print the\n"
        "dashboard URL. Foreground until SIGINT/SIGTERM, or --detach (stop with `headlab down`).",
        {{"--http", "", "ADDR:PORT", "HTTP API and dashboard address (default 127.0.0.1:8321)"},
         {"--workers", "", "tcp://ADDR:PORT", "worker socket (default tcp://127.0.0.1:8322)"},
         {"--worker-slots", "", "N",
          "runs the local worker executes at once on the CPU (default: the\n"
          "number of CPU cores; with GPUs it runs one per GPU)"},
         {"--detach", "", "", "leave both running; pids in DIR/up.json, logs in DIR/*.log"}},
        0,
        0},
       RunUp},
      {{"down", "", "Stop the coordinator and worker started by `headlab up --detach`.", {}, 0, 0},
       RunDown},
      {{"slurm",
        "submit-workers",
        "Write an sbatch script that starts one worker per node (named slurm-<job>-<node>,\n"
        "connecting to the coordinator) and submit it. Requeued or preempted allocations\n"
        "rejoin under the same names; the coordinator requeues their interrupted runs.",
        {{"--partition", "", "P", "Slurm partition (required)"},
         {"--nodes", "", "N", "nodes, one worker each (default 1)"},
         {"--gpus-per-node", "", "G", "GPUs per node, one slot each (default 0: CPU-only workers)"},
         {"--cpu-slots", "", "S", "concurrent runs of a CPU-only worker (default 1)"},
         {"--cpus-per-node", "", "C", "CPUs for each node's worker (sbatch --cpus-per-task)"},
         {"--time", "", "T", "time limit (sbatch --time), default the partition's"},
         {"--job-name", "", "NAME", "job name (default headlab-workers)"},
         {"--coordinator", "", "tcp://HOST:PORT",
          "worker socket the nodes connect to (default: "
          "from DIR/coordinator.json; a loopback socket is refused)"},
         {"--headlab", "", "PATH", "the headlab binary on the nodes (default: this one)"},
         {"--dry-run", "", "", "write the script and print it; submit nothing"},
         {"--json", "", "", "print {script, submitted, job, coordinator, ...}"}},
        1,
        1},
       RunSlurm},
      {{"schema",
        "",
        "Print the run-config reference (every key's type, default, range and meaning, from\n"
        "the schema) as the Markdown tables of schema/grid.md, or write or check the generated\n"
        "tables of schema/grid.md and each method README in the source tree.",
        {{"--json", "", "", "print every key as JSON (key, type, default, bounds, allowed, doc)"},
         {"--write", "", "", "rewrite the generated blocks of the docs under --root"},
         {"--check", "", "", "exit 1 naming each doc whose generated block differs (ctest)"},
         {"--root", "", "DIR", "the source tree (default: the one this binary was built from)"}},
        0,
        0},
       RunSchema},
  };
  return kCommands;
}

const Command* FindCommand(const std::string& name) {
  for (const auto& c : Commands())
    if (c.spec.name == name) return &c;
  return nullptr;
}

}  // namespace

bool IsCliCommand(const std::string& command) { return FindCommand(command) != nullptr; }

std::string SuggestCommand(const std::string& command) {
  std::vector<std::string> names = {"coordinator", "worker", "exec", "bench",
                                    "data",        "backup", "help"};
  for (const auto& c : Commands()) names.push_back(c.spec.name);
  return ClosestName(command, names);
}

int CliMain(int argc, char** argv) {
  if (argc < 1) return kExitBadInput;
  const Command* cmd = FindCommand(argv[0]);
  if (!cmd) {
    std::string guess = SuggestCommand(argv[0]);
    std::fprintf(stderr, "headlab: unknown command '%s'%s\n", argv[0],
                 guess.empty() ? "" : ("; did you mean '" + guess + "'?").c_str());
    return kExitBadInput;
  }
  std::vector<std::string> args(argv, argv + argc);
  auto parsed = ParseArgs(cmd->spec, args);
  if (!parsed.ok()) {
    std::fprintf(stderr, "%s\n", parsed.status().message().c_str());
    return kExitBadInput;
  }
  if (parsed->help()) {
    std::printf("%s", Usage(cmd->spec).c_str());
    return kExitOk;
  }
  auto ctx = ResolveContext(cmd->spec.name, parsed.value());
  if (!ctx.ok()) {
    std::fprintf(stderr, "headlab %s: %s\n", cmd->spec.name.c_str(),
                 ctx.status().message().c_str());
    return kExitBadInput;
  }
  return cmd->run(ctx.value(), parsed.value());
}

}  // namespace headlab
