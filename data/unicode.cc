// UTF-8 decoding and the generated Unicode class tables.
#include "data/unicode.h"

#include <algorithm>

namespace headlab {
namespace {

struct CodeRange {
  uint32_t first, last;
};
struct CaseFold {
  uint32_t cp;
  char letter;
};
struct CombiningRange {
  uint32_t first, last;
  uint8_t ccc;
};
struct Decomposition {
  uint32_t cp;
  uint8_t n;
  uint32_t to[4];
};
struct Composition {
  uint32_t first, second, composite;
};

#include "data/unicode_table.inc"

template <size_t N>
bool InRanges(const CodeRange (&ranges)[N], uint32_t cp) {
  const CodeRange* end = ranges + N;
  const CodeRange* it =
      std::upper_bound(ranges, end, cp, [](uint32_t v, const CodeRange& r) { return v < r.first; });
  return it != ranges && cp <= (it - 1)->last;
}

// Latin-1 fast path: bit 0 letter, bit 1 number, bit 2 space.
struct Latin1Table {
  uint8_t bits[256];
  Latin1Table() {
    for (uint32_t c = 0; c < 256; ++c)
      bits[c] =
          uint8_t((InRanges(kLetterRanges, c) ? 1 : 0) | (InRanges(kNumberRanges, c) ? 2 : 0) |
                  (InRanges(kWhiteSpaceRanges, c) ? 4 : 0));
  }
};
const Latin1Table& Latin1() {
  static const Latin1Table t;
  return t;
}

// Hangul syllables (UAX #15 / Unicode §3.12): algorithmic decomposition and composition.
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

uint8_t CombiningClass(uint32_t cp) {
  if (cp < 0x300 || cp == kInvalidByte) return 0;
  const CombiningRange* end =
      kCombiningClasses + sizeof(kCombiningClasses) / sizeof(kCombiningClasses[0]);
  const CombiningRange* it = std::upper_bound(
      kCombiningClasses, end, cp, [](uint32_t v, const CombiningRange& r) { return v < r.first; });
  return it != kCombiningClasses && cp <= (it - 1)->last ? (it - 1)->ccc : 0;
}

void Decompose(uint32_t cp, std::vector<uint32_t>* out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out->push_back(kTBase + s % kTCount);
    return;
  }
  if (cp >= 0xC0 && cp != kInvalidByte) {
    const Decomposition* end =
        kDecompositions + sizeof(kDecompositions) / sizeof(kDecompositions[0]);
    const Decomposition* it = std::lower_bound(
        kDecompositions, end, cp, [](const Decomposition& d, uint32_t v) { return d.cp < v; });
    if (it != end && it->cp == cp) {
      out->insert(out->end(), it->to, it->to + it->n);
      return;
    }
  }
  out->push_back(cp);
}

// Returns the primary composite of (a, b), or 0.
uint32_t Compose(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount)
    return a + (b - kTBase);
  const Composition* end = kCompositions + sizeof(kCompositions) / sizeof(kCompositions[0]);
  const Composition* it =
      std::lower_bound(kCompositions, end, std::make_pair(a, b),
                       [](const Composition& c, const std::pair<uint32_t, uint32_t>& v) {
                         return std::make_pair(c.first, c.second) < v;
                       });
  return it != end && it->first == a && it->second == b ? it->composite : 0;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += char(cp);
  } else if (cp < 0x800) {
    *out += char(0xC0 | (cp >> 6));
    *out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += char(0xE0 | (cp >> 12));
    *out += char(0x80 | ((cp >> 6) & 0x3F));
    *out += char(0x80 | (cp & 0x3F));
  } else {
    *out += char(0xF0 | (cp >> 18));
    *out += char(0x80 | ((cp >> 12) & 0x3F));
    *out += char(0x80 | ((cp >> 6) & 0x3F));
    *out += char(0x80 | (cp & 0x3F));
  }
}

// NFC of a run of valid code points: decompose, order marks canonically, compose.
void NfcRun(const uint32_t* cps, size_t n, std::string* out) {
  std::vector<uint32_t> d;
  for (size_t i = 0; i < n; ++i) Decompose(cps[i], &d);
  // Canonical ordering: a stable sort of each run of non-starters by combining class.
  for (size_t i = 0; i < d.size();) {
    if (CombiningClass(d[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < d.size() && CombiningClass(d[j]) != 0) ++j;
    std::stable_sort(d.begin() + long(i), d.begin() + long(j),
                     [](uint32_t a, uint32_t b) { return CombiningClass(a) < CombiningClass(b); });
    i = j;
  }
  // Canonical composition: a character combines with the last starter unless blocked (an
  // intervening character of the same or higher class, or a starter).
  std::vector<uint32_t> c;
  int64_t starter = -1;
  int last_ccc = -1;  // class of the last character kept after the starter; -1: none
  for (uint32_t cp : d) {
    const int ccc = CombiningClass(cp);
    if (starter >= 0 && (last_ccc == -1 || last_ccc < ccc)) {
      uint32_t composite = Compose(c[size_t(starter)], cp);
      if (composite) {
        c[size_t(starter)] = composite;
        continue;
      }
    }
    if (ccc == 0) {
      starter = int64_t(c.size());
      last_ccc = -1;
    } else {
      last_ccc = ccc;
    }
    c.push_back(cp);
  }
  for (uint32_t cp : c) AppendUtf8(cp, out);
}

}  // namespace

std::string NormalizeNfc(std::string_view bytes) {
  bool ascii = true;  // ASCII is NFC
  for (unsigned char b : bytes) ascii = ascii && b < 0x80;
  if (ascii) return std::string(bytes);
  DecodedText t;
  DecodeUtf8(bytes, &t);
  std::string out;
  out.reserve(bytes.size());
  size_t run = 0;
  for (size_t i = 0; i <= t.cp.size(); ++i) {
    if (i < t.cp.size() && t.cp[i] != kInvalidByte) continue;
    NfcRun(t.cp.data() + run, i - run, &out);
    if (i < t.cp.size()) out += bytes[t.offset[i]];
    run = i + 1;
  }
  return out;
}

void DecodeUtf8(std::string_view s, DecodedText* out) {
  out->cp.clear();
  out->offset.clear();
  out->cp.reserve(s.size());
  out->offset.reserve(s.size() + 1);
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    out->offset.push_back(uint32_t(i));
    const uint8_t b = p[i];
    if (b < 0x80) {
      out->cp.push_back(b);
      ++i;
      continue;
    }
    // Lead byte -> sequence length and the smallest value it may encode (no overlongs).
    size_t len = 0;
    uint32_t cp = 0, min = 0;
    if (b >= 0xC2 && b <= 0xDF)
      len = 2, cp = b & 0x1F, min = 0x80;
    else if (b >= 0xE0 && b <= 0xEF)
      len = 3, cp = b & 0x0F, min = 0x800;
    else if (b >= 0xF0 && b <= 0xF4)
      len = 4, cp = b & 0x07, min = 0x10000;
    bool valid = len > 0 && i + len <= n;
    for (size_t k = 1; valid && k < len; ++k) {
      valid = (p[i + k] & 0xC0) == 0x80;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    valid = valid && cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (valid) {
      out->cp.push_back(cp);
      i += len;
    } else {
      out->cp.push_back(kInvalidByte);
      ++i;
    }
  }
  out->offset.push_back(uint32_t(n));
}

bool IsLetter(uint32_t cp) {
  if (cp < 256) return Latin1().bits[cp] & 1;
  return cp != kInvalidByte && InRanges(kLetterRanges, cp);
}

bool IsNumber(uint32_t cp) {
  if (cp < 256) return Latin1().bits[cp] & 2;
  return cp != kInvalidByte && InRanges(kNumberRanges, cp);
}

bool IsWhiteSpace(uint32_t cp) {
  if (cp < 256) return Latin1().bits[cp] & 4;
  return cp != kInvalidByte && InRanges(kWhiteSpaceRanges, cp);
}

std::vector<uint32_t> CaseVariants(uint32_t c) {
  uint32_t lower = (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if (lower < 'a' || lower > 'z') return {c};
  std::vector<uint32_t> out = {lower, lower - 32};
  for (const CaseFold& f : kAsciiFolds)
    if (uint32_t(f.letter) == lower) out.push_back(f.cp);
  return out;
}

const char* UnicodeTableVersion() { return HEADLAB_UNICODE_VERSION; }

}  // namespace headlab
