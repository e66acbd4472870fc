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
#include "coordinator/store.h"

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
  if (arms.size() >= 2) g.comparisons.push_back({"cmp", arms[0], arms[1], "eval.ppl", "ratio"});
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

// The first column of the first row of `sql` on the store's database as an integer (-1:
// no row), e.g. a count(*).
inline int64_t Count(Store& s, const std::string& sql) {
  Stmt q = s.db()->MustPrepare(sql);
  return q.Step() ? q.Int(0) : -1;
}

// The stored status of `run` ("" for an unknown run).
inline std::string RunStatus(Store& s, int64_t run) {
  Stmt q = s.db()->MustPrepare("SELECT status FROM runs WHERE id=?");
  q.Bind(1, run);
  return q.Step() ? q.Text(0) : "";
}

}  // namespace headlab::coord
