// The method registry: one factory per method, called in loop order.
#include "payload/exec/method_hooks.h"

namespace headlab {

StatusOr<HookList> MakeMethodHooks(const ExecConfig& config, const Json& config_json,
                                   const std::string& file) {
  using Factory = StatusOr<std::shared_ptr<TrainHooks>> (*)(const ExecConfig&, const Json&,
                                                            const std::string&);
  // Pruning first: it changes which heads exist before any method looks at them.
  const Factory kFactories[] = {MakePruneHooks, MakeSafHooks, MakeAohHooks, MakeAahHooks};
  HookList hooks;
  for (Factory make : kFactories) {
    StatusOr<std::shared_ptr<TrainHooks>> h = make(config, config_json, file);
    if (!h.ok()) return h.status();
    if (h.value()) hooks.push_back(h.value());
  }
  return hooks;
}

}  // namespace headlab
