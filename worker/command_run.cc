// The command run kind's exec: spawn the user's program, relay its output, translate its
// report lines, and describe what ran (the program's SHA-256, interpreter, git state).
#include "worker/command_run.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "common/child_process.h"
#include "common/files.h"
#include "common/sha256.h"
#include "common/source_dir.h"
#include "worker/child_output.h"
#include "worker/command_report.h"
#include "worker/host_provenance.h"

namespace headlab {
namespace {

constexpr int kExitBadInput = 2;
constexpr int kMaxReportedBadLines = 20;  // then only a count
constexpr const char* kOutputLog = "output.log";

volatile sig_atomic_t g_stop = 0;
void OnStop(int) { g_stop = 1; }

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Writes one exec event line to stdout (the worker's event pipe), flushed.
void EmitEvent(const Json& ev) {
  std::string line = ev.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

std::vector<std::string> SplitBlanks(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    size_t j = i;
    while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

// The first line `argv` prints (stdout, else nothing), e.g. "Python 3.11.2".
std::string FirstLine(const std::vector<std::string>& argv) {
  std::string out;
  auto rc = RunAndCapture(
      argv, [&](const std::string& s) { out += s; }, 10000);
  if (!rc.ok() || *rc != 0) return "";
  return out.substr(0, out.find('\n'));
}

// Provenance of what ran: the program's path and SHA-256, the interpreter and its
// version, the arguments, and the git state of the program's directory.
Json CommandProvenance(const std::vector<std::string>& argv, const std::string& program,
                       const std::string& interpreter) {
  Json p = Json::object();
  p["command_program"] = program;
  auto sha = Sha256File(program);
  p["command_sha256"] = sha.ok() ? *sha : "unknown";
  p["command_argv"] = argv;
  if (!interpreter.empty()) {
    p["command_interpreter"] = interpreter;
    std::string version = FirstLine({interpreter, "--version"});
    if (!version.empty()) p["command_interpreter_version"] = version;
  }
  std::string dir = std::filesystem::path(program).parent_path().string();
  std::string commit = FirstLine({"git", "-C", dir, "rev-parse", "HEAD"});
  if (!commit.empty()) {
    p["command_git_commit"] = commit;
    std::string changes;
    auto rc = RunAndCapture(
        {"git", "-C", dir, "status", "--porcelain", "--untracked-files=no"},
        [&](const std::string& s) { changes += s; }, 10000);
    if (rc.ok() && *rc == 0) p["command_git_dirty"] = changes.empty() ? 0 : 1;
  }
  return p;
}

// The environment the program sees (schema/command.md, "Environment").
std::map<std::string, std::string> ProgramEnv(const Json& manifest, const std::string& run_dir) {
  std::map<std::string, std::string> env = {
      {"HEADLAB_FD", std::to_string(kCommandReportFd)},
      {"HEADLAB_CONFIG", run_dir + "/config.json"},
      {"HEADLAB_RUN_DIR", run_dir},
      {"HEADLAB_RUN", manifest.value("run", Json()).dump()},
      {"HEADLAB_ATTEMPT", manifest.value("attempt", Json()).dump()},
      {"HEADLAB_EXPERIMENT", manifest.value("experiment", Json()).dump()},
      {"PYTHONUNBUFFERED", "1"},
  };
  // A retried attempt resumes its own checkpoint; else a continuation starts from its parent's.
  const Json resume = manifest.value("resume", Json());
  const Json parent = manifest.value("parent", Json());
  const Json& from = resume.is_object() ? resume : parent;
  if (from.is_object() && from.contains("path")) {
    env["HEADLAB_RESUME_PATH"] = from.value("path", "");
    env["HEADLAB_RESUME_STEP"] = from.value("step", Json(0)).dump();
    env["HEADLAB_RESUME_KIND"] = resume.is_object() ? "resume" : "parent";
  }
  // The repository's python/ (headlab_run.py) is importable without installing it.
  std::string py = std::string(SourceDir()) + "/python";
  if (PathExists(py + "/headlab_run.py")) {
    const char* old = std::getenv("PYTHONPATH");
    env["PYTHONPATH"] = py + (old && *old ? ":" + std::string(old) : "");
  }
  return env;
}

// Relays the program's stdout/stderr to our stderr (the worker keeps its tail) and to
// <run dir>/output.log; translates report lines into events on stdout.
class Relay {
 public:
  Relay(const std::string& run_dir, ChildProcess* child)
      : child_(child),
        translator_(run_dir, UnixNow),
        log_(run_dir + "/" + kOutputLog, std::ios::app | std::ios::binary) {}

  void Read(int fd) {
    // Which pipe, before reading: a read that reaches EOF closes it (its fd becomes -1).
    const bool report = fd == child_->report_fd();
    std::string data;
    child_->Read(fd, &data);
    if (data.empty()) return;
    if (report) {
      lines_.Append(data.data(), data.size(), [this](const std::string& l) { Line(l); });
      return;
    }
    std::fwrite(data.data(), 1, data.size(), stderr);
    std::fflush(stderr);
    log_.write(data.data(), std::streamsize(data.size()));
    log_.flush();
  }

  void Finish() {
    lines_.Finish([this](const std::string& l) { Line(l); });
    if (bad_lines_ > kMaxReportedBadLines)
      Warn(std::to_string(bad_lines_) + " report lines ignored in all");
    Json summary = translator_.FinalSummary();
    if (!summary.is_null()) EmitEvent(summary);
    log_.close();  // complete on disk before it is hashed as an artifact
  }

 private:
  void Line(const std::string& line) {
    ++line_no_;
    if (line.empty()) return;
    auto events = translator_.Translate(line);
    if (!events.ok()) {
      if (++bad_lines_ <= kMaxReportedBadLines)
        Warn("report line " + std::to_string(line_no_) + " ignored: " + events.status().message());
      return;
    }
    for (const Json& ev : *events) EmitEvent(ev);
  }

  void Warn(const std::string& msg) {
    std::string s = "headlab exec: " + msg + "\n";
    std::fwrite(s.data(), 1, s.size(), stderr);
    log_ << s;
    log_.flush();
  }

  ChildProcess* child_;
  ReportTranslator translator_;
  LineSplitter lines_;
  std::ofstream log_;
  int64_t line_no_ = 0;
  int bad_lines_ = 0;
};

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "headlab exec: %s\n", msg.c_str());
  return code;
}

}  // namespace

StatusOr<std::vector<std::string>> CommandArgv(const Json& config, const std::string& base_dir) {
  const Json cmd = config.value("command", Json::object());
  std::string program = cmd.value("program", "");
  if (program.empty())
    return Status::InvalidArgument("command.program: expected the program to run, got \"\"");
  namespace fs = std::filesystem;
  fs::path p = program;
  if (p.is_relative()) p = fs::path(base_dir) / p;
  p = p.lexically_normal();
  std::error_code ec;
  if (!fs::is_regular_file(p, ec))
    return Status::InvalidArgument("command.program: " + p.string() + ": no such file");
  std::vector<std::string> argv;
  std::string interpreter = cmd.value("interpreter", "");
  if (!interpreter.empty()) {
    std::string found = FindInPath(interpreter);
    if (found.empty() || ::access(found.c_str(), X_OK) != 0)
      return Status::InvalidArgument("command.interpreter: \"" + interpreter +
                                     "\" is not an executable in PATH");
    argv.push_back(found);
  } else if (::access(p.c_str(), X_OK) != 0) {
    return Status::InvalidArgument(
        "command.program: " + p.string() +
        " is not executable; set command.interpreter (e.g. \"python3\")");
  }
  argv.push_back(p.string());
  for (std::string& a : SplitBlanks(cmd.value("args", ""))) argv.push_back(std::move(a));
  return argv;
}

std::optional<int> MaybeRunCommandExec(int argc, char** argv) {
  if (argc != 2 || argv[1][0] == '-') return std::nullopt;
  auto text = ReadFile(argv[1]);
  if (!text.ok()) return std::nullopt;  // the payload reports it
  auto manifest = ParseJson(*text, argv[1]);
  if (!manifest.ok() || !manifest->is_object()) return std::nullopt;
  const Json config = manifest->value("config", Json::object());
  if (!config.is_object() || config.value("kind", "") != "command") return std::nullopt;
  return RunCommandExec(argv[1]);
}

int RunCommandExec(const std::string& manifest_path) {
  auto text = ReadFile(manifest_path);
  if (!text.ok()) return Fail(kExitBadInput, text.status().message());
  auto parsed = ParseJson(*text, manifest_path);
  if (!parsed.ok()) return Fail(kExitBadInput, parsed.status().message());
  const Json& manifest = *parsed;
  const Json config = manifest.value("config", Json::object());
  const std::string run_dir = manifest.value("out_dir", "");
  if (run_dir.empty() || !PathExists(run_dir))
    return Fail(kExitBadInput, manifest_path + ": out_dir: expected an existing directory");
  char cwd[4096];
  std::string base = ::getcwd(cwd, sizeof cwd) ? cwd : ".";
  auto argv = CommandArgv(config, base);
  if (!argv.ok()) return Fail(kExitBadInput, argv.status().message());
  Status st = WriteFileAtomic(run_dir + "/config.json", config.dump(2) + "\n");
  if (!st.ok()) return Fail(1, st.message());

  const std::string interpreter =
      config.value("command", Json::object()).value("interpreter", "").empty() ? "" : (*argv)[0];
  const std::string program = interpreter.empty() ? (*argv)[0] : (*argv)[1];
  EmitEvent(Json{{"ev", "provenance"}, {"fields", CommandProvenance(*argv, program, interpreter)}});

  // The program shares our process group, so the worker's SIGTERM (cancel) reaches it
  // directly; we only wait for it and report what it sent until then.
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = OnStop;
  for (int s : {SIGTERM, SIGINT}) ::sigaction(s, &sa, nullptr);
  SpawnOptions opt;
  opt.cwd = run_dir;
  opt.report_fd = kCommandReportFd;
  opt.own_group = false;
  auto child = ChildProcess::Spawn(*argv, ProgramEnv(manifest, run_dir), opt);
  if (!child.ok()) return Fail(kExitBadInput, child.status().message());
  ChildProcess& c = **child;
  Relay relay(run_dir, &c);
  std::optional<ExitInfo> exit;
  while (true) {
    std::vector<pollfd> fds;
    for (int fd : {c.stdout_fd(), c.stderr_fd(), c.report_fd()})
      if (fd >= 0) fds.push_back({fd, POLLIN, 0});
    if (!exit) exit = c.TryReap();
    if (fds.empty() && exit) break;
    // After exit, a grandchild may still hold the pipes: drain what is there and stop.
    if (::poll(fds.data(), fds.size(), exit ? 0 : 100) <= 0) {
      if (exit) break;
      continue;
    }
    for (const pollfd& p : fds)
      if (p.revents) relay.Read(p.fd);
  }
  for (int fd : {c.stdout_fd(), c.stderr_fd(), c.report_fd()})
    if (fd >= 0) relay.Read(fd);
  c.ClosePipes();
  relay.Finish();
  std::string log = run_dir + "/" + kOutputLog;
  if (PathExists(log)) {
    auto sha = Sha256File(log);
    std::error_code ec;
    auto bytes = std::filesystem::file_size(log, ec);
    if (sha.ok() && !ec)
      EmitEvent(Json{{"ev", "artifact"},
                     {"kind", "log"},
                     {"path", log},
                     {"sha256", *sha},
                     {"bytes", uint64_t(bytes)},
                     {"step", 0}});
  }
  if (exit->exit_code == 0) return 0;
  return Fail(exit->exit_code > 0 ? exit->exit_code : 1,
              "the program " +
                  (argv->size() > 1 && !interpreter.empty() ? (*argv)[1] : (*argv)[0]) +
                  " ended with " + exit->Describe() + (g_stop ? " after a stop request" : ""));
}

}  // namespace headlab
