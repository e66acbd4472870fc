// Placement policy: which queued run starts next, on which worker and which devices.
//
// Each run asks for resources in its config (schema/grid.md, "resources" and "priority"):
// a GPU count (0 = one slot of any kind, N = N CUDA devices on ONE worker: gang
// placement), per-device memory and compute capability, and exclusivity (timing runs:
// the worker runs nothing else meanwhile). The order is strict by priority (higher
// first); within a priority, the experiment holding the fewest devices goes next
// (max-min fair share across experiments), and within an experiment runs keep their
// grid order (run id). A run that fits nowhere now reserves one worker that could hold
// it when idle (the same one on each pass while it stays valid), so later runs stop
// filling that worker and a gang or exclusive run is not starved by a stream of small
// ones. Loop thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/json.h"
#include "coordinator/worker_registry.h"

namespace headlab::coord {

// What one run asks of a worker.
struct Demand {
  int gpus = 0;              // 0: one slot of any kind; N >= 1: N CUDA devices, one worker
  double min_memory_gb = 0;  // per device (the CPU "device" reports host memory)
  double min_cc = 0;         // compute capability major.minor, e.g. 8.0; > 0 needs CUDA
  bool exclusive = false;    // the worker runs nothing else while this run runs
  int priority = 0;          // higher runs first
  // Set by Pin, not by configs: the run may start only on this worker and these devices
  // (e.g. the later legs of a paired timing measurement, pair_legs.h).
  std::string pin_worker;
  std::vector<int> pin_devices;

  bool operator<(const Demand& o) const;
  bool operator==(const Demand& o) const { return !(*this < o) && !(o < *this); }
};

// Returns the demand in a run config; missing or mistyped keys take the defaults (configs
// stored before the keys existed have none).
Demand DemandFromConfig(const Json& config);

// Returns e.g. "2 GPUs (>= 40 GB, cc >= 8.0, exclusive)" or "1 slot".
std::string DescribeDemand(const Demand& d);

struct RunDemand {
  int64_t experiment = 0;
  Demand demand;
};

// Returns the experiment and demand of each run id; experiment 0 = no such run (dropped
// from the queue); an id absent from the answer could not be read (asked again next pass).
using DemandLookup = std::function<std::map<int64_t, RunDemand>(const std::vector<int64_t>&)>;

// Where one run starts: the worker and the CUDA device indices it gets ([] = a CPU slot).
struct Placement {
  int64_t run = 0;
  int64_t experiment = 0;
  WorkerInfo* worker = nullptr;
  std::vector<int> devices;
  bool exclusive = false;
};

class Scheduler {
 public:
  // --- The queue (ids of queued runs; their demands are looked up at the next pass) ---
  void Push(int64_t run);
  void Remove(int64_t run);
  bool empty() const { return queued_.empty(); }
  size_t size() const { return queued_.size(); }
  void Clear();

  // Starts a dispatch pass over `workers` (their `running` maps say what they hold).
  // Looks up the demands of running attempts it has not seen and of up to 2,048 newly
  // queued runs (lowest ids first; the rest wait for later passes).
  void BeginPass(std::map<std::string, WorkerInfo>& workers, const DemandLookup& lookup);
  // Returns the next run to start and where, removing it from the queue; nullopt when
  // nothing more fits in this pass. The caller must either start it (and add it to the
  // worker's `running`) or call Undo.
  std::optional<Placement> Next();
  // The placement was not used (the run waits for a parent, failed, was cancelled): its
  // devices are free again in this pass. The run is NOT put back in the queue.
  void Undo(const Placement& p);

  // Restricts queued or future `run` to `worker_id` and exactly `devices` ([] = a CPU
  // slot) until it is placed; it waits while they are busy, keeping that worker reserved.
  void Pin(int64_t run, const std::string& worker_id, const std::vector<int>& devices);

  // Returns why `run` is waiting beyond plain lack of free capacity, e.g. "needs 4 GPUs
  // (...): no registered worker has them", or "" (for logs and tests).
  std::string WaitReason(int64_t run) const;
  // Returns the worker id reserved for `run`, or "".
  std::string ReservedFor(int64_t run) const;

 private:
  struct Device {
    int index = 0;
    double memory_gb = 0;
    double cc = 0;
  };
  // One worker as this pass sees it.
  struct View {
    WorkerInfo* w = nullptr;
    bool gpu = false;
    std::vector<Device> devices;  // CUDA devices (GPU worker) or the CPU device
    std::set<int> used;           // CUDA indices held
    int cpu_used = 0;             // CPU slots held
    bool exclusive_held = false;  // an exclusive run is on it: nothing else goes there
    int64_t reserved_by = 0;      // run this worker is kept free for in this pass (0: none)
    bool Idle() const { return used.empty() && cpu_used == 0; }
  };

  // Interns `d` and returns its class id.
  int ClassOf(const Demand& d);
  void Index(int64_t run);
  void Unindex(int64_t run);
  bool Capable(const Device& dev, const Demand& d) const;
  // Devices `d` would get on `v` now ({} with `fits` for a CPU slot), or nullopt.
  std::optional<std::vector<int>> FitOn(const View& v, const Demand& d, int64_t run) const;
  // True iff `v` could hold `d` when idle.
  bool EverFits(const View& v, const Demand& d) const;
  void Reserve(int64_t run, const Demand& d);
  void Take(View& v, const Placement& p, int sign);
  void Bump(int64_t experiment, int delta);
  // True iff some worker can take a run in this pass (not full, exclusive or reserved).
  bool AnyFree() const;
  int Held(const std::vector<int>& devices) const {
    return devices.empty() ? 1 : int(devices.size());
  }

  std::set<int64_t> queued_;                     // every queued run id
  std::set<int64_t> unresolved_;                 // queued, demand not yet looked up
  std::unordered_map<int64_t, RunDemand> info_;  // queued and running runs
  std::vector<Demand> classes_;                  // interned demands
  // -priority -> experiment -> class -> run ids (resolved queued runs).
  std::map<int, std::map<int64_t, std::map<int, std::set<int64_t>>>> index_;
  std::unordered_map<int64_t, std::string> reservations_;  // run -> worker id (sticky)
  std::unordered_map<int64_t, std::string> wait_reason_;
  std::unordered_map<int64_t, std::pair<std::string, std::vector<int>>> pins_;  // run -> pin
  size_t cursor_ = 0;  // rotates the order of equally good workers across passes

  // Pass state.
  std::vector<View> views_;
  std::map<int64_t, int> held_;             // experiment -> devices held (running + placed)
  std::set<std::pair<int, int64_t>> fair_;  // (held, experiment) at the current level
  int level_ = 0;                           // current index_ key (-priority)
  bool level_started_ = false;
  std::set<int> failed_;  // classes that fit nowhere in this pass
};

}  // namespace headlab::coord
