// safetensors reading (mmap) and writing.
#include "payload/exec/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/files.h"
#include "common/json.h"

namespace headlab {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the format's own limit

struct FileMapping {
  void* addr = MAP_FAILED;
  size_t len = 0;
  ~FileMapping() {
    if (addr != MAP_FAILED) ::munmap(addr, len);
  }
};

}  // namespace

int64_t SafeTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t SafeDtypeBytes(const std::string& d) {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL") return 1;
  return 0;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Status SafeTensorSet::AddFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::NotFound(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return Status::IoError(path + ": cannot stat");
  }
  auto map = std::make_shared<FileMapping>();
  map->len = size_t(st.st_size);
  if (map->len < 8) {
    ::close(fd);
    return Status::Corruption(path + ": " + std::to_string(map->len) +
                              " bytes: too short for a safetensors file");
  }
  map->addr = ::mmap(nullptr, map->len, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map->addr == MAP_FAILED)
    return Status::IoError(path + ": mmap failed (" + std::strerror(errno) + ")");
  const auto* base = static_cast<const uint8_t*>(map->addr);
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | base[i];
  if (header_bytes > kMaxHeaderBytes || header_bytes > map->len - 8)
    return Status::Corruption(path + ": header of " + std::to_string(header_bytes) +
                              " bytes does not fit the " + std::to_string(map->len) +
                              "-byte file (truncated, or not safetensors)");
  StatusOr<Json> header = ParseJson(
      std::string(reinterpret_cast<const char*>(base + 8), header_bytes), path + " (header)");
  if (!header.ok()) return Status::Corruption(header.status().message());
  if (!header->is_object()) return Status::Corruption(path + ": header: expected a JSON object");
  const uint8_t* data = base + 8 + header_bytes;
  const uint64_t data_bytes = map->len - 8 - header_bytes;
  for (auto it = header->begin(); it != header->end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const std::string where = path + ": tensor " + it.key();
    const Json& t = it.value();
    if (!t.is_object() || !t.contains("dtype") || !t["dtype"].is_string() || !t.contains("shape") ||
        !t["shape"].is_array() || !t.contains("data_offsets") || !t["data_offsets"].is_array() ||
        t["data_offsets"].size() != 2)
      return Status::Corruption(where + ": expected {dtype, shape, data_offsets: [begin, end]}");
    SafeTensor s;
    s.file = path;
    s.dtype = t["dtype"].get<std::string>();
    const size_t width = SafeDtypeBytes(s.dtype);
    if (width == 0) return Status::Corruption(where + ": unknown dtype \"" + s.dtype + "\"");
    for (const Json& d : t["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > (int64_t(1) << 40))
        return Status::Corruption(where + ": bad shape " + t["shape"].dump());
      s.shape.push_back(d.get<int64_t>());
    }
    const Json& off = t["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return Status::Corruption(where + ": bad data_offsets " + off.dump());
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > data_bytes)
      return Status::Corruption(where + ": data_offsets [" + std::to_string(begin) + ", " +
                                std::to_string(end) + "] outside the " +
                                std::to_string(data_bytes) + " data bytes (truncated file?)");
    if (end - begin != uint64_t(s.numel()) * width)
      return Status::Corruption(where + ": " + std::to_string(end - begin) + " bytes for " +
                                s.dtype + " " + ShapeString(s.shape) + " (expected " +
                                std::to_string(uint64_t(s.numel()) * width) + ")");
    s.data = data + begin;
    s.bytes = size_t(end - begin);
    if (!tensors_.emplace(it.key(), std::move(s)).second)
      return Status::Corruption(where + ": appears in two files");
  }
  files_.push_back(path);
  mappings_.push_back(map);
  return Status::Ok();
}

StatusOr<SafeTensorSet> SafeTensorSet::Open(const std::string& path) {
  SafeTensorSet set;
  struct stat st;
  const bool dir = ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  if (!dir) {
    set.source_ = path;
    HEADLAB_RETURN_IF_ERROR(set.AddFile(path));
    return set;
  }
  const std::string single = path + "/model.safetensors",
                    index = path + "/model.safetensors.index.json";
  if (PathExists(single)) {
    set.source_ = single;
    HEADLAB_RETURN_IF_ERROR(set.AddFile(single));
    return set;
  }
  if (!PathExists(index))
    return Status::NotFound(
        path +
        ": no model.safetensors or model.safetensors.index.json (model.init_from "
        "expects a Hugging Face checkpoint folder in safetensors format)");
  set.source_ = index;
  StatusOr<std::string> text = ReadFile(index);
  if (!text.ok()) return text.status();
  StatusOr<Json> j = ParseJson(text.value(), index);
  if (!j.ok()) return j.status();
  if (!j->is_object() || !j->contains("weight_map") || !(*j)["weight_map"].is_object())
    return Status::Corruption(index + ": $.weight_map: expected an object {tensor: file}");
  std::vector<std::string> shards;
  for (auto it = (*j)["weight_map"].begin(); it != (*j)["weight_map"].end(); ++it) {
    if (!it.value().is_string() || it.value().get<std::string>().find('/') != std::string::npos)
      return Status::Corruption(index + ": $.weight_map." + it.key() +
                                ": expected a file name in the folder");
    const std::string f = it.value().get<std::string>();
    bool seen = false;
    for (const std::string& s : shards) seen = seen || s == f;
    if (!seen) shards.push_back(f);
  }
  for (const std::string& f : shards) HEADLAB_RETURN_IF_ERROR(set.AddFile(path + "/" + f));
  for (auto it = (*j)["weight_map"].begin(); it != (*j)["weight_map"].end(); ++it)
    if (!set.tensors_.count(it.key()))
      return Status::Corruption(index + ": names " + it.key() + " in " +
                                it.value().get<std::string>() + ", which does not hold it");
  return set;
}

std::string EncodeSafetensors(const std::vector<SafeTensorOut>& tensors) {
  Json header = Json::object();
  std::string data;
  for (const SafeTensorOut& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // the format pads the header to 8 bytes
  std::string out(8, '\0');
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((n >> (8 * i)) & 0xFF);
  return out + h + data;
}

}  // namespace headlab
