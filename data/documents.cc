// Input listing and document readers of `headlab data prepare`.
#include "data/documents.h"

#include <dirent.h>
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/files.h"
#include "common/json.h"

namespace headlab {
namespace {

bool IsDirectory(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool IsRegular(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Appends the regular files under `dir`, sorted, recursing into folders.
Status ListDir(const std::string& dir, std::vector<std::string>* out) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return Status::IoError(dir + ": cannot list (" + std::strerror(errno) + ")");
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    const std::string p = dir + "/" + n;
    if (IsDirectory(p))
      HEADLAB_RETURN_IF_ERROR(ListDir(p, out));
    else if (IsRegular(p))
      out->push_back(p);
  }
  return Status::Ok();
}

bool IsPunctuationAfter(const std::string& w) {  // attaches to the word before it
  static const char* kAfter[] = {".", ",", ";", ":", "?", "!", ")", "]", "}", "''", "'", "%"};
  for (const char* a : kAfter)
    if (w == a) return true;
  return false;
}

bool IsPunctuationBefore(const std::string& w) {  // attaches to the word after it
  return w == "(" || w == "[" || w == "{" || w == "``" || w == "$";
}

}  // namespace

StatusOr<std::vector<std::string>> ListInputFiles(const std::vector<std::string>& inputs) {
  std::vector<std::string> out;
  for (const std::string& in : inputs) {
    const size_t before = out.size();
    if (in == "-") {
      out.push_back(in);
    } else if (IsDirectory(in)) {
      HEADLAB_RETURN_IF_ERROR(ListDir(in, &out));
    } else if (in.find_first_of("*?[") != std::string::npos) {
      glob_t g;
      int rc = ::glob(in.c_str(), 0, nullptr, &g);
      if (rc == 0) {
        std::vector<std::string> matches(g.gl_pathv, g.gl_pathv + g.gl_pathc);
        std::sort(matches.begin(), matches.end());
        for (const std::string& m : matches) {
          if (IsDirectory(m))
            HEADLAB_RETURN_IF_ERROR(ListDir(m, &out));
          else if (IsRegular(m))
            out.push_back(m);
        }
      }
      globfree(&g);
    } else if (IsRegular(in)) {
      out.push_back(in);
    } else {
      return Status::InvalidArgument(in + ": no such file or folder");
    }
    if (out.size() == before)
      return Status::InvalidArgument(
          in + ": matches no file (expected a folder, a glob pattern, a file or -)");
  }
  return out;
}

Status CheckDocumentFormat(const DocumentFormat& f) {
  if (f.format != "text" && f.format != "jsonl" && f.format != "brown")
    return Status::InvalidArgument("--format: expected text, jsonl or brown, got \"" + f.format +
                                   "\"");
  if (f.format == "jsonl" && f.jsonl_field.empty())
    return Status::InvalidArgument("--jsonl-field: expected a field name, got \"\"");
  return Status::Ok();
}

std::string StripBrownTags(std::string_view tagged) {
  std::string out;
  bool glue_next = true;  // no space before the next word
  size_t i = 0;
  while (i < tagged.size()) {
    while (i < tagged.size() && std::isspace(static_cast<unsigned char>(tagged[i]))) ++i;
    size_t j = i;
    while (j < tagged.size() && !std::isspace(static_cast<unsigned char>(tagged[j]))) ++j;
    if (j == i) break;
    std::string token(tagged.substr(i, j - i));
    i = j;
    size_t slash = token.rfind('/');
    std::string word = slash == std::string::npos || slash == 0 ? token : token.substr(0, slash);
    const bool after = IsPunctuationAfter(word), before = IsPunctuationBefore(word);
    if (word == "``" || word == "''") word = "\"";
    if (!glue_next && !after) out += ' ';
    out += word;
    glue_next = before;
  }
  return out;
}

Status ReadDocuments(const std::string& path, const DocumentFormat& f,
                     const std::function<Status(std::string_view)>& on_document,
                     const std::function<void(int64_t)>& on_bytes, int64_t* skipped) {
  if (f.format == "jsonl") {
    std::ifstream file;
    std::istream* in = &std::cin;
    if (path != "-") {
      file.open(path, std::ios::binary);
      if (!file) return Status::IoError(path + ": cannot open (" + std::strerror(errno) + ")");
      in = &file;
    }
    std::string line;
    int64_t line_no = 0, consumed = 0;
    while (std::getline(*in, line)) {
      ++line_no;
      consumed += int64_t(line.size()) + 1;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const std::string where = path + ":" + std::to_string(line_no);
      StatusOr<Json> j = ParseJson(line, where);
      if (!j.ok()) return Status::InvalidArgument(j.status().message());
      if (!j->is_object() || !j->contains(f.jsonl_field) || !(*j)[f.jsonl_field].is_string())
        return Status::InvalidArgument(where + ": expected an object with a string field \"" +
                                       f.jsonl_field + "\"");
      HEADLAB_RETURN_IF_ERROR(on_document((*j)[f.jsonl_field].get_ref<const std::string&>()));
      if (line_no % 1024 == 0) on_bytes(consumed);
    }
    if (in->bad()) return Status::IoError(path + ": read error");
    on_bytes(consumed);
    return Status::Ok();
  }
  std::string bytes;
  if (path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    bytes = ss.str();
  } else {
    StatusOr<std::string> content = ReadFile(path);
    if (!content.ok()) return content.status();
    bytes = std::move(content.value());
  }
  if (std::memchr(bytes.data(), '\0', std::min<size_t>(bytes.size(), 8192)) != nullptr) {
    ++*skipped;
    on_bytes(int64_t(bytes.size()));
    return Status::Ok();
  }
  Status st = f.format == "brown" ? on_document(StripBrownTags(bytes)) : on_document(bytes);
  on_bytes(int64_t(bytes.size()));
  return st;
}

}  // namespace headlab
