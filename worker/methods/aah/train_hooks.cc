// The AAH-v3 method's training-loop hooks (worker/exec/train_hooks.h).
#include "worker/exec/method_hooks.h"

namespace headlab {

StatusOr<std::shared_ptr<TrainHooks>> MakeAahHooks(const ExecConfig& config, const Json& c,
                                                  const std::string& file) {
  const std::string value = c["aah"]["regime"].get<std::string>();
  if (value == "off") return std::shared_ptr<TrainHooks>();
  // The library is built and tested, but its hooks are not written yet: fail rather than
  // silently train plain attention under the method's name.
  return Status::Unavailable(file + ": $.config.aah.regime = \"" + value +
                             "\": this method is not wired into the training loop yet "
                             "(issue 6); refusing to train without it");
}

}  // namespace headlab
