#include "common/suggest.h"

#include <catch2/catch.hpp>

namespace headlab {

TEST_CASE("EditDistance counts edits and adjacent transpositions") {
  CHECK(EditDistance("", "") == 0);
  CHECK(EditDistance("abc", "") == 3);
  CHECK(EditDistance("heds", "heads") == 1);
  CHECK(EditDistance("reslts", "results") == 1);
  CHECK(EditDistance("resutls", "results") == 1);  // transposition
  CHECK(EditDistance("kitten", "sitting") == 3);
}

TEST_CASE("ClosestName suggests likely typos only") {
  const std::vector<std::string> commands = {"submit", "status", "runs", "show", "results", "logs"};
  CHECK(ClosestName("reslts", commands) == "results");
  CHECK(ClosestName("sumbit", commands) == "submit");
  CHECK(ClosestName("result", commands) == "results");
  CHECK(ClosestName("log", commands) == "logs");
  CHECK(ClosestName("frobnicate", commands).empty());
  const std::vector<std::string> keys = {"train.lr", "train.steps", "model.heads"};
  CHECK(ClosestName("train.lrr", keys) == "train.lr");
  CHECK(ClosestName("model.heds", keys) == "model.heads");
  CHECK(ClosestName("x", keys).empty());
  CHECK(DidYouMean("train.stesp", keys) == " (did you mean \"train.steps\"?)");
  CHECK(DidYouMean("zzz", keys).empty());
}

}  // namespace headlab
