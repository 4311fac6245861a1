// The one HTML page shell and the one stylesheet of every depthgrad report: reproduce's
// report.html and evolve's index.html. The shell is the head (charset, viewport, title, the
// stylesheet), a header (title and a meta line), the body its caller renders, and a footer naming
// the depthgrad version that rendered it. Offline: no scripts, no external fonts or files; the font
// stack ends in CJK-capable system fonts, so Chinese text (evolve's directions) renders. It does
// not render results (report/html.cpp, evolve/render.cpp do).
#pragma once
#include <string>

#include "tools/attnres/report/text.h"

namespace dg {

// The CSS font-family list of the pages (single quotes only, so it fits in an attribute too).
extern const char* const kReportFontStack;
// The stylesheet every page embeds.
const std::string& report_stylesheet();

struct PageShell {
  std::string title;        // plain text: the <h1>, and "<title> — depthgrad <command>"
  std::string command;      // "reproduce" | "evolve"
  std::string meta_html;    // the header's second line, after "depthgrad <command> · " (HTML)
  std::string version;      // the depthgrad version that wrote the result (provenance.version)
  std::string footer_html;  // after "Rendered from result.json by depthgrad <version>." (HTML)
};
// Every <table> of `html` inside a <div class="table-wrap">, which scrolls sideways when the
// table is wider than the page instead of running off it (render_page applies it to every body).
std::string wrap_tables(const std::string& html);
// <!DOCTYPE html> … <header> … </header> body_html <footer> … </footer> … </html>
std::string render_page(const PageShell& shell, const std::string& body_html);

}  // namespace dg
