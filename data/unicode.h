// Unicode facts the tokenizers need, torch-free: lenient UTF-8 decoding (an invalid byte is
// one pseudo code point, so every byte string round-trips), the general-category classes
// \p{L} and \p{N}, White_Space, the case folding of ASCII letters, and NFC. The tables are
// generated once by scripts/gen-unicode-table.py (data/unicode_table.inc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace headlab {

// The pseudo code point of a byte that does not start a valid UTF-8 sequence. It is in no
// class: not a letter, number or space (so [^\s\p{L}\p{N}] and \S match it).
inline constexpr uint32_t kInvalidByte = 0xFFFFFFFFu;

// A decoded text: code point i spans bytes [offset[i], offset[i + 1]).
struct DecodedText {
  std::vector<uint32_t> cp;
  std::vector<uint32_t> offset;  // cp.size() + 1 entries
};

// Decodes `bytes` as UTF-8 (RFC 3629: no overlongs, surrogates or values > U+10FFFF); each
// byte of an invalid sequence becomes kInvalidByte, one byte long.
void DecodeUtf8(std::string_view bytes, DecodedText* out);

// Returns true iff `cp` has general category L* (Lu Ll Lt Lm Lo).
bool IsLetter(uint32_t cp);
// Returns true iff `cp` has general category N* (Nd Nl No).
bool IsNumber(uint32_t cp);
// Returns true iff `cp` has the White_Space property (PropList.txt).
bool IsWhiteSpace(uint32_t cp);
// Returns the code points a case-insensitive match of ASCII letter `c` accepts (both cases
// plus those whose simple case folding is c, e.g. U+017F for 's'); {c} for other chars.
std::vector<uint32_t> CaseVariants(uint32_t c);
// Returns `bytes` in Normalization Form C (UAX #15); invalid UTF-8 bytes are kept as they
// are and block composition across them.
std::string NormalizeNfc(std::string_view bytes);
// The Unicode version of the tables ("14.0.0").
const char* UnicodeTableVersion();

}  // namespace headlab
