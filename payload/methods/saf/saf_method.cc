// SAF (fixed-pattern heads) in exec's method table (payload/exec/method_spec.h); its run-
// config section is registered in saf_schema.cc.
#include "payload/methods/saf/saf_method.h"

#include "payload/exec/method_spec.h"

namespace headlab {
namespace {

[[maybe_unused]] const bool kRegistered =
    RegisterMethod({"saf", /*loop_order=*/20, MakeSafHooks, {}});

}  // namespace
}  // namespace headlab
