// AAH (adaptive attention hierarchy) in exec's method table (payload/exec/method_spec.h); its
// run-config section is registered in aah_schema.cc.
#include "payload/methods/aah/aah_method.h"

#include "payload/exec/method_spec.h"

namespace headlab {
namespace {

[[maybe_unused]] const bool kRegistered =
    RegisterMethod({"aah", /*loop_order=*/40, MakeAahHooks, {}});

}  // namespace
}  // namespace headlab
