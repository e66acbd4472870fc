// libheadlab_exec.so: the run payload (LibTorch) behind `headlab exec`, loaded by main.cc
// only when a worker spawns an attempt.
#include "worker/exec/exec_main.h"

extern "C" int headlab_exec_main(int argc, char** argv) { return headlab::ExecMain(argc, argv); }
