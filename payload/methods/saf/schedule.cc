// SAF replacement schedules: one-time, gradual, validation-budget and train-loss controllers.
#include "payload/methods/saf/schedule.h"

#include <algorithm>
#include <cmath>

namespace headlab::saf {
namespace {

struct MeanVar {
  double mean = 0, var = 0;  // sample variance (n - 1)
};
MeanVar Moments(std::deque<double>::const_iterator begin, std::deque<double>::const_iterator end) {
  MeanVar m;
  double n = double(end - begin);
  if (n <= 0) return m;
  for (auto it = begin; it != end; ++it) m.mean += *it;
  m.mean /= n;
  for (auto it = begin; it != end; ++it) m.var += (*it - m.mean) * (*it - m.mean);
  m.var = n > 1 ? m.var / (n - 1) : 0;
  return m;
}

}  // namespace

int64_t OneTimeStep(double tau, int64_t total_steps) {
  return std::clamp<int64_t>(std::llround(tau * double(total_steps)), 0, total_steps);
}

std::vector<int64_t> GradualSteps(double tau_start, double tau_end, int64_t groups,
                                  int64_t total_steps) {
  std::vector<int64_t> steps;
  for (int64_t g = 0; g < groups; ++g) {
    double tau = groups == 1 ? tau_start
                             : tau_start + (tau_end - tau_start) * double(g) / double(groups - 1);
    steps.push_back(OneTimeStep(tau, total_steps));
  }
  return steps;
}

std::vector<std::vector<HeadId>> SplitIntoGroups(const std::vector<HeadId>& heads, int64_t groups) {
  std::vector<std::vector<HeadId>> out;
  const int64_t n = int64_t(heads.size());
  groups = std::max<int64_t>(1, groups);
  size_t next = 0;
  for (int64_t g = 0; g < groups; ++g) {
    int64_t size = n / groups + (g < n % groups ? 1 : 0);
    if (size == 0) continue;
    out.emplace_back(heads.begin() + int64_t(next), heads.begin() + int64_t(next) + size);
    next += size_t(size);
  }
  return out;
}

ValidationBudgetController::ValidationBudgetController(const ControllerOptions& options,
                                                       double budget, int64_t check_every)
    : options_(options), budget_(budget), check_every_(std::max<int64_t>(1, check_every)) {}

bool ValidationBudgetController::ShouldPropose(int64_t step) const {
  return !stopped_ && installed_ < options_.max_heads && step >= options_.first_step &&
         step <= options_.last_step && (step - options_.first_step) % check_every_ == 0;
}

int64_t ValidationBudgetController::NextGroupSize() const {
  return std::max<int64_t>(0, std::min(options_.group_heads, options_.max_heads - installed_));
}

bool ValidationBudgetController::Report(double loss_before, double loss_after, int64_t size) {
  const double cost = std::exp(loss_after - loss_before) - 1;  // paired relative PPL change
  if (spent_ + cost > budget_) {
    stopped_ = true;
    return false;
  }
  spent_ += cost;
  installed_ += size;
  if (installed_ >= options_.max_heads) stopped_ = true;
  return true;
}

TrainLossController::TrainLossController(const ControllerOptions& options, double z, int64_t window,
                                         int64_t max_wait)
    : options_(options), z_(z), window_(std::max<int64_t>(2, window)), max_wait_(max_wait) {}

int64_t TrainLossController::NextGroupSize() const {
  return std::max<int64_t>(0, std::min(options_.group_heads, options_.max_heads - installed_));
}

void TrainLossController::Installed(int64_t size) {
  installed_ += size;
  last_size_ = size;
}

TrainLossController::Action TrainLossController::Observe(int64_t step, double loss) {
  if (stopped_) return Action::kNone;
  losses_.push_back(loss);
  while (int64_t(losses_.size()) > 2 * window_) losses_.pop_front();
  const int64_t W = window_, n = int64_t(losses_.size());

  if (waiting_) {
    if (n >= W) {  // recovery: the last W losses after the event against the W before it
      MeanVar last = Moments(losses_.end() - W, losses_.end());
      double se = std::sqrt((baseline_var_ + last.var) / double(W));
      if (last.mean <= baseline_mean_ + z_ * se) {
        waiting_ = false;
        losses_.clear();  // the next plateau test starts from the recovered state
        if (installed_ >= options_.max_heads) stopped_ = true;
        return Action::kNone;
      }
    }
    if (step - event_step_ >= max_wait_) {  // never recovered: undo the increment
      waiting_ = false;
      stopped_ = true;
      installed_ -= last_size_;
      return Action::kUndo;
    }
    return Action::kNone;
  }

  if (step < options_.first_step || step > options_.last_step) return Action::kNone;
  if (installed_ >= options_.max_heads) return Action::kNone;
  if (n < 2 * W) return Action::kNone;  // power: the full window is needed
  MeanVar prev = Moments(losses_.begin(), losses_.begin() + W);
  MeanVar last = Moments(losses_.end() - W, losses_.end());
  double se = std::sqrt((prev.var + last.var) / double(W));
  if (prev.mean - last.mean >= z_ * se) return Action::kNone;  // still improving
  // Plateau: propose; the last W losses are the baseline the recovery test compares with.
  waiting_ = true;
  event_step_ = step;
  baseline_mean_ = last.mean;
  baseline_var_ = last.var;
  losses_.clear();
  return Action::kPropose;
}

Json ValidationBudgetController::SaveState() const {
  return {{"spent", spent_}, {"installed", installed_}, {"stopped", stopped_}};
}

Status ValidationBudgetController::LoadState(const Json& j) {
  try {
    spent_ = j.at("spent").get<double>();
    installed_ = j.at("installed").get<int64_t>();
    stopped_ = j.at("stopped").get<bool>();
  } catch (const Json::exception& e) {
    return Status::Corruption(std::string("validation-budget controller state: ") + e.what());
  }
  return Status::Ok();
}

Json TrainLossController::SaveState() const {
  return {{"losses", std::vector<double>(losses_.begin(), losses_.end())},
          {"waiting", waiting_},
          {"event_step", event_step_},
          {"baseline_mean", baseline_mean_},
          {"baseline_var", baseline_var_},
          {"installed", installed_},
          {"last_size", last_size_},
          {"stopped", stopped_}};
}

Status TrainLossController::LoadState(const Json& j) {
  try {
    std::vector<double> losses = j.at("losses").get<std::vector<double>>();
    losses_.assign(losses.begin(), losses.end());
    waiting_ = j.at("waiting").get<bool>();
    event_step_ = j.at("event_step").get<int64_t>();
    baseline_mean_ = j.at("baseline_mean").get<double>();
    baseline_var_ = j.at("baseline_var").get<double>();
    installed_ = j.at("installed").get<int64_t>();
    last_size_ = j.at("last_size").get<int64_t>();
    stopped_ = j.at("stopped").get<bool>();
  } catch (const Json::exception& e) {
    return Status::Corruption(std::string("train-loss controller state: ") + e.what());
  }
  return Status::Ok();
}

}  // namespace headlab::saf
