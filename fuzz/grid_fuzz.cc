// libFuzzer target: grid files (common/grid.h ExpandGrid), as `headlab submit` and the
// coordinator read them. The input is the file; a line "--set KEY=V" at its very start is
// taken as a --set argument, so the fuzzer reaches the override path too.
// Invariants: no crash or uncaught exception; a refusal is InvalidArgument with a valid
// UTF-8 message that names the file; an accepted grid has 1..100,000 runs, each with the
// config hash of its canonical config, numbered in order.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/grid.h"
#include "common/sha256.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headlab;
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> sets;
  if (text.rfind("--set ", 0) == 0) {
    size_t eol = text.find('\n');
    sets.push_back(text.substr(6, eol == std::string::npos ? std::string::npos : eol - 6));
    text = eol == std::string::npos ? "" : text.substr(eol + 1);
  }
  auto grid = ExpandGrid(text, "fuzz.jsonc", sets);
  if (!grid.ok()) {
    fuzz::Check(grid.status().code() == Status::Code::kInvalidArgument,
                "a refusal is not bad input");
    fuzz::CheckMessage(grid.status().message());
    fuzz::Check(grid.status().message().rfind("fuzz.jsonc: ", 0) == 0,
                "a refusal does not name the file");
    (void)Json({{"error", grid.status().message()}}).dump();
    return 0;
  }
  fuzz::Check(!grid->runs.empty() && grid->runs.size() <= 100000, "run count out of range");
  for (size_t i = 0; i < grid->runs.size(); ++i) {
    const ExpandedRun& r = grid->runs[i];
    fuzz::Check(r.index == int(i), "runs out of order");
    fuzz::Check(r.config_hash == Sha256Hex(CanonicalJson(r.config)), "config hash mismatch");
  }
  (void)CanonicalJson(grid->source);
  return 0;
}
