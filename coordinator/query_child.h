// User SQL where it can be stopped (POST /api/v1/query). RunReadOnlyQuery's time limit is
// checked by SQLite between VM steps, never inside one function call, and one row can
// hold many calls: a statement of 100 GLOB calls over 256 KiB strings runs for minutes
// inside a single sqlite3_step. So each query runs in a child process (`headlab
// query-child`) on its own read-only connection, and the coordinator kills it (SIGKILL)
// at its time limit plus kQueryKillGrace, or as soon as the client that asked for it
// leaves. The child runs at a lower priority (kQueryChildNice: the coordinator's own
// threads, those answering health and workers among them, come first) and with its
// address space bounded (kQueryChildMaxMemory). A killed query's read transaction ends
// with it, so no query can keep a WAL checkpoint waiting longer than its limit.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "common/status.h"
#include "coordinator/query.h"

namespace headlab::coord {

// How long past its time limit a query may run before it is killed: the child's own
// progress handler usually stops it first, with the same message.
constexpr std::chrono::milliseconds kQueryKillGrace{1000};
// The child's nice value and address-space limit (RLIMIT_AS).
constexpr int kQueryChildNice = 10;  // http_policy.h kPoolNice
constexpr size_t kQueryChildMaxMemory = size_t(1) << 30;

// Runs RunReadOnlyQuery(db_path, sql, limits) in `binary query-child` (binary: the
// headlab executable) and returns the answer's JSON text. Errors are RunReadOnlyQuery's
// (a query killed at its deadline: InvalidArgument "query exceeded the N ms limit"),
// Cancelled when `*client_gone` (may be null) becomes true first, Internal when the child
// fails otherwise (it cannot start, crashes, or answers more than the byte cap allows).
StatusOr<std::string> RunQueryInChild(const std::string& binary, const std::string& db_path,
                                      const std::string& sql, const QueryLimits& limits,
                                      const std::atomic<bool>* client_gone);

// `headlab query-child`: reads one request from stdin (the JSON object RunQueryInChild
// writes), runs it and writes the answer to stdout. Returns the exit code.
int QueryChildMain(int argc, char** argv);

}  // namespace headlab::coord
