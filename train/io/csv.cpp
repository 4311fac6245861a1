// CSV/TSV parsing (see csv.h): a cursor over the text reads one record at a time, one field at a
// time, counting physical lines as it goes.
#include "train/io/csv.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "train/io/files.h"

namespace dg {

namespace {

// Line breaks in `text`: LF, CRLF and a lone CR each count one.
int64_t line_breaks(std::string_view text) {
  int64_t n = 0;
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n' || (text[i] == '\r' && (i + 1 == text.size() || text[i + 1] != '\n'))) ++n;
  return n;
}

std::string column_label(const std::vector<std::string>* names, size_t column) {
  if (names && column < names->size())
    return fmt::format("column {} '{}'", column + 1, (*names)[column]);
  return fmt::format("column {}", column + 1);
}

// Where the text stands: the next character and its physical line.
struct Cursor {
  std::string_view text;
  size_t pos = 0;
  int64_t line = 1;
  const std::string& source;

  bool at_end() const { return pos >= text.size(); }
  char peek() const { return text[pos]; }
  bool at_line_end() const { return !at_end() && (peek() == '\n' || peek() == '\r'); }
  // Steps over one line break (CRLF as one) and counts it.
  void skip_line_end() {
    if (peek() == '\r' && pos + 1 < text.size() && text[pos + 1] == '\n') ++pos;
    ++pos;
    ++line;
  }
};

// How a field ended: the delimiter (another field follows), a line break or the end of the text.
enum class FieldEnd { delimiter, record };

// A quoted field, the cursor on its opening quote: the text up to the closing quote with "" read
// as one ", line breaks kept as they are. `names`: the header's names when known (for messages).
FieldEnd read_quoted(Cursor& at, char delimiter, std::string& field,
                     const std::vector<std::string>* names, size_t column) {
  const int64_t opened = at.line;
  ++at.pos;
  for (;;) {
    if (at.at_end())
      throw std::runtime_error(
          fmt::format("{}:{}: {}: unterminated quoted field (the quote opened on this line is "
                      "never closed)",
                      at.source, opened, column_label(names, column)));
    const char c = at.peek();
    if (c == '"') {
      if (at.pos + 1 < at.text.size() && at.text[at.pos + 1] == '"') {
        field += '"';
        at.pos += 2;
        continue;
      }
      ++at.pos;
      break;
    }
    if (c == '\n' || (c == '\r' && (at.pos + 1 == at.text.size() || at.text[at.pos + 1] != '\n')))
      ++at.line;
    field += c;
    ++at.pos;
  }
  if (at.at_end() || at.at_line_end()) return FieldEnd::record;
  if (at.peek() == delimiter) {
    ++at.pos;
    return FieldEnd::delimiter;
  }
  throw std::runtime_error(
      fmt::format("{}:{}: {}: text after the closing quote ('{}'); a quote inside a quoted field "
                  "is written twice (\"\")",
                  at.source, at.line, column_label(names, column), at.peek()));
}

// One field, the cursor on its first character.
FieldEnd read_field(Cursor& at, char delimiter, std::string& field,
                    const std::vector<std::string>* names, size_t column) {
  field.clear();
  if (!at.at_end() && at.peek() == '"') return read_quoted(at, delimiter, field, names, column);
  while (!at.at_end() && !at.at_line_end() && at.peek() != delimiter) field += at.text[at.pos++];
  if (!at.at_end() && at.peek() == delimiter) {
    ++at.pos;
    return FieldEnd::delimiter;
  }
  return FieldEnd::record;
}

// The next record's fields, skipping lines with no characters; false at the end of the text.
// `first_line` gets the line the record starts on.
bool read_record(Cursor& at, char delimiter, std::vector<std::string>& fields, int64_t& first_line,
                 const std::vector<std::string>* names) {
  while (at.at_line_end()) at.skip_line_end();  // blank lines
  if (at.at_end()) return false;
  first_line = at.line;
  fields.clear();
  for (;;) {
    fields.emplace_back();
    const FieldEnd end = read_field(at, delimiter, fields.back(), names, fields.size() - 1);
    if (end == FieldEnd::record) break;
  }
  if (at.at_line_end()) at.skip_line_end();
  return true;
}

void check_header(const CsvTable& t) {
  int64_t line = t.header_line;  // the line column c starts on
  for (size_t c = 0; c < t.columns.size(); ++c) {
    if (t.columns[c].empty())
      throw std::runtime_error(fmt::format("{}:{}: column {}: the header gives this column no name",
                                           t.source, line, c + 1));
    for (size_t before = 0; before < c; ++before)
      if (t.columns[before] == t.columns[c])
        throw std::runtime_error(
            fmt::format("{}:{}: column {} '{}': the header repeats the name of column {}", t.source,
                        line, c + 1, t.columns[c], before + 1));
    line += line_breaks(t.columns[c]);
  }
}

// A row whose field count is not the header's: names the first missing column or the first
// field past the last column, on the line it is on.
[[noreturn]] void wrong_field_count(const CsvTable& t, const std::vector<std::string>& fields,
                                    int64_t first_line) {
  const size_t have = fields.size(), want = t.columns.size();
  if (have < want) {
    int64_t line = first_line;
    for (const std::string& f : fields) line += line_breaks(f);
    throw std::runtime_error(fmt::format(
        "{}:{}: the row has {} field{}, the header has {} columns: column {} '{}'{} missing",
        t.source, line, have, have == 1 ? "" : "s", want, have + 1, t.columns[have],
        have + 1 < want ? " and after are" : " is"));
  }
  int64_t line = first_line;
  for (size_t c = 0; c < want; ++c) line += line_breaks(fields[c]);
  throw std::runtime_error(
      fmt::format("{}:{}: the row has {} fields, the header has {} columns: field {} ('{}') is "
                  "past the last column '{}'",
                  t.source, line, have, want, want + 1, fields[want], t.columns.back()));
}

}  // namespace

int64_t CsvTable::line(int64_t row, int64_t column) const {
  int64_t line = row_lines[static_cast<size_t>(row)];
  for (int64_t c = 0; c < column; ++c) line += line_breaks(cell(row, c));
  return line;
}

int64_t CsvTable::column_index(std::string_view name) const {
  for (size_t c = 0; c < columns.size(); ++c)
    if (columns[c] == name) return static_cast<int64_t>(c);
  return -1;
}

std::string CsvTable::where(int64_t row, int64_t column) const {
  return fmt::format("{}:{}: {}", source, line(row, column),
                     column_label(&columns, static_cast<size_t>(column)));
}

char csv_delimiter_for(const std::string& path) {
  if (path.size() < 4) return ',';
  std::string ext = path.substr(path.size() - 4);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".tsv" ? '\t' : ',';
}

CsvTable parse_csv(std::string_view text, std::string source, char delimiter) {
  if (delimiter == '"' || delimiter == '\n' || delimiter == '\r')
    throw std::invalid_argument(fmt::format(
        "{}: the delimiter cannot be a quote or a line break (code {})", source, int(delimiter)));
  CsvTable t;
  t.source = std::move(source);
  t.delimiter = delimiter;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // UTF-8 byte-order mark
  if (text.empty())
    throw std::runtime_error(fmt::format(
        "{}: the file is empty (a CSV file needs a header row of column names)", t.source));
  Cursor at{text, 0, 1, t.source};
  if (!read_record(at, delimiter, t.columns, t.header_line, nullptr))
    throw std::runtime_error(fmt::format(
        "{}: no header row (the file has only blank lines; a CSV file needs a header row of "
        "column names)",
        t.source));
  check_header(t);
  std::vector<std::string> fields;
  int64_t first_line = 0;
  while (read_record(at, delimiter, fields, first_line, &t.columns)) {
    if (fields.size() != t.columns.size()) wrong_field_count(t, fields, first_line);
    t.row_lines.push_back(first_line);
    for (std::string& f : fields) t.cells.push_back(std::move(f));
  }
  return t;
}

CsvTable read_csv(const std::string& path, char delimiter) {
  const std::string text = read_file(path);
  return parse_csv(text, path, delimiter ? delimiter : csv_delimiter_for(path));
}

}  // namespace dg
