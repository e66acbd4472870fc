// Entry point (being written in this session; see the issue note).
#include "worker/exec/exec_main.h"

#include <cstdio>

namespace headlab {
int ExecMain(int, char**) {
  std::fprintf(stderr, "headlab: this command is not built yet\n");
  return 1;
}
}  // namespace headlab
