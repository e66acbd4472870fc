// Entry point of `headlab worker`.
#pragma once
namespace headlab {
// argv[0] is "worker". Returns the process exit code.
int WorkerMain(int argc, char** argv);
}  // namespace headlab
