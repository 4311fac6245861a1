// Escaping, number formats and scalar text shared by every report (see text.h).
#include "tools/attnres/report/text.h"

#include <fmt/format.h>

#include <cmath>

namespace dg {

using json::Value;

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string format_number(double v, Fmt f) {
  if (!std::isfinite(v)) return "n/a";
  switch (f.style) {
    case Style::fixed:
      return fmt::format("{:.{}f}", v, f.digits);
    case Style::sci:
      return fmt::format("{:.{}e}", v, f.digits);
    case Style::signed_sci:
      return fmt::format("{:+.{}e}", v, f.digits);
    case Style::general:
      return fmt::format("{:.{}g}", v, f.digits);
    case Style::integer:
      return fmt::format("{:.0f}", v);
    case Style::signed_percent:
      return fmt::format("{:+.{}f}%", v, f.digits);
  }
  return "n/a";
}

std::optional<std::string> exact_number_text(const Value& v) {
  if (!v.is_number()) return std::nullopt;
  if (v.is_integer()) return fmt::format("{}", v.as_int());
  const double d = v.as_double();
  if (!std::isfinite(d)) return std::nullopt;
  return fmt::format("{}", d);
}

std::string scalar_text(const Value& v) {
  switch (v.kind()) {
    case json::Kind::null:
      return "null";
    case json::Kind::boolean:
      return v.as_bool() ? "true" : "false";
    case json::Kind::number:
      if (v.is_integer()) return fmt::format("{}", v.as_int());
      return std::isfinite(v.as_double()) ? fmt::format("{}", v.as_double()) : "n/a";
    case json::Kind::string:
      return v.as_string();
    case json::Kind::array: {
      std::string s;
      for (const Value& x : v.as_array()) s += (s.empty() ? "" : ", ") + scalar_text(x);
      return s;
    }
    case json::Kind::object:
      return json::dump(v);
  }
  return "";
}

std::string md_cell(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

}  // namespace dg
