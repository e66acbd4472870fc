// Entry point of `headlab bench WHAT`.
#pragma once
namespace headlab {
// argv[0] is "bench"; argv[1] names the benchmark ("coordinator").
int BenchMain(int argc, char** argv);
}  // namespace headlab
