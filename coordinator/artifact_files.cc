// Artifact listing and hash-checked reads.
#include "coordinator/artifact_files.h"

#include <sys/stat.h>

#include "common/files.h"
#include "common/sha256.h"

namespace headlab::coord {
namespace {

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

StatusOr<Json> ArtifactsView(Db* db, int64_t run) {
  Stmt r = db->MustPrepare("SELECT 1 FROM runs WHERE id=?");
  r.Bind(1, run);
  if (!r.Step()) return Status::NotFound("run " + std::to_string(run) + " not found");
  Stmt s = db->MustPrepare(
      "SELECT attempt, seq, kind, step, bytes, sha256, path, created_at, deleted_at FROM artifacts "
      "WHERE run_id=? ORDER BY attempt, seq");
  s.Bind(1, run);
  Json out = Json::array();
  while (s.Step()) {
    const int64_t bytes = s.Int(4);
    const bool deleted = !s.IsNull(8);
    Json a = {{"attempt", s.Int(0)},     {"seq", s.Int(1)},
              {"kind", s.Text(2)},       {"step", s.Int(3)},
              {"bytes", bytes},          {"sha256", s.Text(5)},
              {"path", s.Text(6)},       {"name", BaseName(s.Text(6))},
              {"created_at", s.Text(7)}, {"deleted_at", deleted ? Json(s.Text(8)) : Json(nullptr)}};
    a["download"] = !deleted && bytes <= kMaxArtifactDownloadBytes
                        ? Json("/api/v1/runs/" + std::to_string(run) + "/artifacts/" +
                               std::to_string(s.Int(0)) + "/" + std::to_string(s.Int(1)))
                        : Json(nullptr);
    out.push_back(std::move(a));
  }
  return out;
}

StatusOr<ArtifactFile> ReadArtifactFile(Db* db, int64_t run, int64_t attempt, int64_t seq) {
  Stmt s = db->MustPrepare(
      "SELECT kind, path, sha256, bytes, deleted_at FROM artifacts WHERE run_id=? AND attempt=? "
      "AND seq=?");
  s.Bind(1, run).Bind(2, attempt).Bind(3, seq);
  const std::string what = "artifact " + std::to_string(seq) + " of run " + std::to_string(run) +
                           " attempt " + std::to_string(attempt);
  if (!s.Step()) return Status::NotFound(what + " not found");
  if (!s.IsNull(4))
    return Status::NotFound(what + ": " + s.Text(1) + " was deleted at " + s.Text(4) +
                            " (checkpoint retention, train.keep_checkpoints)");
  ArtifactFile f;
  f.kind = s.Text(0);
  const std::string path = s.Text(1);
  f.sha256 = s.Text(2);
  f.name = BaseName(path);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return Status::NotFound(what + ": " + path +
                            " is not readable on the coordinator's host "
                            "(it stays on the worker that wrote it)");
  if (int64_t(st.st_size) > kMaxArtifactDownloadBytes)
    return Status::Unavailable(what + ": " + std::to_string(st.st_size) + " bytes, more than the " +
                               std::to_string(kMaxArtifactDownloadBytes >> 20) +
                               " MiB the API sends; the file is " + path + " (SHA-256 " + f.sha256 +
                               ")");
  auto data = ReadFile(path);
  if (!data.ok()) return Status::NotFound(what + ": " + data.status().message());
  if (Sha256Hex(*data) != f.sha256)
    return Status::Corruption(what + ": " + path + " no longer has the recorded SHA-256 " +
                              f.sha256);
  f.bytes = std::move(*data);
  return f;
}

}  // namespace headlab::coord
