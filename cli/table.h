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
// Returns "mean ± se" ("mean" alone when se is null/absent, "-" when mean is).
std::string FormatMeanSe(const Json& mean, const Json& se);
// Returns a JSON value as a table cell: strings unquoted, numbers via FormatNumber,
// null as "", arrays/objects as compact JSON.
std::string Cell(const Json& v);

// Returns the leaves of a nested object as {"a.b": v, ...} (arrays stay whole).
Json FlattenObject(const Json& obj);

}  // namespace headlab
