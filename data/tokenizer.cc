// Tokenizer loading (GPT-2 files, tokenizer.json), encoding, decoding, fingerprints.
#include "data/tokenizer.h"

#include <sys/stat.h>

#include <cstdio>
#include <map>
#include <optional>

#include "common/files.h"
#include "common/json.h"
#include "common/sha256.h"
#include "data/bpe.h"
#include "data/pretokenizer.h"
#include "data/unicode.h"

namespace headlab {

struct Tokenizer::Impl {
  std::string kind, source, sha256, pattern;
  int64_t vocab = 256;
  int32_t eot = -1;
  std::optional<PreTokenizer> pre;
  std::optional<BytePairEncoder> bpe;
  std::map<int32_t, std::string> added;  // added tokens outside the BPE vocabulary
  bool nfc = false;                      // normalize to NFC before splitting
};

namespace {

// GPT-2's bytes_to_unicode (openai/gpt-2 encoder.py): printable bytes map to themselves,
// the other 68 to U+0100 + n in byte order, so every token is printable text.
struct ByteAlphabet {
  uint32_t to_cp[256];
  std::map<uint32_t, uint8_t> to_byte;
  ByteAlphabet() {
    uint32_t n = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      bool printable =
          (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cp[b] = printable ? b : 256 + n++;
      to_byte[to_cp[b]] = uint8_t(b);
    }
  }
};
const ByteAlphabet& Alphabet() {
  static const ByteAlphabet a;
  return a;
}

// Converts a token in the printable alphabet back to raw bytes; nullopt if a code point is
// outside the alphabet (e.g. an added token's text is then taken as UTF-8 instead).
std::optional<std::string> FromAlphabet(const std::string& token) {
  DecodedText d;
  DecodeUtf8(token, &d);
  std::string out;
  for (uint32_t cp : d.cp) {
    auto it = Alphabet().to_byte.find(cp);
    if (it == Alphabet().to_byte.end()) return std::nullopt;
    out += char(it->second);
  }
  return out;
}

bool IsDir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string Hex(const std::string& bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

// The fingerprint of a byte-level BPE (tokenizer.h).
std::string Fingerprint(const Tokenizer::Impl& t, const std::string& normalizer) {
  Sha256 h;
  h.Update("headlab-tokenizer/1\nkind=byte-level-bpe\nnormalizer=" + normalizer +
           "\npattern=" + t.pattern + "\nignore_merges=" + (t.bpe->ignore_merges() ? "1" : "0") +
           "\nvocab=" + std::to_string(t.vocab) + "\n");
  for (int32_t id = 0; id < int32_t(t.vocab); ++id) {
    auto a = t.added.find(id);
    // An added token hashes like a vocabulary entry of the same bytes: neither is reachable
    // by merges unless the merges spell it, which the merge list below then shows.
    h.Update(Hex(a != t.added.end() ? a->second : t.bpe->TokenBytes(id)) + "\n");
  }
  for (const auto& [l, r] : t.bpe->merge_ids())
    h.Update(std::to_string(l) + " " + std::to_string(r) + "\n");
  return h.HexDigest();
}

int32_t FindEot(const Tokenizer::Impl& t) {
  for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "</s>"}) {
    int32_t id = t.bpe->Find(name);
    if (id >= 0) return id;
    for (const auto& [aid, text] : t.added)
      if (text == name) return aid;
  }
  return -1;
}

Status Finish(Tokenizer::Impl* t, std::vector<std::string> tokens,
              const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges,
              const std::string& normalizer, const std::string& source) {
  StatusOr<PreTokenizer> pre = PreTokenizer::Compile(t->pattern);
  if (!pre.ok()) return Status::InvalidArgument(source + ": " + pre.status().message());
  t->pre = std::move(pre.value());
  StatusOr<BytePairEncoder> bpe =
      BytePairEncoder::Create(std::move(tokens), merges, ignore_merges, source);
  if (!bpe.ok()) return bpe.status();
  t->bpe = std::move(bpe.value());
  t->vocab = t->bpe->size();
  if (!t->added.empty())
    t->vocab = std::max<int64_t>(t->vocab, int64_t(t->added.rbegin()->first) + 1);
  t->eot = FindEot(*t);
  t->sha256 = Fingerprint(*t, normalizer);
  return Status::Ok();
}

// vocab: {token (alphabet text): id} -> tokens by id (raw bytes).
Status ReadVocab(const Json& vocab, const std::string& where, std::vector<std::string>* tokens) {
  if (!vocab.is_object())
    return Status::InvalidArgument(where + ": expected an object {token: id}");
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
        it.value().get<int64_t>() > 10000000)
      return Status::InvalidArgument(where + ": \"" + it.key() +
                                     "\": expected an id in [0, 10^7], got " + it.value().dump());
    size_t id = size_t(it.value().get<int64_t>());
    std::optional<std::string> bytes = FromAlphabet(it.key());
    if (!bytes)
      return Status::InvalidArgument(where + ": \"" + it.key() +
                                     "\" is not in the byte-level alphabet");
    if (tokens->size() <= id) tokens->resize(id + 1);
    (*tokens)[id] = *bytes;
  }
  return Status::Ok();
}

// One merge "a b" (alphabet text) -> raw bytes.
Status ParseMerge(const std::string& line, const std::string& where,
                  std::vector<std::pair<std::string, std::string>>* merges) {
  size_t sp = line.find(' ');
  if (sp == std::string::npos || sp == 0 || sp + 1 >= line.size() ||
      line.find(' ', sp + 1) != std::string::npos)
    return Status::InvalidArgument(where + ": expected \"LEFT RIGHT\", got \"" + line + "\"");
  auto l = FromAlphabet(line.substr(0, sp)), r = FromAlphabet(line.substr(sp + 1));
  if (!l || !r)
    return Status::InvalidArgument(where + ": \"" + line + "\" is not in the byte-level alphabet");
  merges->push_back({*l, *r});
  return Status::Ok();
}

// GPT-2's encoder.json + vocab.bpe (or vocab.json + merges.txt).
StatusOr<Tokenizer::Impl> LoadGpt2Files(const std::string& vocab_path,
                                        const std::string& merges_path) {
  Tokenizer::Impl t;
  t.kind = "gpt2-bpe";
  t.source = vocab_path;
  t.pattern = kGpt2Pattern;
  StatusOr<std::string> vtext = ReadFile(vocab_path);
  if (!vtext.ok()) return vtext.status();
  StatusOr<Json> vocab = ParseJson(vtext.value(), vocab_path);
  if (!vocab.ok()) return vocab.status();
  std::vector<std::string> tokens;
  HEADLAB_RETURN_IF_ERROR(ReadVocab(vocab.value(), vocab_path, &tokens));
  StatusOr<std::string> mtext = ReadFile(merges_path);
  if (!mtext.ok()) return mtext.status();
  std::vector<std::pair<std::string, std::string>> merges;
  size_t start = 0, line_no = 0;
  const std::string& m = mtext.value();
  while (start < m.size()) {
    size_t nl = m.find('\n', start);
    std::string line = m.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    start = nl == std::string::npos ? m.size() : nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    HEADLAB_RETURN_IF_ERROR(ParseMerge(line, merges_path + ":" + std::to_string(line_no), &merges));
  }
  HEADLAB_RETURN_IF_ERROR(Finish(&t, std::move(tokens), merges, false, "none", merges_path));
  return t;
}

// The pattern of a tokenizer.json pre_tokenizer (ByteLevel, or Sequence[Split, ByteLevel]).
StatusOr<std::string> HfPattern(const Json& pre, const std::string& where) {
  auto str = [](const Json& j, const char* k) {
    return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string();
  };
  auto flag = [](const Json& j, const char* k, bool def) {
    return j.contains(k) && j[k].is_boolean() ? j[k].get<bool>() : def;
  };
  auto byte_level_ok = [&](const Json& j) -> Status {
    if (flag(j, "add_prefix_space", false))
      return Status::InvalidArgument(where +
                                     ".add_prefix_space: true is not supported (expected false)");
    return Status::Ok();
  };
  if (!pre.is_object())
    return Status::InvalidArgument(
        where + ": expected a ByteLevel or Sequence[Split, ByteLevel] pre-tokenizer, got " +
        pre.dump().substr(0, 80));
  const std::string type = str(pre, "type");
  if (type == "ByteLevel") {
    HEADLAB_RETURN_IF_ERROR(byte_level_ok(pre));
    if (!flag(pre, "use_regex", true))
      return Status::InvalidArgument(
          where + ": ByteLevel with use_regex false splits nothing; not supported");
    return std::string(kGpt2Pattern);
  }
  if (type == "Sequence" && pre.contains("pretokenizers") && pre["pretokenizers"].is_array() &&
      pre["pretokenizers"].size() == 2) {
    const Json& split = pre["pretokenizers"][0];
    const Json& bl = pre["pretokenizers"][1];
    if (str(split, "type") == "Split" && str(bl, "type") == "ByteLevel") {
      HEADLAB_RETURN_IF_ERROR(byte_level_ok(bl));
      if (flag(bl, "use_regex", true))
        return Status::InvalidArgument(
            where + ".pretokenizers[1]: ByteLevel.use_regex true after a Split is not supported");
      if (str(split, "behavior") != "Isolated" || flag(split, "invert", false))
        return Status::InvalidArgument(
            where + ".pretokenizers[0]: expected behavior \"Isolated\", invert false");
      const Json& p = split.contains("pattern") ? split["pattern"] : Json();
      if (p.is_object() && p.contains("Regex") && p["Regex"].is_string())
        return p["Regex"].get<std::string>();
      return Status::InvalidArgument(where +
                                     ".pretokenizers[0].pattern: expected {\"Regex\": \"...\"}");
    }
  }
  return Status::InvalidArgument(
      where + ": expected a ByteLevel or Sequence[Split, ByteLevel] pre-tokenizer, got type \"" +
      type + "\"");
}

StatusOr<Tokenizer::Impl> LoadHfJson(const std::string& path) {
  Tokenizer::Impl t;
  t.kind = "hf-bpe";
  t.source = path;
  StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  StatusOr<Json> parsed = ParseJson(text.value(), path);
  if (!parsed.ok()) return parsed.status();
  const Json& j = parsed.value();
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object())
    return Status::InvalidArgument(path + ": $.model: expected an object");
  const Json& model = j["model"];
  if (!model.contains("type") || model["type"] != "BPE")
    return Status::InvalidArgument(
        path + ": $.model.type: expected \"BPE\", got " +
        (model.contains("type") ? model["type"].dump() : std::string("nothing")));
  if (model.contains("byte_fallback") && model["byte_fallback"] == true)
    return Status::InvalidArgument(
        path + ": $.model.byte_fallback: true (a SentencePiece-style BPE) is not supported");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(k) && model[k].is_string() && !model[k].get<std::string>().empty())
      return Status::InvalidArgument(path + ": $.model." + k + ": not supported (expected null)");
  std::string normalizer = "none";
  if (j.contains("normalizer") && !j["normalizer"].is_null()) {
    const Json& n = j["normalizer"];
    std::string type = n.is_object() && n.contains("type") && n["type"].is_string()
                           ? n["type"].get<std::string>()
                           : "";
    if (type != "NFC")
      return Status::InvalidArgument(path + ": $.normalizer: only null or NFC is supported, got " +
                                     n.dump().substr(0, 80));
    normalizer = "NFC";
  }
  t.nfc = normalizer == "NFC";
  StatusOr<std::string> pattern = HfPattern(
      j.contains("pre_tokenizer") ? j["pre_tokenizer"] : Json(), path + ": $.pre_tokenizer");
  if (!pattern.ok()) return pattern.status();
  t.pattern = pattern.value();
  std::vector<std::string> tokens;
  HEADLAB_RETURN_IF_ERROR(ReadVocab(model.contains("vocab") ? model["vocab"] : Json(),
                                    path + ": $.model.vocab", &tokens));
  std::vector<std::pair<std::string, std::string>> merges;
  const Json& ms = model.contains("merges") ? model["merges"] : Json();
  if (!ms.is_array()) return Status::InvalidArgument(path + ": $.model.merges: expected an array");
  for (size_t i = 0; i < ms.size(); ++i) {
    const std::string where = path + ": $.model.merges[" + std::to_string(i) + "]";
    if (ms[i].is_string()) {
      HEADLAB_RETURN_IF_ERROR(ParseMerge(ms[i].get<std::string>(), where, &merges));
    } else if (ms[i].is_array() && ms[i].size() == 2 && ms[i][0].is_string() &&
               ms[i][1].is_string()) {
      HEADLAB_RETURN_IF_ERROR(ParseMerge(
          ms[i][0].get<std::string>() + " " + ms[i][1].get<std::string>(), where, &merges));
    } else {
      return Status::InvalidArgument(where + ": expected \"LEFT RIGHT\" or [LEFT, RIGHT]");
    }
  }
  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    for (size_t i = 0; i < j["added_tokens"].size(); ++i) {
      const Json& a = j["added_tokens"][i];
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
          !a.contains("content") || !a["content"].is_string() || a["id"].get<int64_t>() < 0 ||
          a["id"].get<int64_t>() > 10000000)
        return Status::InvalidArgument(path + ": $.added_tokens[" + std::to_string(i) +
                                       "]: expected {\"id\": N, \"content\": \"...\"}");
      size_t id = size_t(a["id"].get<int64_t>());
      if (id < tokens.size() && !tokens[id].empty()) continue;  // also in the vocabulary
      t.added[int32_t(id)] = a["content"].get<std::string>();
    }
  }
  bool ignore = model.contains("ignore_merges") && model["ignore_merges"] == true;
  HEADLAB_RETURN_IF_ERROR(Finish(&t, std::move(tokens), merges, ignore, normalizer, path));
  return t;
}

}  // namespace

Tokenizer::Tokenizer() : impl_(std::make_shared<Impl>()) {
  impl_->kind = "byte";
  impl_->source = "byte";
  impl_->sha256 = Sha256Hex("headlab-tokenizer/1\nkind=byte\n");
}

Tokenizer Tokenizer::Bytes() { return Tokenizer(); }

StatusOr<Tokenizer> Tokenizer::Load(const std::string& spec) {
  if (spec == "byte") return Bytes();
  StatusOr<Impl> t = Status::NotFound("");
  if (IsDir(spec)) {
    if (PathExists(spec + "/tokenizer.json"))
      t = LoadHfJson(spec + "/tokenizer.json");
    else if (PathExists(spec + "/encoder.json"))
      t = LoadGpt2Files(spec + "/encoder.json", spec + "/vocab.bpe");
    else if (PathExists(spec + "/vocab.json"))
      t = LoadGpt2Files(spec + "/vocab.json", spec + "/merges.txt");
    else
      return Status::NotFound(
          spec + ": no tokenizer.json, encoder.json + vocab.bpe, or vocab.json + merges.txt there");
  } else if (PathExists(spec)) {
    const std::string base = spec.substr(spec.rfind('/') + 1),
                      dir = spec.substr(0, spec.rfind('/') + 1);
    if (base == "encoder.json")
      t = LoadGpt2Files(spec, dir + "vocab.bpe");
    else if (base == "vocab.json")
      t = LoadGpt2Files(spec, dir + "merges.txt");
    else
      t = LoadHfJson(spec);
  } else {
    return Status::NotFound(
        spec +
        ": no such tokenizer (expected \"byte\", a tokenizer.json file, or a folder "
        "with tokenizer.json, encoder.json + vocab.bpe, or vocab.json + merges.txt)");
  }
  if (!t.ok()) return t.status();
  return Tokenizer(std::make_shared<Impl>(std::move(t.value())));
}

void Tokenizer::Encode(std::string_view text, std::vector<int32_t>* ids) const {
  if (!impl_->bpe) {
    for (unsigned char c : text) ids->push_back(int32_t(c));
    return;
  }
  std::string normalized;
  if (impl_->nfc) {
    normalized = NormalizeNfc(text);
    text = normalized;
  }
  DecodedText decoded;
  DecodeUtf8(text, &decoded);
  std::vector<std::pair<uint32_t, uint32_t>> pieces;
  impl_->pre->Split(decoded, &pieces);
  for (const auto& [b, e] : pieces) impl_->bpe->EncodePiece(text.substr(b, e - b), ids);
}

std::string Tokenizer::Decode(const int32_t* ids, size_t n) const {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = ids[i];
    if (!impl_->bpe) {
      if (id >= 0 && id < 256) out += char(id);
      continue;
    }
    auto a = impl_->added.find(id);
    if (a != impl_->added.end())
      out += a->second;
    else
      out += impl_->bpe->TokenBytes(id);
  }
  return out;
}

int64_t Tokenizer::vocab_size() const { return impl_->vocab; }
int32_t Tokenizer::eot() const { return impl_->eot; }
const std::string& Tokenizer::kind() const { return impl_->kind; }
const std::string& Tokenizer::source() const { return impl_->source; }
const std::string& Tokenizer::sha256() const { return impl_->sha256; }
const std::string& Tokenizer::pattern() const { return impl_->pattern; }

StatusOr<std::string> CopyTokenizerFiles(const std::string& source, const std::string& dir) {
  const size_t slash = source.rfind('/');
  const std::string base = source.substr(slash + 1), from = source.substr(0, slash + 1);
  // (file to copy, name in dir); the first names what Load reads.
  std::vector<std::pair<std::string, std::string>> files;
  if (base == "encoder.json")
    files = {{source, base}, {from + "vocab.bpe", "vocab.bpe"}};
  else if (base == "vocab.json")
    files = {{source, base}, {from + "merges.txt", "merges.txt"}};
  else
    files = {{source, "tokenizer.json"}};
  HEADLAB_RETURN_IF_ERROR(MakeDirs(dir));
  for (const auto& [path, name] : files) {
    StatusOr<std::string> bytes = ReadFile(path);
    if (!bytes.ok()) return bytes.status();
    HEADLAB_RETURN_IF_ERROR(WriteFileAtomic(dir + "/" + name, bytes.value()));
  }
  return files.front().second;
}

}  // namespace headlab
