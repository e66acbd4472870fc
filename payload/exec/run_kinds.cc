// The run-kind table: exec's own kinds, then the methods' (MethodSpec::run_kinds).
#include "payload/exec/run_kinds.h"

#include "payload/exec/flops.h"
#include "payload/exec/method_spec.h"
#include "payload/exec/noop.h"
#include "payload/exec/task_eval.h"

namespace headlab {
namespace {

RunKindTable MakeTable() {
  RunKindTable table = {
      {"noop", false, "", [](const LoadedRun& r, EventSink* e) { return RunNoop(r.config, e); }},
      {"train", true, "",
       [](const LoadedRun& r, EventSink* e) { return RunTraining(TrainRequestOf(r), e); }},
      {"flops", false, "",
       [](const LoadedRun& r, EventSink* e) {
         return RunFlops(FlopsRequest{r.config, r.normalized, r.manifest.out_dir, r.hooks}, e);
       }},
      {"bench-update", true, kBenchRefusesMethods,
       [](const LoadedRun& r, EventSink* e) { return RunBenchUpdate(BenchRequestOf(r), e); }},
      // mqar and passkey ignore the hooks (task_eval.h).
      {"mqar", false, "",
       [](const LoadedRun& r, EventSink* e) { return RunMqar(TrainRequestOf(r), e); }},
      {"passkey", false, "",
       [](const LoadedRun& r, EventSink* e) { return RunPasskey(TrainRequestOf(r), e); }},
  };
  for (const MethodSpec& m : Methods())
    table.insert(table.end(), m.run_kinds.begin(), m.run_kinds.end());
  return table;
}

const RunKindTable& Table() {
  static const RunKindTable table = MakeTable();
  return table;
}

// "\"train\" and \"bench-update\"": the kinds that allow train.ranks > 1.
std::string DataParallelKinds() {
  std::vector<std::string> names;
  for (const RunKind& k : Table())
    if (k.data_parallel) names.push_back("\"" + k.name + "\"");
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return out;
}

}  // namespace

TrainRequest TrainRequestOf(const LoadedRun& run) {
  return TrainRequest{run.config,
                      run.normalized,
                      run.manifest.out_dir,
                      run.manifest.resume,
                      run.manifest.parent,
                      run.manifest.parent_run,
                      run.hooks,
                      run.rank,
                      run.file};
}

BenchRequest BenchRequestOf(const LoadedRun& run) {
  return BenchRequest{run.config, run.normalized, run.file, run.manifest.out_dir, run.rank};
}

const RunKind* FindRunKind(const std::string& name) {
  for (const RunKind& k : Table())
    if (k.name == name) return &k;
  return nullptr;
}

Status RunOneKind(const RunKind* kind, const LoadedRun& run, EventSink* events) {
  const std::string& name = run.config.kind;
  if (run.config.train.ranks > 1 && !(kind && kind->data_parallel))
    return Status::InvalidArgument(run.file + ": $.config.train.ranks: kind \"" + name +
                                   "\" runs in one process; train.ranks > 1 is for kinds " +
                                   DataParallelKinds());
  if (!kind)
    return Status::InvalidArgument(run.file + ": $.config.kind: run kind \"" + name +
                                   "\" is not executable by this build");
  if (!run.hooks.empty() && !kind->refuses_methods.empty())
    return Status::Unavailable(run.file + ": $.config.kind: " + name + " " + kind->refuses_methods);
  return kind->run(run, events);
}

}  // namespace headlab
