// CSV and TSV files (RFC 4180) read into a table of strings: a header row of column names, then
// rows of fields. Quoted fields may hold the delimiter, doubled quotes ("" is one ") and line
// breaks; lines end in LF, CRLF or a lone CR; a UTF-8 byte-order mark at the start is skipped; a
// line with no characters at all is skipped (pandas' skip_blank_lines). The delimiter is the
// caller's, or by the file's extension: '\t' for .tsv, ',' otherwise.
// Every error is one line naming the file, the physical line (1-based; a quoted field's own line
// breaks count) and the column (number and header name): an unterminated quote, text after a
// closing quote, a row with the wrong number of fields, an empty file, no header row, a header
// column without a name or with a repeated one. A quote inside an unquoted field is kept as a
// character (as Python's csv module and pandas do; RFC 4180 leaves it undefined).
// It does not convert fields to numbers, guess types or delimiters, or stream: the whole file is
// read into memory (train/data/csv_dataset.h turns a table into tensors).
//   dg::CsvTable t = dg::read_csv("houses.csv");
//   int64_t price = t.column_index("price");
//   for (int64_t r = 0; r < t.rows(); ++r) use(t.cell(r, price), t.where(r, price));
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dg {

struct CsvTable {
  std::string source;  // the file's path (or the name given to parse_csv)
  char delimiter = ',';
  std::vector<std::string> columns;  // the header's names, in file order
  int64_t header_line = 1;           // the physical line the header starts on
  std::vector<std::string> cells;    // the fields, row after row (rows() × width())
  std::vector<int64_t> row_lines;    // the physical line each row starts on

  int64_t rows() const { return static_cast<int64_t>(row_lines.size()); }
  int64_t width() const { return static_cast<int64_t>(columns.size()); }
  const std::string& cell(int64_t row, int64_t column) const {
    return cells[static_cast<size_t>(row * width() + column)];
  }
  // The physical line field (row, column) starts on (later than the row's when a quoted field
  // before it holds line breaks).
  int64_t line(int64_t row, int64_t column) const;
  // The column named `name`, or -1.
  int64_t column_index(std::string_view name) const;
  // "path:line: column 3 'age'": the start of an error message about field (row, column).
  std::string where(int64_t row, int64_t column) const;
};

// '\t' when path ends in .tsv (any case), ',' otherwise.
char csv_delimiter_for(const std::string& path);

// Reads and parses the file at `path`; delimiter 0 chooses by the extension (csv_delimiter_for).
// Throws std::runtime_error naming the file (and line and column) on the errors above or when the
// file cannot be read.
CsvTable read_csv(const std::string& path, char delimiter = 0);
// Parses text already in memory; `source` names it in errors. The delimiter may be any character
// but the quote, CR and LF.
CsvTable parse_csv(std::string_view text, std::string source, char delimiter = ',');

}  // namespace dg
