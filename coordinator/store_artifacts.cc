// Store's writes and reads of artifacts: inserts, deletions, and the checkpoints ASSIGN
// offers and ACCEPT reports resuming from.
#include "coordinator/store.h"

namespace headlab::coord {

void Store::PrepareArtifacts() {
  artifact_sql_.insert = db_.MustPrepare(
      "INSERT OR IGNORE INTO artifacts(run_id, attempt, seq, kind, path, sha256, bytes, step, "
      "created_at) VALUES (?,?,?,?,?,?,?,?,?)");
  artifact_sql_.latest_checkpoints = db_.MustPrepare(
      "SELECT path, sha256, step FROM artifacts WHERE run_id=? AND kind='checkpoint' "
      "AND deleted_at IS NULL ORDER BY step DESC, attempt DESC, seq DESC LIMIT ?");
  artifact_sql_.is_checkpoint = db_.MustPrepare(
      "SELECT 1 FROM artifacts WHERE run_id=? AND kind='checkpoint' AND path=? AND sha256=? "
      "AND step=? LIMIT 1");
}

Status Store::InsertArtifact(const AttemptRef& ref, int64_t seq, const std::string& kind,
                             const std::string& path, const std::string& sha256, int64_t bytes,
                             int64_t step) {
  Stmt& s = artifact_sql_.insert;
  s.Bind(1, ref.run)
      .Bind(2, ref.attempt)
      .Bind(3, seq)
      .Bind(4, kind)
      .Bind(5, path)
      .Bind(6, sha256)
      .Bind(7, bytes)
      .Bind(8, step)
      .Bind(9, NowIso());
  return s.Exec();
}

Status Store::MarkArtifactDeleted(const AttemptRef& ref, int64_t seq, const std::string& path) {
  Stmt s = db_.MustPrepare(
      "UPDATE artifacts SET deleted_at=? WHERE run_id=? AND attempt=? AND seq=? AND path=? "
      "AND deleted_at IS NULL");
  s.Bind(1, NowIso()).Bind(2, ref.run).Bind(3, ref.attempt).Bind(4, seq).Bind(5, path);
  return s.Exec();
}

Json Store::Checkpoints(int64_t run, int limit) {
  Stmt& s = artifact_sql_.latest_checkpoints;
  s.Bind(1, run).Bind(2, limit);
  Json out = Json::array();
  while (s.Step()) out.push_back({{"path", s.Text(0)}, {"sha256", s.Text(1)}, {"step", s.Int(2)}});
  s.Reset();
  return out;
}

bool Store::IsCheckpoint(int64_t run, const Json& checkpoint) {
  Stmt& s = artifact_sql_.is_checkpoint;
  s.Bind(1, run)
      .Bind(2, checkpoint.value("path", ""))
      .Bind(3, checkpoint.value("sha256", ""))
      .Bind(4, checkpoint.value("step", int64_t(-1)));
  bool known = s.Step();
  s.Reset();
  return known;
}

}  // namespace headlab::coord
