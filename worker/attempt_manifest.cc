// Manifest writing and resume-checkpoint verification.
#include "worker/attempt_manifest.h"

#include <cctype>
#include <filesystem>

#include "common/files.h"
#include "common/log.h"
#include "common/sha256.h"

namespace headlab {

Json VerifiedResume(const Json& resume) {
  if (resume.is_null()) return nullptr;
  const std::string path = resume["path"];
  if (!PathExists(path)) {
    LogWarn("resume checkpoint " + path + " is not on this host; starting from scratch");
    return nullptr;
  }
  StatusOr<std::string> sha = Sha256File(path);
  if (!sha.ok()) {
    LogWarn("resume checkpoint unreadable (" + sha.status().message() + "); starting from scratch");
    return nullptr;
  }
  if (*sha != resume["sha256"].get<std::string>()) {
    LogWarn("resume checkpoint " + path + " has SHA-256 " + *sha + ", expected " +
            resume["sha256"].get<std::string>() + "; starting from scratch");
    return nullptr;
  }
  return resume;
}

Json ChooseResume(const Json& assign) {
  Json chosen = VerifiedResume(assign.value("resume", Json(nullptr)));
  if (!chosen.is_null()) return chosen;
  auto fallbacks = assign.find("resume_fallbacks");
  if (fallbacks == assign.end() || !fallbacks->is_array()) return nullptr;
  for (const Json& r : *fallbacks) {
    chosen = VerifiedResume(r);
    if (!chosen.is_null()) {
      LogWarn("resuming from the earlier checkpoint of step " + chosen["step"].dump() + " (" +
              chosen["path"].get<std::string>() + ")");
      return chosen;
    }
  }
  return nullptr;
}

std::string AbsoluteWorkDir(const std::string& work_dir) {
  std::error_code ec;  // absolute() fails only without a current directory: keep it relative
  std::filesystem::path base = std::filesystem::absolute(work_dir, ec);
  if (ec) base = work_dir;
  std::string s = base.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

std::string AttemptOutDir(const std::string& work_dir, const Json& run, int64_t attempt) {
  std::string id = run.is_string() ? run.get<std::string>() : run.dump();
  for (char& c : id)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
  std::filesystem::path p = std::filesystem::path(AbsoluteWorkDir(work_dir)) / "runs" /
                            (id + "-" + std::to_string(attempt));
  return p.lexically_normal().string();
}

StatusOr<std::string> WriteManifest(const std::string& work_dir, const Json& assign,
                                    Json* manifest) {
  std::string out_dir = AttemptOutDir(work_dir, assign["run"], assign["attempt"].get<int64_t>());
  HEADLAB_RETURN_IF_ERROR(MakeDirs(out_dir));
  Json m{{"run", assign["run"]},
         {"attempt", assign["attempt"]},
         {"experiment", assign["experiment"]},
         {"config", assign["config"]},
         {"out_dir", out_dir},
         {"resume", ChooseResume(assign)},
         // A shared parent checkpoint is passed as given: without it the run cannot start,
         // so exec (which checks its SHA-256) fails the attempt with the reason.
         {"parent", assign.value("parent", Json(nullptr))}};
  std::string path = out_dir + "/manifest.json";
  HEADLAB_RETURN_IF_ERROR(WriteFileAtomic(path, m.dump(2) + "\n"));
  if (manifest) *manifest = std::move(m);
  return path;
}

}  // namespace headlab
