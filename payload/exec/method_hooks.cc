// The methods' hooks of a run, from the method table (method_spec.h), in loop order.
#include "payload/exec/method_hooks.h"

#include "payload/exec/method_spec.h"

namespace headlab {

StatusOr<HookList> MakeMethodHooks(const ExecConfig& config, const Json& config_json,
                                   const std::string& file) {
  HookList hooks;
  for (const MethodSpec& m : Methods()) {
    if (!m.make_hooks) continue;
    StatusOr<std::shared_ptr<TrainHooks>> h = m.make_hooks(config, config_json, file);
    if (!h.ok()) return h.status();
    if (h.value()) hooks.push_back(h.value());
  }
  return hooks;
}

}  // namespace headlab
