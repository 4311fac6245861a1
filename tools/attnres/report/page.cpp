// The page shell and the stylesheet shared by every report page (see page.h).
#include "tools/attnres/report/page.h"

#include <algorithm>

namespace dg {

// Latin text in DejaVu Sans where installed, else the system UI font; Chinese in whichever CJK
// font the system has (Noto/Source Han on Linux, PingFang on macOS, YaHei on Windows).
const char* const kReportFontStack =
    "'DejaVu Sans', system-ui, -apple-system, 'Segoe UI', 'Noto Sans CJK SC', 'Noto Sans SC', "
    "'Source Han Sans SC', 'PingFang SC', 'Hiragino Sans GB', 'Microsoft YaHei', "
    "'WenQuanYi Micro Hei', sans-serif";

const std::string& report_stylesheet() {
  static const std::string css = std::string(R"(
:root{color-scheme:light}
body{margin:0;background:#eef0f3;color:#1d2330;font:15px/1.5 )") +
                                 kReportFontStack + R"(}
main{max-width:1080px;margin:0 auto;padding:22px 30px 40px;background:#fff;min-height:100vh}
h1{font-size:26px;margin:0 0 2px}
h2{font-size:19px;margin:30px 0 10px;padding-bottom:4px;border-bottom:1px solid #e3e6eb}
h3{font-size:15px;margin:16px 0 6px}
p{margin:6px 0 10px;max-width:900px}
.meta{color:#5b6475;font-size:13px;margin-bottom:12px}
.banner{border-left:4px solid #c9a227;background:#fff8e1;padding:7px 12px;margin:8px 0;font-size:14px}
.banner.tier{border-color:#4e79a7;background:#eef3fa}
blockquote{margin:8px 0;padding:6px 12px;border-left:4px solid #c8ccd4;background:#f7f8fa;font-size:16px}
table{border-collapse:collapse;margin:8px 0 12px;font-size:14px}
th,td{border:1px solid #dde1e7;padding:4px 10px;text-align:left;vertical-align:top}
th{background:#f3f4f7;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.na{color:#8a8f99}
th .sub{display:block;font-weight:400;font-size:12px;color:#5b6475;white-space:normal}
.table-wrap{max-width:100%;overflow-x:auto;margin:8px 0 12px}
.table-wrap>table{margin:0}
td.seedlist{white-space:normal;max-width:560px}
td.seedlist span.num{font-weight:400;display:inline-block;margin-right:.5em}
table.main td,table.main th{font-size:15px;padding:6px 14px}
tr.champion td{background:#fff6d5}
tr.failed td{color:#b23b3b}
code,.mono{font-family:'DejaVu Sans Mono',ui-monospace,'Noto Sans Mono CJK SC',monospace;font-size:12.5px}
.hash{word-break:break-all}
.figrow{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}
figure{margin:6px 0}
figcaption{font-size:13px;color:#5b6475;max-width:640px;margin-top:2px}
svg.chart{border:1px solid #e3e6eb;border-radius:4px;max-width:100%;height:auto;display:block;font-family:inherit}
details{margin:8px 0}
summary{cursor:pointer;color:#35507a}
.better{color:#2e7d32;font-weight:600}
.worse{color:#b23b3b;font-weight:600}
ul{margin:6px 0 10px;padding-left:22px}
table.kv th{white-space:nowrap}
span.num{font-variant-numeric:tabular-nums;font-weight:600}
footer{margin-top:28px;color:#8a8f99;font-size:12px}
)";
  return css;
}

std::string wrap_tables(const std::string& html) {
  std::string out;
  out.reserve(html.size() + 64);
  size_t at = 0;
  for (;;) {
    const size_t open = html.find("<table", at), close = html.find("</table>", at);
    const size_t next = std::min(open, close);
    if (next == std::string::npos) break;
    out.append(html, at, next - at);
    if (next == open) {
      out += "<div class=\"table-wrap\"><table";
      at = open + 6;
    } else {
      out += "</table></div>";
      at = close + 8;
    }
  }
  return out.append(html, at, std::string::npos);
}

std::string render_page(const PageShell& shell, const std::string& body_html) {
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  h += "<title>" + html_escape(shell.title) + " — depthgrad " + html_escape(shell.command) +
       "</title>\n<style>" + report_stylesheet() + "</style>\n</head>\n<body>\n<main>\n";
  h += "<header>\n<h1>" + html_escape(shell.title) + "</h1>\n";
  h += "<div class=\"meta\">depthgrad " + html_escape(shell.command) +
       (shell.meta_html.empty() ? "" : " · " + shell.meta_html) + "</div>\n</header>\n";
  h += wrap_tables(body_html);
  h += "<footer>Rendered from result.json by depthgrad " + html_escape(shell.version) + "." +
       (shell.footer_html.empty() ? "" : " " + shell.footer_html) + "</footer>\n";
  h += "</main>\n</body>\n</html>\n";
  return h;
}

}  // namespace dg
