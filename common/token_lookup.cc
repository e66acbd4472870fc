// LookUpToken: --token-file, then the environment, then the file in DIR.
#include "common/token_lookup.h"

#include "common/files.h"
#include "common/json.h"

namespace headlab {
namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace

StatusOr<std::string> ReadTokenFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  std::string t = Trim(*text);
  if (t.empty()) return Status::InvalidArgument(path + ": token file is empty");
  return t;
}

StatusOr<FoundToken> LookUpToken(const std::string& token_file, const char* env_token,
                                 const std::string& data_dir, TokenKind kind) {
  if (!token_file.empty()) {
    auto t = ReadTokenFile(token_file);
    if (!t.ok()) return Status::InvalidArgument("--token-file: " + t.status().message());
    return FoundToken{*t, TokenSource::kFlag, "--token-file " + token_file};
  }
  if (env_token != nullptr && !Trim(env_token).empty())
    return FoundToken{Trim(env_token), TokenSource::kEnv, kind.env};
  const std::string path = data_dir + "/" + kind.file;
  if (!PathExists(path)) return Status::NotFound(path + " does not exist");
  auto t = ReadTokenFile(path);
  if (!t.ok()) return Status::InvalidArgument(t.status().message());
  return FoundToken{*t, TokenSource::kDataDir, path};
}

std::string WorkerKeyFile(const std::string& data_dir) {
  auto text = ReadFile(data_dir + "/coordinator.json");
  if (!text.ok()) return "";
  auto j = ParseJson(*text, "coordinator.json");
  if (!j.ok() || !j->is_object()) return "";
  auto key = j->find("worker_key");
  return key != j->end() && key->is_string() ? key->get<std::string>() : "";
}

}  // namespace headlab
