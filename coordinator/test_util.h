// Test helpers shared by the coordinator's unit tests (not linked into the daemon).
#pragma once

#include <string>

#include "common/testing/temp_dir.h"

namespace headlab::coord {

// A fresh directory under /tmp, removed with its contents on destruction.
using TempDir = testing::TempDir;

}  // namespace headlab::coord

#include "common/grid.h"
#include "common/sha256.h"

namespace headlab::coord {

// A small expanded grid without going through ExpandGrid: `per_arm` runs in each arm,
// seeds 1..per_arm, paired by seed; config {"kind":"noop","seed":s,"arm":name,"tag":tag}.
inline Grid TestGrid(const std::vector<std::string>& arms, int per_arm,
                     const std::string& tag = "t", int max_attempts = 3) {
  Grid g;
  g.file = "test.jsonc";
  g.name = "test";
  g.source = {{"name", "test"}, {"tag", tag}};
  g.arms = arms;
  g.pair_by = {"seed"};
  g.max_attempts = max_attempts;
  if (arms.size() >= 2)
    g.comparisons.push_back({"cmp", arms[0], arms[1], "eval.ppl", "ratio"});
  int index = 0;
  for (const std::string& arm : arms) {
    for (int s = 1; s <= per_arm; ++s) {
      ExpandedRun r;
      r.index = index++;
      r.arm = arm;
      r.config = {{"kind", "noop"}, {"seed", s}, {"arm", arm}, {"tag", tag}};
      r.config_hash = Sha256Hex(CanonicalJson(r.config));
      r.pair_key = CanonicalJson(Json::array({s}));
      g.runs.push_back(r);
    }
  }
  return g;
}

}  // namespace headlab::coord
