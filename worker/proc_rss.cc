// Summing rss over /proc/PID/stat of one process group.
#include "worker/proc_rss.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

namespace headlab {
namespace {

// /proc/PID/stat: "pid (comm) state ppid pgrp ... rss ..."; comm may hold spaces and
// parentheses, so fields are counted from the last ')'. After it, field 3 (state) is
// the first; pgrp is field 5 and rss field 24 (proc(5)).
bool ParseStat(const std::string& line, long long* pgrp, long long* rss_pages) {
  size_t close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream in(line.substr(close + 1));
  std::vector<std::string> f;
  std::string tok;
  while (in >> tok && f.size() < 22) f.push_back(tok);
  if (f.size() < 22) return false;
  char* end = nullptr;
  *pgrp = std::strtoll(f[2].c_str(), &end, 10);  // field 5
  if (*end) return false;
  *rss_pages = std::strtoll(f[21].c_str(), &end, 10);  // field 24
  return !*end;
}

}  // namespace

StatusOr<uint64_t> GroupRssBytes(pid_t pgid, const std::string& proc_root) {
  DIR* dir = ::opendir(proc_root.c_str());
  if (!dir) return Status::IoError("cannot read " + proc_root);
  const long page = ::sysconf(_SC_PAGESIZE);
  uint64_t total = 0;
  bool found = false;
  while (dirent* e = ::readdir(dir)) {
    const char* name = e->d_name;
    if (name[0] < '0' || name[0] > '9') continue;
    std::ifstream f(proc_root + "/" + name + "/stat");
    std::string line;
    if (!f || !std::getline(f, line)) continue;  // exited meanwhile
    long long pgrp = 0, rss = 0;
    if (!ParseStat(line, &pgrp, &rss) || pgrp != pgid) continue;
    found = true;
    if (rss > 0) total += uint64_t(rss) * uint64_t(page);
  }
  ::closedir(dir);
  if (!found) return Status::NotFound("no process in group " + std::to_string(pgid));
  return total;
}

}  // namespace headlab
