// "Did you mean": the known name closest to a mistyped one, for error messages of the CLI
// (commands, options), grids (config keys, metrics) and names of experiments.
#pragma once

#include <string>
#include <vector>

namespace headlab {

// Returns the Damerau-Levenshtein (optimal string alignment) distance of `a` and `b`:
// insertions, deletions, substitutions and adjacent transpositions each cost 1.
size_t EditDistance(const std::string& a, const std::string& b);

// Returns the candidate closest to `word` when it is close enough to be a likely typo
// (distance at most max(1, |word| / 3), or `word` is a prefix of it or it of `word`
// with at least 3 characters in common), else "". Ties go to the earlier candidate.
std::string ClosestName(const std::string& word, const std::vector<std::string>& candidates);

// Returns the allowed value that `word` most likely meant: the one it is a common other
// name of ("gpu" for "cuda", where "cpu" is one letter away and the opposite), else
// ClosestName's.
std::string ClosestValue(const std::string& word, const std::vector<std::string>& allowed);

// Returns " (did you mean \"X\"?)" for ClosestName's X, or "" when there is none.
std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace headlab
