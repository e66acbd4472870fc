// Placement policy (see scheduler.h for the rules).
#include "coordinator/scheduler.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "common/log.h"

namespace headlab::coord {
namespace {

// Runs whose demand one pass looks up at most (one indexed row read each).
constexpr size_t kMaxLookupsPerPass = 2048;

// Compute capability as major * 10 + minor, so that 8.9 compares exactly.
int CcTenths(double cc) { return int(std::lround(cc * 10)); }

double Number(const Json& obj, const char* key, double def) {
  if (!obj.is_object()) return def;
  auto it = obj.find(key);
  return it != obj.end() && it->is_number() ? it->get<double>() : def;
}

}  // namespace

bool Demand::operator<(const Demand& o) const {
  return std::tie(gpus, min_memory_gb, min_cc, exclusive, priority, pin_worker, pin_devices) <
         std::tie(o.gpus, o.min_memory_gb, o.min_cc, o.exclusive, o.priority, o.pin_worker,
                  o.pin_devices);
}

Demand DemandFromConfig(const Json& config) {
  Demand d;
  if (!config.is_object()) return d;
  auto res = config.find("resources");
  const Json& r = res != config.end() ? *res : Json::object();
  d.gpus = std::max(0, int(Number(r, "gpus", 0)));
  d.min_memory_gb = std::max(0.0, Number(r, "min_memory_gb", 0));
  d.min_cc = std::max(0.0, Number(r, "min_compute_capability", 0));
  d.exclusive = Number(r, "exclusive", 0) != 0;
  d.priority = int(Number(config, "priority", 0));
  return d;
}

std::string DescribeDemand(const Demand& d) {
  std::string out =
      d.gpus == 0 ? "1 slot" : std::to_string(d.gpus) + (d.gpus == 1 ? " GPU" : " GPUs");
  std::vector<std::string> parts;
  char buf[64];
  if (d.min_memory_gb > 0) {
    std::snprintf(buf, sizeof buf, ">= %g GB", d.min_memory_gb);
    parts.push_back(buf);
  }
  if (d.min_cc > 0) {
    std::snprintf(buf, sizeof buf, "cc >= %.1f", d.min_cc);
    parts.push_back(buf);
  }
  if (d.exclusive) parts.push_back("exclusive");
  if (!d.pin_worker.empty()) parts.push_back("on " + d.pin_worker);
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : " (") + parts[i];
  if (!parts.empty()) out += ")";
  return out;
}

// --- The queue ---

int Scheduler::ClassOf(const Demand& d) {
  for (size_t i = 0; i < classes_.size(); ++i)
    if (classes_[i] == d) return int(i);
  classes_.push_back(d);
  return int(classes_.size() - 1);
}

void Scheduler::Index(int64_t run) {
  const RunDemand& rd = info_.at(run);
  index_[-rd.demand.priority][rd.experiment][ClassOf(rd.demand)].insert(run);
}

void Scheduler::Unindex(int64_t run) {
  auto info = info_.find(run);
  if (info == info_.end()) return;
  const RunDemand& rd = info->second;
  auto level = index_.find(-rd.demand.priority);
  if (level == index_.end()) return;
  auto exp = level->second.find(rd.experiment);
  if (exp == level->second.end()) return;
  auto cls = exp->second.find(ClassOf(rd.demand));
  if (cls == exp->second.end()) return;
  cls->second.erase(run);
  // Empty containers are erased so that a pass never walks them; Next() re-finds its
  // level and experiment by key, never by a held iterator.
  if (cls->second.empty()) exp->second.erase(cls);
  if (exp->second.empty()) level->second.erase(exp);
  if (level->second.empty()) index_.erase(level);
}

void Scheduler::Push(int64_t run) {
  if (!queued_.insert(run).second) return;
  if (info_.count(run)) {
    Index(run);
  } else {
    unresolved_.insert(run);
  }
}

void Scheduler::Remove(int64_t run) {
  if (!queued_.erase(run)) return;
  if (!unresolved_.erase(run)) Unindex(run);
  reservations_.erase(run);
  wait_reason_.erase(run);
  pins_.erase(run);
}

void Scheduler::Pin(int64_t run, const std::string& worker_id, const std::vector<int>& devices) {
  pins_[run] = {worker_id, devices};
  auto info = info_.find(run);
  if (info == info_.end()) return;  // applied when its demand is looked up
  bool indexed = queued_.count(run) && !unresolved_.count(run);
  if (indexed) Unindex(run);
  info->second.demand.pin_worker = worker_id;
  info->second.demand.pin_devices = devices;
  if (indexed) Index(run);
}

void Scheduler::Clear() {
  pins_.clear();
  queued_.clear();
  unresolved_.clear();
  index_.clear();
  reservations_.clear();
  wait_reason_.clear();
}

std::string Scheduler::WaitReason(int64_t run) const {
  auto it = wait_reason_.find(run);
  return it == wait_reason_.end() ? "" : it->second;
}

std::string Scheduler::ReservedFor(int64_t run) const {
  auto it = reservations_.find(run);
  return it == reservations_.end() ? "" : it->second;
}

// --- A pass ---

void Scheduler::BeginPass(std::map<std::string, WorkerInfo>& workers, const DemandLookup& lookup) {
  ++cursor_;
  std::set<int64_t> running;
  for (auto& [id, w] : workers)
    for (const auto& [ref, devs] : w.running) running.insert(ref.run);
  // Bounded work per pass: a queue of 100,000 fresh runs is looked up over many passes
  // (grid order first), not in one that would hold the loop for seconds.
  std::vector<int64_t> ask;
  for (int64_t r : running)
    if (!info_.count(r)) ask.push_back(r);
  for (auto it = unresolved_.begin(); it != unresolved_.end() && ask.size() < kMaxLookupsPerPass;
       ++it)
    ask.push_back(*it);
  if (!ask.empty()) {
    std::map<int64_t, RunDemand> found = lookup(ask);
    for (auto& [id, rd] : found) {
      if (rd.experiment == 0) continue;
      info_[id] = rd;
      auto pin = pins_.find(id);
      if (pin != pins_.end()) {
        info_[id].demand.pin_worker = pin->second.first;
        info_[id].demand.pin_devices = pin->second.second;
      }
    }
    for (int64_t id : ask) {
      auto f = found.find(id);
      if (f == found.end() || !unresolved_.count(id)) continue;  // unreadable now: next pass
      if (f->second.experiment != 0) {
        Index(id);
      } else {
        queued_.erase(id);  // the run row is gone: nothing to start
        LogWarn("scheduler: queued run " + std::to_string(id) + " not found; dropped");
      }
      unresolved_.erase(id);
    }
  }
  // Forget runs that are neither queued nor running, amortised.
  if (info_.size() > 2 * (queued_.size() + running.size()) + 1024) {
    for (auto it = info_.begin(); it != info_.end();)
      it = queued_.count(it->first) || running.count(it->first) ? std::next(it) : info_.erase(it);
  }

  views_.clear();
  held_.clear();
  for (auto& [id, w] : workers) {
    View v;
    v.w = &w;
    v.gpu = !w.cuda_devices.empty();
    if (w.devices.is_array()) {
      for (const Json& dj : w.devices) {
        if (!dj.is_object()) continue;
        bool cuda = dj.value("kind", "") == "cuda";
        if (cuda != v.gpu) continue;
        Device d;
        d.index = int(Number(dj, "index", 0));
        d.memory_gb = Number(dj, "memory_bytes", 0) / 1e9;
        d.cc = Number(dj, "cc_major", 0) + Number(dj, "cc_minor", 0) / 10;
        v.devices.push_back(d);
        if (!v.gpu) break;  // a CPU worker's slots share its one device
      }
    }
    if (!v.gpu && v.devices.empty()) v.devices.push_back(Device{});
    for (const auto& [ref, devs] : w.running) {
      if (devs.empty()) ++v.cpu_used;
      v.used.insert(devs.begin(), devs.end());
      auto info = info_.find(ref.run);
      if (info != info_.end()) {
        v.exclusive_held = v.exclusive_held || info->second.demand.exclusive;
        held_[info->second.experiment] += Held(devs);
      }
    }
    views_.push_back(std::move(v));
  }
  if (!views_.empty())
    std::rotate(views_.begin(), views_.begin() + cursor_ % views_.size(), views_.end());
  // Reservations are re-made in this pass's order (Reserve prefers the run's previous
  // worker), so a run earlier in the order may still take a worker reserved last time.
  fair_.clear();
  failed_.clear();
  level_started_ = false;
}

bool Scheduler::Capable(const Device& dev, const Demand& d) const {
  return dev.memory_gb + 1e-9 >= d.min_memory_gb && CcTenths(dev.cc) >= CcTenths(d.min_cc);
}

std::optional<std::vector<int>> Scheduler::FitOn(const View& v, const Demand& d,
                                                 int64_t run) const {
  if (v.exclusive_held) return std::nullopt;
  if (v.reserved_by != 0 && v.reserved_by != run) return std::nullopt;
  if (d.exclusive && !v.Idle()) return std::nullopt;
  if (!d.pin_worker.empty()) {
    if (v.w->id != d.pin_worker) return std::nullopt;
    if (d.pin_devices.empty())
      return !v.gpu && v.cpu_used < v.w->Capacity()
                 ? std::optional<std::vector<int>>(std::vector<int>{})
                 : std::nullopt;
    for (int i : d.pin_devices) {
      bool known = false;
      for (const Device& dev : v.devices) known = known || dev.index == i;
      if (!known || v.used.count(i)) return std::nullopt;
    }
    return d.pin_devices;
  }
  if (!v.gpu) {
    if (d.gpus > 0 || d.min_cc > 0 || !Capable(v.devices[0], d)) return std::nullopt;
    if (v.cpu_used >= v.w->Capacity()) return std::nullopt;
    return std::vector<int>{};
  }
  std::vector<int> got;
  size_t want = size_t(std::max(1, d.gpus));
  for (const Device& dev : v.devices) {
    if (v.used.count(dev.index) || !Capable(dev, d)) continue;
    got.push_back(dev.index);
    if (got.size() == want) return got;
  }
  return std::nullopt;
}

bool Scheduler::EverFits(const View& v, const Demand& d) const {
  if (!d.pin_worker.empty()) return v.w->id == d.pin_worker;
  if (!v.gpu)
    return d.gpus == 0 && d.min_cc <= 0 && Capable(v.devices[0], d) && v.w->Capacity() > 0;
  int capable = 0;
  for (const Device& dev : v.devices) capable += Capable(dev, d);
  return capable >= std::max(1, d.gpus);
}

void Scheduler::Take(View& v, const Placement& p, int sign) {
  if (p.devices.empty()) v.cpu_used += sign;
  for (int d : p.devices) {
    if (sign > 0)
      v.used.insert(d);
    else
      v.used.erase(d);
  }
  if (p.exclusive) v.exclusive_held = sign > 0;
}

void Scheduler::Bump(int64_t experiment, int delta) {
  int& h = held_[experiment];
  bool present = fair_.erase({h, experiment}) > 0;
  h += delta;
  if (present) fair_.insert({h, experiment});
}

void Scheduler::Reserve(int64_t run, const Demand& d) {
  View* best = nullptr;
  auto free_capable = [&](const View& v) {
    int n = 0;
    if (!v.gpu) return v.w->Capacity() - v.cpu_used;
    for (const Device& dev : v.devices) n += !v.used.count(dev.index) && Capable(dev, d);
    return n;
  };
  bool any_ever = false;
  auto sticky = reservations_.find(run);
  for (View& v : views_) {
    if (!EverFits(v, d)) continue;
    any_ever = true;
    if (v.reserved_by != 0 && v.reserved_by != run) continue;
    if (sticky != reservations_.end() && sticky->second == v.w->id) {
      best = &v;
      break;
    }
    if (!best || free_capable(v) > free_capable(*best) ||
        (free_capable(v) == free_capable(*best) && v.w->running.size() < best->w->running.size()))
      best = &v;
  }
  if (!best) {
    reservations_.erase(run);
    std::string why = "needs " + DescribeDemand(d) + ": " +
                      (any_ever ? "every worker that could hold it is kept for earlier runs"
                                : "no registered worker has that");
    auto& old = wait_reason_[run];
    if (old != why) LogWarn("scheduler: run " + std::to_string(run) + " waits: " + why);
    old = why;
    return;
  }
  wait_reason_.erase(run);
  best->reserved_by = run;
  reservations_[run] = best->w->id;
}

bool Scheduler::AnyFree() const {
  for (const View& v : views_) {
    if (v.exclusive_held || v.reserved_by != 0) continue;
    if (v.gpu ? v.used.size() < v.devices.size() : v.cpu_used < v.w->Capacity()) return true;
  }
  return false;
}

std::optional<Placement> Scheduler::Next() {
  while (AnyFree()) {
    if (fair_.empty()) {
      // Next priority level (index_ keys are -priority: ascending = highest first).
      auto it = level_started_ ? index_.upper_bound(level_) : index_.begin();
      if (it == index_.end()) return std::nullopt;
      level_ = it->first;
      level_started_ = true;
      for (const auto& [exp, classes] : it->second) fair_.insert({held_[exp], exp});
      continue;
    }
    int64_t exp = fair_.begin()->second;
    // The experiment's first run (grid order) among the classes that may still fit.
    int64_t run = 0;
    int cls = -1;
    auto level = index_.find(level_);
    if (level != index_.end()) {
      auto e = level->second.find(exp);
      if (e != level->second.end()) {
        for (const auto& [c, runs] : e->second) {
          if (failed_.count(c)) continue;
          if (cls < 0 || *runs.begin() < run) {
            run = *runs.begin();
            cls = c;
          }
        }
      }
    }
    if (cls < 0) {
      fair_.erase(fair_.begin());
      continue;
    }
    const Demand& d = classes_[cls];
    // Best worker: GPU workers before CPU ones; among GPU workers the tightest fit (fewest
    // devices left free, keeping whole workers for gangs); among CPU workers the emptiest
    // (spreading CPU-bound runs); ties go to the first in this pass's rotated order.
    View* best = nullptr;
    std::vector<int> best_devs;
    std::pair<int, int> best_score;
    for (View& v : views_) {
      auto devs = FitOn(v, d, run);
      if (!devs) continue;
      std::pair<int, int> score =
          v.gpu ? std::make_pair(0, int(v.devices.size() - v.used.size() - devs->size()))
                : std::make_pair(1, -(v.w->Capacity() - v.cpu_used));
      if (!best || score < best_score) {
        best = &v;
        best_devs = *devs;
        best_score = score;
      }
    }
    if (!best) {
      failed_.insert(cls);
      Reserve(run, d);
      continue;
    }
    Placement p{run, exp, best->w, best_devs, d.exclusive};
    Unindex(run);
    if (pins_.erase(run)) {  // a pin holds until the run is placed (or removed)
      info_[run].demand.pin_worker.clear();
      info_[run].demand.pin_devices.clear();
    }
    queued_.erase(run);
    reservations_.erase(run);
    wait_reason_.erase(run);
    if (best->reserved_by == run) best->reserved_by = 0;
    Take(*best, p, +1);
    Bump(exp, Held(p.devices));
    return p;
  }
  return std::nullopt;
}

void Scheduler::Undo(const Placement& p) {
  for (View& v : views_)
    if (v.w == p.worker) Take(v, p, -1);
  Bump(p.experiment, -Held(p.devices));
  // Capacity came back: classes that failed may fit now; re-offer this level's experiments.
  failed_.clear();
  auto level = index_.find(level_);
  if (level_started_ && level != index_.end())
    for (const auto& [exp, classes] : level->second) fair_.insert({held_[exp], exp});
}

}  // namespace headlab::coord
