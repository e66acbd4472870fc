// Entry point of `headlab data SUBCOMMAND` (prepare, inspect). Torch-free.
#pragma once
namespace headlab {
// argv[0] is "data". Returns the exit code: 0 ok, 1 failed, 2 bad input.
int DataMain(int argc, char** argv);
}  // namespace headlab
