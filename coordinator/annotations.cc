// Tags and notes: validation, writes through the Store's connection, reads.
#include "coordinator/annotations.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace headlab::coord {
namespace {

Status Bad(const std::string& what) { return Status::InvalidArgument("request body: " + what); }

Status CheckTarget(Db* db, const std::string& target, int64_t id) {
  if (!IsAnnotationTarget(target))
    return Status::InvalidArgument("expected \"experiment\" or \"run\", got \"" + target + "\"");
  Stmt s = db->MustPrepare(target == "run" ? "SELECT 1 FROM runs WHERE id=?"
                                           : "SELECT 1 FROM experiments WHERE id=?");
  s.Bind(1, id);
  if (!s.Step()) return Status::NotFound(target + " " + std::to_string(id) + " not found");
  return Status::Ok();
}

// Reads body[key] as a list of tags (absent = empty).
StatusOr<std::vector<std::string>> TagList(const Json& body, const char* key) {
  std::vector<std::string> out;
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return out;
  if (!it->is_array()) return Bad(std::string(key) + ": expected a list of tags");
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& t = (*it)[i];
    if (!t.is_string() || !IsTag(t.get<std::string>()))
      return Bad(std::string(key) + "[" + std::to_string(i) +
                 "]: expected a tag matching "
                 "[A-Za-z0-9_.:+-]{1,64}, got " +
                 t.dump().substr(0, 80));
    out.push_back(t.get<std::string>());
  }
  return out;
}

int64_t ExperimentOf(Db* db, const std::string& target, int64_t id) {
  if (target == "experiment") return id;
  Stmt s = db->MustPrepare("SELECT experiment_id FROM runs WHERE id=?");
  s.Bind(1, id);
  return s.Step() ? s.Int(0) : 0;
}

}  // namespace

bool IsAnnotationTarget(const std::string& target) {
  return target == "experiment" || target == "run";
}

bool IsTag(const std::string& tag) {
  if (tag.empty() || tag.size() > 64) return false;
  for (char c : tag)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == ':' ||
          c == '+' || c == '-'))
      return false;
  return true;
}

StatusOr<Json> UpdateTags(Store* store, const std::string& target, int64_t id, const Json& body) {
  Db* db = store->db();
  HEADLAB_RETURN_IF_ERROR(CheckTarget(db, target, id));
  if (!body.is_object()) return Bad("expected {\"add\": [tags], \"remove\": [tags]}");
  for (auto& [k, v] : body.items())
    if (k != "add" && k != "remove") return Bad(k + ": unknown key (known: add, remove)");
  auto add = TagList(body, "add");
  if (!add.ok()) return add.status();
  auto remove = TagList(body, "remove");
  if (!remove.ok()) return remove.status();
  std::vector<std::string> now = TagsOf(db, target, id);
  std::set<std::string> result(now.begin(), now.end());
  for (const auto& t : *remove) result.erase(t);
  for (const auto& t : *add) result.insert(t);
  if (result.size() > kMaxTagsPerTarget)
    return Bad("a " + target + " has at most " + std::to_string(kMaxTagsPerTarget) + " tags");
  Stmt del = db->MustPrepare("DELETE FROM tags WHERE target=? AND target_id=? AND tag=?");
  for (const auto& t : *remove) {
    del.Reset();
    del.Bind(1, target).Bind(2, id).Bind(3, t);
    HEADLAB_RETURN_IF_ERROR(del.Exec());
  }
  Stmt ins = db->MustPrepare(
      "INSERT OR IGNORE INTO tags(target, target_id, tag, created_at) VALUES (?,?,?,?)");
  const std::string at = NowIso();
  for (const auto& t : *add) {
    ins.Reset();
    ins.Bind(1, target).Bind(2, id).Bind(3, t).Bind(4, at);
    HEADLAB_RETURN_IF_ERROR(ins.Exec());
  }
  HEADLAB_RETURN_IF_ERROR(
      store->AddEvent("tag", ExperimentOf(db, target, id), target == "run" ? id : 0, 0, "",
                      Json{{"target", target}, {"add", *add}, {"remove", *remove}}));
  return Json{{"target", target}, {"id", id}, {"tags", TagsOf(db, target, id)}};
}

StatusOr<Json> SetNote(Store* store, const std::string& target, int64_t id, const Json& body) {
  Db* db = store->db();
  HEADLAB_RETURN_IF_ERROR(CheckTarget(db, target, id));
  if (!body.is_object() || !body.contains("text") || !body["text"].is_string())
    return Bad("expected {\"text\": \"...\"} (\"\" removes the note)");
  const std::string text = body["text"];
  if (text.size() > kMaxNoteBytes)
    return Bad("text: a note has at most " + std::to_string(kMaxNoteBytes) + " bytes, got " +
               std::to_string(text.size()));
  if (text.empty()) {
    Stmt del = db->MustPrepare("DELETE FROM notes WHERE target=? AND target_id=?");
    del.Bind(1, target).Bind(2, id);
    HEADLAB_RETURN_IF_ERROR(del.Exec());
  } else {
    Stmt up = db->MustPrepare(
        "INSERT INTO notes(target, target_id, text, updated_at) VALUES (?,?,?,?) "
        "ON CONFLICT(target, target_id) DO UPDATE SET text=excluded.text, "
        "updated_at=excluded.updated_at");
    up.Bind(1, target).Bind(2, id).Bind(3, text).Bind(4, NowIso());
    HEADLAB_RETURN_IF_ERROR(up.Exec());
  }
  HEADLAB_RETURN_IF_ERROR(store->AddEvent("note", ExperimentOf(db, target, id),
                                          target == "run" ? id : 0, 0, "",
                                          Json{{"target", target}, {"bytes", text.size()}}));
  return Json{{"target", target}, {"id", id}, {"note", text}};
}

std::vector<std::string> TagsOf(Db* db, const std::string& target, int64_t id) {
  Stmt s = db->MustPrepare("SELECT tag FROM tags WHERE target=? AND target_id=? ORDER BY tag");
  s.Bind(1, target).Bind(2, id);
  std::vector<std::string> out;
  while (s.Step()) out.push_back(s.Text(0));
  return out;
}

std::string NoteOf(Db* db, const std::string& target, int64_t id) {
  Stmt s = db->MustPrepare("SELECT text FROM notes WHERE target=? AND target_id=?");
  s.Bind(1, target).Bind(2, id);
  return s.Step() ? s.Text(0) : "";
}

std::map<int64_t, std::vector<std::string>> RunTagsOfExperiment(Db* db, int64_t experiment) {
  Stmt s = db->MustPrepare(
      "SELECT t.target_id, t.tag FROM tags t JOIN runs r ON r.id = t.target_id "
      "WHERE t.target = 'run' AND r.experiment_id = ? ORDER BY t.target_id, t.tag");
  s.Bind(1, experiment);
  std::map<int64_t, std::vector<std::string>> out;
  while (s.Step()) out[s.Int(0)].push_back(s.Text(1));
  return out;
}

std::map<int64_t, std::string> RunNotesOfExperiment(Db* db, int64_t experiment) {
  Stmt s = db->MustPrepare(
      "SELECT n.target_id, n.text FROM notes n JOIN runs r ON r.id = n.target_id "
      "WHERE n.target = 'run' AND r.experiment_id = ?");
  s.Bind(1, experiment);
  std::map<int64_t, std::string> out;
  while (s.Step()) out[s.Int(0)] = s.Text(1);
  return out;
}

}  // namespace headlab::coord
