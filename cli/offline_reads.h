// Reads without a coordinator: after `headlab down` (or a crash) the database is still on
// disk, and `runs`, `results`, `show`, `query` ... answer from it directly, through the
// coordinator's own HTTP API code on a read-only connection (so the answers are the same).
// Writes need the coordinator and say so.
#pragma once

#include <string>

#include "cli/http_client.h"

namespace headlab {

// Returns a handler that answers GET requests and POST /api/v1/query from the SQLite
// database `db_path` (read-only), and refuses every other request with 503 naming
// `data_dir`. The first request it answers prints one line to stderr saying that the
// coordinator at `url` did not answer and the database is read directly.
LocalHandler OfflineReads(const std::string& db_path, const std::string& data_dir,
                          const std::string& url);

}  // namespace headlab
