// Entry point of `headlab exec MANIFEST`: one attempt of one run (schema/exec.md).
#pragma once
namespace headlab {
// argv[0] is "exec". Returns 0 when the run succeeded, 1 when it failed, 2 on bad input.
int ExecMain(int argc, char** argv);
}  // namespace headlab
