// The pruning controls' training-loop hooks (worker/exec/train_hooks.h). Heads named in
// model.head_modes as "pruned" are masked by the hybrid layer itself; no hooks yet.
#include "worker/exec/method_hooks.h"

namespace headlab {

StatusOr<std::shared_ptr<TrainHooks>> MakePruneHooks(const ExecConfig&, const Json&,
                                                     const std::string&) {
  return std::shared_ptr<TrainHooks>();
}

}  // namespace headlab
