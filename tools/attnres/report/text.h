// Text helpers every report shares (reproduce's and evolve's, Markdown and HTML): escaping for
// HTML and for Markdown table cells, the number formats of tables, and JSON scalars as text. It
// reads no results (report/lookup.h does) and builds no pages (report/page.h does).
#pragma once
#include <optional>
#include <string>

#include "train/io/json.h"

namespace dg {

// Escapes &, <, >, " and ' for HTML/SVG text.
std::string html_escape(const std::string& text);
// Text for a Markdown table cell: '|' would end the cell.
std::string md_cell(const std::string& text);

// Number formats of report tables.
enum class Style { fixed, sci, signed_sci, general, integer, signed_percent };
struct Fmt {
  Style style;
  int digits = 0;
};
// "n/a" for NaN and infinities (a value that exists but is not a number to show).
std::string format_number(double v, Fmt f);
// The exact text of a JSON number (shortest round-trip form), for data-value attributes; nothing
// for non-finite values.
std::optional<std::string> exact_number_text(const json::Value& v);
// A scalar as text (strings as-is, arrays of scalars joined by ", ", non-finite numbers "n/a").
std::string scalar_text(const json::Value& v);

}  // namespace dg
