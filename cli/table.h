// Text output of the CLI: aligned tables, CSV, numbers and "mean ± SE" cells.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"

namespace headlab {

using TableRow = std::vector<std::string>;

// Returns the rows as columns padded to their widest cell (cells that look numeric are
// right-aligned), a header line first and a dashed rule under it; "" for no header.
std::string FormatTable(const TableRow& header, const std::vector<TableRow>& rows);

// Returns one RFC 4180 field: quoted (with doubled quotes) iff it holds , " CR or LF.
std::string CsvField(const std::string& s);
// Returns header and rows as CSV lines (CRLF-free: "\n" line ends).
std::string FormatCsv(const TableRow& header, const std::vector<TableRow>& rows);

// Returns `v` with up to 6 significant digits ("0.001234", "1.235e+06", "42").
std::string FormatNumber(double v);
// Returns a byte count with a binary unit: "512 B", "229.5 MiB", "1.00 GiB".
std::string FormatBytes(double bytes);
// Returns true iff a metric or field name holds bytes ("mem.peak_bytes", "bytes").
bool IsBytesKey(const std::string& key);
// Returns a value under `key` as a table cell: bytes with a unit, else Cell(v).
std::string KeyedCell(const std::string& key, const Json& v);
// Returns "mean ± se" with both to the decimal place of the SE's second significant digit
// (11148 ± 171, 0.09540 ± 0.00026): a mean is worth no more digits than its SE gives it.
// "mean" alone when se is null/absent, "-" when mean is.
std::string FormatMeanSe(const Json& mean, const Json& se);
// The same for byte counts, both in the mean's binary unit: "189.0 MiB", "1.50 ± 0.01 GiB".
std::string FormatBytesMeanSe(const Json& mean, const Json& se);
// Returns a JSON value as a table cell: strings unquoted, numbers via FormatNumber,
// null as "", arrays/objects as compact JSON.
std::string Cell(const Json& v);

// Returns the leaves of a nested object as {"a.b": v, ...} (arrays stay whole).
Json FlattenObject(const Json& obj);

}  // namespace headlab
