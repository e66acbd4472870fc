// libheadlab_exec.so: the run payload (LibTorch) behind `headlab exec`, loaded by main.cc
// only when a worker spawns an attempt.
#include <cstdio>
#include <exception>

#include "payload/exec/exec_main.h"

extern "C" int headlab_exec_main(int argc, char** argv) {
  // An exception that escapes a run kind (a LibTorch error, a collective that timed out)
  // fails the attempt with its message instead of aborting with a core dump.
  try {
    return headlab::ExecMain(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "exec error: %s\n", e.what());
    return 1;
  }
}
