// Offline reads through coord::HttpApi on a read-only connection.
#include "cli/offline_reads.h"

#include <cstdio>
#include <memory>

#include "coordinator/http_api.h"

namespace headlab {

LocalHandler OfflineReads(const std::string& db_path, const std::string& data_dir,
                          const std::string& url) {
  coord::HttpApi::Options o;
  o.db_path = db_path;
  o.open_reads = true;  // this process reads its own file: no token to check
  auto api = std::make_shared<coord::HttpApi>(o, /*router=*/nullptr);
  return [api, data_dir, url, db_path](const std::string& method, const std::string& target,
                                       const std::string& body) {
    const bool read = method == "GET" || (method == "POST" && target == "/api/v1/query");
    if (!read)
      return HttpResponse{503,
                          Json{{"error", "no coordinator is running for " + data_dir +
                                             (url.empty() ? "" : " (none answers at " + url + ")") +
                                             "; reads work without one, this needs one: "
                                             "`headlab up --data-dir " +
                                             data_dir + "`"}}
                              .dump()};
    static bool told = false;  // once per process, however many clients a command makes
    if (!told) {
      std::fprintf(stderr, "headlab: %s; reading %s directly (read-only)\n",
                   url.empty() ? ("no coordinator is running for " + data_dir).c_str()
                               : ("no coordinator answers at " + url).c_str(),
                   db_path.c_str());
      told = true;
    }
    coord::HttpResponse r = api->Handle({method, target, "", body, ""});
    return HttpResponse{r.status, r.body};
  };
}

}  // namespace headlab
