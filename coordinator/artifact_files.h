// Artifact files through the HTTP API: a run's artifacts (head maps, logprobs, logs,
// checkpoints) are files on the host of the worker that wrote them. The coordinator
// serves one when it can read it (the same host, or a shared filesystem) and its bytes
// still have the SHA-256 recorded with it, so only files a run reported with their
// content hash can ever be read this way; bigger ones are listed, not sent.
#pragma once

#include <cstdint>
#include <string>

#include "common/json.h"
#include "common/status.h"
#include "coordinator/db.h"

namespace headlab::coord {

// Files larger than this are listed with their path and hash but not sent.
inline constexpr int64_t kMaxArtifactDownloadBytes = int64_t(256) << 20;

struct ArtifactFile {
  std::string name;  // the file name, for a download
  std::string kind;
  std::string sha256;
  std::string bytes;  // the content
};

// Returns [{attempt, seq, kind, step, bytes, sha256, path, name, created_at, deleted_at,
// download}] of the run, where `download` is the API path of the file or null when it is
// too big to be sent or deleted (deleted_at: when checkpoint retention removed it, else
// null). NotFound for an unknown run.
StatusOr<Json> ArtifactsView(Db* db, int64_t run);

// Returns the content of artifact (run, attempt, seq). NotFound for an unknown or deleted
// artifact or a file this host cannot read; Unavailable when it is larger than
// kMaxArtifactDownloadBytes; Corruption when its bytes no longer have the recorded SHA-256.
StatusOr<ArtifactFile> ReadArtifactFile(Db* db, int64_t run, int64_t attempt, int64_t seq);

}  // namespace headlab::coord
