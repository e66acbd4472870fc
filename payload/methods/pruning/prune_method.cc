// The pruning controls (SAF App. C.3.4) in exec's method table (payload/exec/method_spec.h);
// its run-config section is registered in prune_schema.cc.
#include "payload/methods/pruning/prune_method.h"

#include "payload/exec/method_spec.h"

namespace headlab {
namespace {

[[maybe_unused]] const bool kRegistered =
    RegisterMethod({"prune", /*loop_order=*/10, MakePruneHooks, {}});

}  // namespace
}  // namespace headlab
