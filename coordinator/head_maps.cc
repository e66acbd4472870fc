// Head-map artifact parsing.
#include "coordinator/head_maps.h"

#include <sys/stat.h>

#include "common/files.h"
#include "common/json.h"
#include "common/sha256.h"

namespace headlab::coord {
namespace {

constexpr off_t kMaxHeadMapBytes = 16 << 20;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

bool IsHeadMapKind(const std::string& kind) {
  return EndsWith(kind, "head_map") || EndsWith(kind, "head_maps");
}

StatusOr<std::vector<HeadMapRow>> ParseHeadMapRows(const std::string& text) {
  auto j = ParseJson(text, "head map");
  if (!j.ok()) return j.status();
  const Json* rows = &*j;
  if (j->is_object()) {
    for (const char* k : {"head_map", "head_maps"})
      if (j->contains(k)) rows = &(*j)[k];
  }
  if (!rows->is_array())
    return Status::InvalidArgument(
        "head map: expected an array of rows (or {\"head_map\": [...]})");
  std::vector<HeadMapRow> out;
  for (size_t i = 0; i < rows->size(); ++i) {
    const Json& r = (*rows)[i];
    std::string where = "head map row " + std::to_string(i);
    if (!r.is_object() || !r.contains("layer") || !r["layer"].is_number_integer() ||
        !r.contains("head") || !r["head"].is_number_integer() || !r.contains("role") ||
        !r["role"].is_string())
      return Status::InvalidArgument(where + ": expected {layer, head, role, score?, window?}");
    HeadMapRow row;
    row.layer = r["layer"].get<int64_t>();
    row.head = r["head"].get<int64_t>();
    row.role = r["role"].get<std::string>();
    if (r.contains("score") && r["score"].is_number()) row.score = r["score"].get<double>();
    if (r.contains("window") && r["window"].is_number_integer())
      row.window = r["window"].get<int64_t>();
    out.push_back(std::move(row));
  }
  return out;
}

StatusOr<std::vector<HeadMapRow>> LoadHeadMapArtifact(const std::string& path,
                                                      const std::string& sha256) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return Status::NotFound(path + ": not readable here");
  if (st.st_size > kMaxHeadMapBytes)
    return Status::InvalidArgument(path + ": too large for a head map");
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  if (Sha256Hex(*text) != sha256)
    return Status::Corruption(path + ": SHA-256 differs from the ARTIFACT message");
  return ParseHeadMapRows(*text);
}

}  // namespace headlab::coord
