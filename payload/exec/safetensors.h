// The safetensors format, read (memory-mapped) and written. Torch-free.
//
//   file := header_size: uint64 little-endian
//           header: header_size bytes of JSON {NAME: {"dtype": D, "shape": [n...],
//                   "data_offsets": [begin, end]}, "__metadata__": {str: str}}
//           data: the tensors' bytes; offsets are relative to the start of data, row-major,
//                 little-endian; D in F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL
//   A sharded checkpoint has model.safetensors.index.json {"weight_map": {NAME: FILE}}.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace headlab {

struct SafeTensor {
  std::string dtype;  // "F32", "BF16", ...
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t bytes = 0;
  std::string file;  // the file it lives in (for error messages)
  int64_t numel() const;
};

// Returns the bytes per element of a dtype name, or 0 for an unknown one.
size_t SafeDtypeBytes(const std::string& dtype);
// Returns "[2, 3]".
std::string ShapeString(const std::vector<int64_t>& shape);

// The tensors of one checkpoint (one file, or every shard of an index), mapped read-only.
class SafeTensorSet {
 public:
  // Opens DIR/model.safetensors, or the shards DIR/model.safetensors.index.json names, or a
  // single .safetensors path. Every header is validated (offsets inside the file, sizes
  // matching dtype x shape); errors name the file and the tensor.
  static StatusOr<SafeTensorSet> Open(const std::string& path);

  const std::map<std::string, SafeTensor>& tensors() const { return tensors_; }
  // The file (or index) it was opened from.
  const std::string& source() const { return source_; }
  // The files it read, in order.
  const std::vector<std::string>& files() const { return files_; }

 private:
  Status AddFile(const std::string& path);

  std::string source_;
  std::vector<std::string> files_;
  std::map<std::string, SafeTensor> tensors_;
  std::vector<std::shared_ptr<void>> mappings_;
};

// One tensor to write: raw little-endian bytes of dtype x shape.
struct SafeTensorOut {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};
// Returns the bytes of a safetensors file holding `tensors` in order.
std::string EncodeSafetensors(const std::vector<SafeTensorOut>& tensors);

}  // namespace headlab
