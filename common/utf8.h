// UTF-8 well-formedness (RFC 3629): what JSON strings, HTTP answers and log lines need.
// Bytes from the network or from files are checked here before they reach a serialiser
// that would throw on them (nlohmann::json::dump) or a message a person reads.
#pragma once

#include <string>
#include <string_view>

namespace headlab {

// Returns the offset of the first byte of `s` that does not begin a well-formed UTF-8
// sequence (overlong forms, surrogates, code points above U+10FFFF and truncated
// sequences are ill-formed), or std::string::npos when all of `s` is well-formed.
size_t FirstInvalidUtf8(std::string_view s);

// Returns true iff every byte of `s` is part of well-formed UTF-8.
inline bool IsValidUtf8(std::string_view s) { return FirstInvalidUtf8(s) == std::string::npos; }

// Returns `s` with each byte that is not part of well-formed UTF-8, and each ASCII control
// character other than tab and newline, written as \xNN: safe in a JSON string and on a
// terminal. Well-formed text passes through unchanged.
std::string EscapeForMessage(std::string_view s);

// Returns `s` if it is at most `max_bytes` long, else its longest prefix of at most
// max_bytes - 3 bytes that does not split a UTF-8 sequence, followed by "...".
std::string ShortenForMessage(std::string s, size_t max_bytes);

}  // namespace headlab
