// Tags and notes that researchers put on experiments and runs (schema/003_annotations.sql):
// writes run on the loop thread inside its batch (through Core's Store), reads on any
// connection. A tag or note never changes a run, its results or its config hash.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "coordinator/db.h"
#include "coordinator/store.h"

namespace headlab::coord {

inline constexpr size_t kMaxTagsPerTarget = 32;
inline constexpr size_t kMaxNoteBytes = 65536;

// Returns true iff `target` is "experiment" or "run".
bool IsAnnotationTarget(const std::string& target);
// Returns true iff `tag` matches [A-Za-z0-9_.:+-]{1,64}.
bool IsTag(const std::string& tag);

// Applies body {add: [tag...], remove: [tag...]} to the target and returns {target, id,
// tags: [...sorted]}. InvalidArgument names the bad field; NotFound for an unknown target.
// Nothing is written unless the whole body is valid. Adds an audit event ("tag").
StatusOr<Json> UpdateTags(Store* store, const std::string& target, int64_t id, const Json& body);

// Sets the note from body {text}; an empty text removes it. Returns {target, id, note}.
StatusOr<Json> SetNote(Store* store, const std::string& target, int64_t id, const Json& body);

// Returns the target's tags, sorted.
std::vector<std::string> TagsOf(Db* db, const std::string& target, int64_t id);
// Returns the target's note ("" when it has none).
std::string NoteOf(Db* db, const std::string& target, int64_t id);
// Returns run id -> tags for every tagged run of `experiment`.
std::map<int64_t, std::vector<std::string>> RunTagsOfExperiment(Db* db, int64_t experiment);
// Returns run id -> note for every run of `experiment` that has one.
std::map<int64_t, std::string> RunNotesOfExperiment(Db* db, int64_t experiment);

}  // namespace headlab::coord
