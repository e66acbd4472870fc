#include "worker/proc_rss.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

namespace headlab {
namespace {

std::string Stat(int pid, const std::string& comm, int pgrp, long rss_pages) {
  // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
  // stime cutime cstime priority nice threads itrealvalue starttime vsize rss ...
  return std::to_string(pid) + " (" + comm + ") S 1 " + std::to_string(pgrp) +
         " 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 100 12345678 " + std::to_string(rss_pages) +
         " 18446744073709551615 0 0 0";
}

// VmRSS of /proc/self/status in bytes: the kernel's own figure, read independently.
uint64_t SelfVmRss() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

}  // namespace

TEST_CASE("group RSS sums field 24 of the group's processes only") {
  auto root = std::filesystem::temp_directory_path() / ("proc_rss_" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  auto put = [&](const std::string& pid, const std::string& text) {
    std::filesystem::create_directories(root / pid);
    std::ofstream(root / pid / "stat") << text << "\n";
  };
  put("100", Stat(100, "headlab", 100, 1000));
  put("101", Stat(101, "python3 (x) y", 100, 250));  // spaces and ')' in comm
  put("102", Stat(102, "other", 7, 99999));          // another group
  put("103", "garbage");
  std::filesystem::create_directories(root / "self");  // not a pid
  const uint64_t page = uint64_t(::sysconf(_SC_PAGESIZE));
  auto rss = GroupRssBytes(100, root.string());
  REQUIRE(rss.ok());
  CHECK(*rss == 1250 * page);
  CHECK(GroupRssBytes(5, root.string()).status().code() == Status::Code::kNotFound);
  std::filesystem::remove_all(root);
}

TEST_CASE("group RSS of this process's own group covers its VmRSS") {
  auto rss = GroupRssBytes(::getpgrp());
  REQUIRE(rss.ok());
  const uint64_t self = SelfVmRss();
  REQUIRE(self > 0);
  // The group holds at least this process; rss in stat and VmRSS count the same pages
  // (they may differ by what was faulted in between the two reads).
  CHECK(*rss + 2 * 1024 * 1024 >= self);
}

}  // namespace headlab
