// Entry point (being written in this session; see the issue note).
#include "worker/worker_main.h"

#include <cstdio>

namespace headlab {
int WorkerMain(int, char**) {
  std::fprintf(stderr, "headlab: this command is not built yet\n");
  return 1;
}
}  // namespace headlab
