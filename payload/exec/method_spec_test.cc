#include "payload/exec/method_spec.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/method_schema.h"
#include "common/run_config.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

std::string SectionOf(const std::string& key) { return key.substr(0, key.find('.')); }

// The index in `keys` of the first (last) key of `section`; -1 when none.
long FirstOf(const std::vector<std::string>& keys, const std::string& section) {
  for (size_t i = 0; i < keys.size(); ++i)
    if (SectionOf(keys[i]) == section) return long(i);
  return -1;
}
long LastOf(const std::vector<std::string>& keys, const std::string& section) {
  for (size_t i = keys.size(); i-- > 0;)
    if (SectionOf(keys[i]) == section) return long(i);
  return -1;
}

}  // namespace

TEST_CASE("methods: one MethodSpec per run-config section, called in the loop's order") {
  std::vector<std::string> specs;
  for (const MethodSpec& m : Methods()) {
    specs.push_back(m.name);
    CHECK(m.make_hooks != nullptr);
  }
  // Pruning first: it changes which heads exist before any method looks at them.
  CHECK(specs == std::vector<std::string>{"prune", "saf", "aoh", "aah"});
  std::vector<std::string> sections;
  for (const MethodSchema& s : MethodSchemas()) {
    sections.push_back(s.section);
    CHECK(!s.keys.empty());
    for (const ConfigKey& k : s.keys) CHECK(SectionOf(k.key) == s.section);
  }
  std::sort(specs.begin(), specs.end());
  CHECK(sections == specs);
}

TEST_CASE("methods: each section's keys follow its anchor's in the schema, contiguous") {
  const std::vector<std::string>& keys = RunConfigKeys();
  for (const MethodSchema& s : MethodSchemas()) {
    INFO(s.section);
    long first = FirstOf(keys, s.section);
    REQUIRE(first >= 0);
    CHECK(first == LastOf(keys, s.after) + 1);
    CHECK(LastOf(keys, s.section) == first + long(s.keys.size()) - 1);
  }
  // The documentation and export order: prune after noop, then mqar and passkey, then aoh,
  // saf, aah, then resources.
  CHECK(FirstOf(keys, "prune") == LastOf(keys, "noop") + 1);
  CHECK(FirstOf(keys, "mqar") == LastOf(keys, "prune") + 1);
  CHECK(FirstOf(keys, "aoh") == LastOf(keys, "passkey") + 1);
  CHECK(FirstOf(keys, "saf") == LastOf(keys, "aoh") + 1);
  CHECK(FirstOf(keys, "aah") == LastOf(keys, "saf") + 1);
  CHECK(FirstOf(keys, "resources") == LastOf(keys, "aah") + 1);
}

TEST_CASE("methods: the run-kind table holds the kinds of each MethodSpec") {
  size_t method_kinds = 0;
  for (const MethodSpec& m : Methods())
    for (const RunKind& k : m.run_kinds) {
      ++method_kinds;
      const RunKind* found = FindRunKind(k.name);
      REQUIRE(found != nullptr);
      CHECK(found->run == k.run);
    }
  CHECK(method_kinds == 2);  // AoH's bench-prefill and bench-decode
}

}  // namespace headlab
