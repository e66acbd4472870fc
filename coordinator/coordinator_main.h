// Entry point of `headlab coordinator`.
#pragma once
namespace headlab {
// argv[0] is "coordinator". Returns the process exit code (0 after a graceful SIGTERM).
int CoordinatorMain(int argc, char** argv);
}  // namespace headlab
