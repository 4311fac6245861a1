// Report renderers: the reference's report.md table and banners, depthgrad's sections, and an HTML
// page whose tags balance, that loads nothing, and whose every data-value is the result.json
// number. Inputs are trimmed copies of real results (tests/data/report_parity.json,
// report_paired.json).
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "tools/attnres/report.h"
#include "tools/attnres/report/lookup.h"
#include "train/io/files.h"
#include "train/io/json.h"

using namespace dg;

namespace {

json::Value load_sample(const std::string& name) {
  const std::string path = std::string(DG_SOURCE_DIR) + "/tests/data/" + name;
  return json::parse(read_file(path), path);
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size()))
    ++n;
  return n;
}

// A whole word (case-insensitive, not inside a longer run of letters), e.g. "nan" but not
// "finance".
bool has_word(const std::string& text, const std::string& word) {
  std::string lower(text.size(), ' ');
  std::transform(text.begin(), text.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  for (size_t at = lower.find(word); at != std::string::npos; at = lower.find(word, at + 1)) {
    const bool left = at == 0 || !std::isalpha(static_cast<unsigned char>(lower[at - 1]));
    const bool right = at + word.size() >= lower.size() ||
                       !std::isalpha(static_cast<unsigned char>(lower[at + word.size()]));
    if (left && right) return true;
  }
  return false;
}

// Every element that opens closes, in order (void elements and "/>" excepted). Returns "" when
// balanced, else a description of the first problem.
std::string tag_balance_problem(const std::string& html) {
  static const std::set<std::string> void_tags{"meta", "br", "hr", "img", "input", "link", "wbr"};
  std::vector<std::string> stack;
  size_t i = 0;
  while ((i = html.find('<', i)) != std::string::npos) {
    const size_t close = html.find('>', i);
    if (close == std::string::npos) return "unterminated tag at byte " + std::to_string(i);
    const std::string tag = html.substr(i + 1, close - i - 1);
    i = close + 1;
    if (tag.empty() || tag[0] == '!') continue;
    if (tag == "style") {  // skip the stylesheet's text
      i = html.find("</style>", i);
      if (i == std::string::npos) return "unterminated <style>";
      i += 8;
      continue;
    }
    const bool closing = tag[0] == '/';
    const size_t name_start = closing ? 1 : 0;
    const size_t name_end = tag.find_first_of(" \t\n/", name_start);
    const std::string name = tag.substr(
        name_start, name_end == std::string::npos ? std::string::npos : name_end - name_start);
    if (closing) {
      if (stack.empty() || stack.back() != name)
        return "</" + name + "> closes " + (stack.empty() ? "nothing" : "<" + stack.back() + ">");
      stack.pop_back();
    } else if (tag.back() != '/' && !void_tags.count(name)) {
      stack.push_back(name);
    }
  }
  return stack.empty() ? "" : "<" + stack.back() + "> never closed";
}

// The test's own path resolver (independent of the renderer's): "a.b[2].c".
const json::Value* resolve(const json::Value& root, const std::string& path) {
  const json::Value* v = &root;
  size_t i = 0;
  while (v && i < path.size()) {
    if (path[i] == '.') {
      ++i;
    } else if (path[i] == '[') {
      const size_t close = path.find(']', i);
      const size_t index = std::stoul(path.substr(i + 1, close - i - 1));
      if (!v->is_array() || index >= v->size()) return nullptr;
      v = &v->at(index);
      i = close + 1;
    } else {
      size_t end = path.find_first_of(".[", i);
      if (end == std::string::npos) end = path.size();
      v = v->is_object() ? v->find(path.substr(i, end - i)) : nullptr;
      i = end;
    }
  }
  return v;
}

std::string attribute(const std::string& tag, const std::string& name) {
  const size_t at = tag.find(" " + name + "=\"");
  if (at == std::string::npos) return "";
  const size_t start = at + name.size() + 3;
  return tag.substr(start, tag.find('"', start) - start);
}

// Checks every element carrying data-json/data-value against result.json: the attribute is the
// exact JSON number, and the displayed text is that number rounded (half a unit in its last
// shown digit). Returns how many were checked.
size_t check_data_values(const std::string& html, const json::Value& result) {
  size_t checked = 0;
  std::set<std::string> ids;
  for (size_t at = html.find("data-json=\""); at != std::string::npos;
       at = html.find("data-json=\"", at + 1)) {
    const size_t open = html.rfind('<', at), end = html.find('>', at);
    const std::string tag = html.substr(open, end - open);
    const std::string path = attribute(tag, "data-json"), value = attribute(tag, "data-value"),
                      id = attribute(tag, "id");
    INFO("element: " << tag);
    const json::Value* v = resolve(result, path);
    REQUIRE(v != nullptr);
    REQUIRE(v->is_number());
    CHECK(std::strtod(value.c_str(), nullptr) == v->as_double());
    CHECK_FALSE(id.empty());
    CHECK(ids.insert(id).second);  // ids are unique
    // Displayed text, e.g. "5.7570", "+0.11%", "+1.674e-06", "139904".
    std::string text = html.substr(end + 1, html.find('<', end) - end - 1);
    INFO("text: " << text);
    text.erase(
        std::remove_if(text.begin(), text.end(), [](char c) { return c == '%' || c == ','; }),
        text.end());
    const size_t e = text.find_first_of("eE");
    const std::string mantissa = text.substr(0, e);
    const size_t dot = mantissa.find('.');
    const int decimals = dot == std::string::npos ? 0 : static_cast<int>(mantissa.size() - dot - 1);
    const int exponent = e == std::string::npos ? 0 : std::atoi(text.c_str() + e + 1);
    const double shown = std::strtod(text.c_str(), nullptr);
    CHECK(std::abs(shown - v->as_double()) <= 0.5000001 * std::pow(10.0, exponent - decimals));
    ++checked;
  }
  return checked;
}

void check_page(const std::string& html, const json::Value& result) {
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(tag_balance_problem(html) == "");
  CHECK(count(html, "<svg") == count(html, "</svg>"));
  CHECK(count(html, "<svg") >= 4);
  CHECK_FALSE(has_word(html, "nan"));
  CHECK_FALSE(has_word(html, "inf"));
  CHECK_FALSE(has_word(html, "infinity"));
  // Self-contained: no scripts, no external resources.
  for (const char* banned : {"<script", "src=", "<link", "@import", "url(", "href=\"http"}) {
    INFO("banned: " << banned);
    CHECK_FALSE(has(html, banned));
  }
  CHECK_FALSE(has(html, "LLaMA"));
  CHECK(render_reproduce_html(result) == html);  // deterministic
}

}  // namespace

TEST_CASE("html_escape escapes the five special characters") {
  CHECK(html_escape("<a href=\"x\">Tom & Jerry's</a>") ==
        "&lt;a href=&quot;x&quot;&gt;Tom &amp; Jerry&#39;s&lt;/a&gt;");
  CHECK(html_escape("plain – text") == "plain – text");
  CHECK(html_escape("") == "");
}

TEST_CASE("parity report: the reference's report.md table, banners and depthgrad's sections") {
  const json::Value r = load_sample("report_parity.json");
  const std::string md = render_reproduce_markdown(r);
  CHECK(md.rfind("# Role-Decoupled Attention Residuals\n", 0) == 0);
  CHECK(has(md,
            "\n> Reproduction fidelity: **core mechanism reproduction**. Missing core: 120M/343M "
            "pretraining scale, paper training corpus.\n"));
  CHECK(has(md,
            "\n> Evaluation tier: **L2 public-dataset training**. Claim policy: single/few-seed "
            "smoke result; do not claim a stable improvement.\n"));
  CHECK(has(md, "Public data: WikiText-2; 30 steps per variant; seed 42."));
  CHECK(has(
      md,
      "\n| Variant | LM loss | Perplexity | Parameters |\n|---|---:|---:|---:|\n"
      "| block_attnres | 5.7570 | 316.41 | 139904 |\n| rd_attnres | 5.7631 | 318.33 | 140096 |\n"));
  CHECK(has(md,
            "Relative to the same-budget block_attnres baseline, on the LM loss over the "
            "reference's validation windows: LM loss +0.11%, perplexity +0.61%."));
  CHECK_FALSE(has(md, "LLaMA"));
  // JS: the reference statistic and per layer.
  CHECK(has(md, "block_attnres 0.0000000000, rd_attnres 0.0048934821"));
  CHECK(has(md, "| 1 | 0.009787 | 0.011517 | 0.004248 | 0.011312 | 0.018407 | 0.032092 |"));
  // Clipped steps (5 and 6 of 30).
  CHECK(has(md, "| 42 | block_attnres | 30 | 5 | 6.1880 | 5.8226 | 0.84 |"));
  CHECK(has(md, "| 42 | rd_attnres | 30 | 6 |"));
  // Against the reference's recorded values, with deltas.
  CHECK(has(md, "| block_attnres | lm_loss | 5.7570388168 | 5.7570390701 | +2.533e-07 |"));
  CHECK(has(
      md, "| rd_attnres | qk_v_route_js_divergence | 0.0048934901 | 0.0048934821 | -8.036e-09 |"));
  CHECK_FALSE(has(md, "## Paired statistics"));
  CHECK(has(md, "- `instruction_loss`: The Stanford Alpaca instruction set"));
  CHECK(has(md, "| compiler | GNU 12.2.0 |"));
  CHECK(has(md,
            "| dataset_sha256 `wikitext-2/valid.txt` | "
            "`f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8` |"));
  CHECK_FALSE(has_word(md, "nan"));

  const std::string html = render_reproduce_html(r);
  check_page(html, r);
  CHECK(has(html,
            "<td class=\"num\" id=\"baseline-lm_loss\" data-json=\"baseline.lm_loss\" "
            "data-value=\"5.7570390701293945\">5.7570</td>"));
  CHECK(has(html,
            "id=\"baseline-parameters\" data-json=\"baseline.parameters\" "
            "data-value=\"139904\">139904</td>"));
  CHECK(has(html, "id=\"relative-perplexity_percent\""));
  CHECK(
      has(html, "data-json=\"reference_recorded.rd_attnres.lm_loss\" data-value=\"5.7630852014\""));
  CHECK(check_data_values(html, r) >= 30);
}

TEST_CASE(
    "paired report: per-seed table, wins, CI and p-values; heatmaps fall back to training routes") {
  const json::Value r = load_sample("report_paired.json");
  const std::string md = render_reproduce_markdown(r);
  CHECK(has(md,
            "| block_attnres | 5.8408 | 344.08 | 5.8376 | 193536 |\n| rd_attnres | 5.8408 | 344.08 "
            "| 5.8376 | "
            "193920 |\n"));
  CHECK(has(md, "3 seeds (1, 2, 3), table values are means over seeds"));
  CHECK(has(md, "## Paired statistics"));
  CHECK(has(md, "Metric: full validation NLL (nats/token)."));
  CHECK(has(md, "| Seed | block_attnres | rd_attnres | Difference | Lower |"));
  CHECK(has(md, "| 1 | 5.846434 | 5.846435 | +1.099e-06 | block_attnres |"));
  CHECK(has(md, "| 3 | 5.832437 | 5.832439 | +1.670e-06 | block_attnres |"));
  CHECK(has(md, "- rd_attnres wins: 0 of 3 (ties: 0)"));
  CHECK(has(md, "- Mean difference: +1.674e-06 nats/token"));
  CHECK(has(md, "- 95% CI of the mean difference: [+2.401e-07, +3.108e-06]"));
  CHECK(has(md, "- Paired t-test: t = 5.023, two-sided p = 0.03743"));
  CHECK(has(md, "- Exact sign test: two-sided p = 0.25"));
  CHECK_FALSE(has(md, "Against the reference's recorded values"));
  CHECK(has(md, "| Layer | Mean over seeds | Std over seeds | Per seed |"));
  CHECK(has(md, "| 1 | 0.002797 | 0.002555 | 0.001476, 0.005742, 0.001174 |"));

  const std::string html = render_reproduce_html(r);
  check_page(html, r);
  CHECK(has(html, "data-json=\"paired.differences_method_minus_baseline[2]\""));
  CHECK(has(html, "data-json=\"seed_results[1].rd_attnres.full_validation_lm_loss\""));
  CHECK(has(html, "data-json=\"paired.ci95[0]\""));
  CHECK(has(html, "Routes on the validation windows, seed 1"));
  CHECK(has(html, "Routes on the last training batch, seed 3"));  // seed 3 has no validation routes
  // Losses: 3 faint seeds and a mean per arm; differences: 3 faint seeds and their mean.
  CHECK(count(html, "<polyline") == 12);
  CHECK(has(html, "class=\"bar pos\""));
  CHECK(check_data_values(html, r) >= 40);
}

TEST_CASE("reports escape text and show non-finite numbers as n/a") {
  json::Value r = load_sample("report_parity.json");
  r["paper"]["title"] = "<script>alert('x')</script> & co";
  r["baseline"]["lm_loss"] = std::numeric_limits<double>::quiet_NaN();  // in memory only
  r["method"]["perplexity"] = std::numeric_limits<double>::infinity();
  r["omitted"]["x"] = "a < b";
  r["setup"]["note"] = "a | b";
  const std::string md = render_reproduce_markdown(r);
  CHECK(has(md, "| block_attnres | n/a | 316.41 | 139904 |"));
  CHECK(has(md, "| rd_attnres | 5.7631 | n/a | 140096 |"));
  CHECK(has(md, "| note | a \\| b |"));  // a '|' must not end the Markdown cell
  const std::string html = render_reproduce_html(r);
  CHECK(tag_balance_problem(html) == "");
  CHECK_FALSE(has(html, "<script"));
  CHECK(has(html, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; co"));
  CHECK(has(html, "a &lt; b"));
  CHECK_FALSE(has_word(html, "nan"));
  CHECK_FALSE(has_word(html, "inf"));
  CHECK_FALSE(has(html, "data-json=\"baseline.lm_loss\""));  // no data-value for a NaN
  CHECK_FALSE(has(html, "data-json=\"method.perplexity\""));
  CHECK(has(html, "data-json=\"method.lm_loss\" data-value=\"5.76308536529541\""));
}

// Removes `key` from the object at `parent` (a path of object keys separated by '.').
void erase_key(json::Value& root, const std::string& parent, const std::string& key) {
  json::Value* v = &root;
  for (size_t at = 0; at < parent.size();) {
    const size_t dot = std::min(parent.find('.', at), parent.size());
    v = &(*v)[parent.substr(at, dot - at)];
    at = dot + 1;
  }
  json::Object kept;  // json::Object keeps references stable, so it has no erase: rebuild it
  for (const auto& [k, value] : v->as_object())
    if (k != key) kept.emplace_back(k, value);
  *v = json::Value(std::move(kept));
}

TEST_CASE("a missing or mistyped key in result.json is an error naming it, never a silent n/a") {
  const json::Value sample = load_sample("report_parity.json");
  // A key the renderers need, removed: both renderings throw, naming the path and the keys there.
  json::Value r = sample;
  erase_key(r, "baseline", "lm_loss");
  for (auto render : {render_reproduce_markdown, render_reproduce_html})
    CHECK_THROWS_WITH_AS(render(r),
                         doctest::Contains("'baseline.lm_loss': 'baseline' has no key 'lm_loss' "
                                           "(its keys: name, lm_loss_std"),
                         std::runtime_error);
  // A mistyped section name: the first read below it fails.
  r = sample;
  r["relativ"] = r.at("relative");
  erase_key(r, "", "relative");
  CHECK_THROWS_WITH_AS(render_reproduce_markdown(r),
                       doctest::Contains("the result has no key 'relative' (its keys: "),
                       std::runtime_error);
  // A value of the wrong kind.
  r = sample;
  r["method"]["parameters"] = "140096";
  CHECK_THROWS_WITH_AS(render_reproduce_html(r),
                       doctest::Contains("'method.parameters': is string, not a number"),
                       std::runtime_error);
  // Optional parts may be absent: a parity result has no paired statistics, and a run without
  // --eval full has no full-validation loss.
  CHECK_FALSE(has(render_reproduce_markdown(sample), "## Paired statistics"));
}

TEST_CASE("lookup: required reads throw naming the path, optional reads only the last step") {
  const json::Value r = load_sample("report_paired.json");
  CHECK(number_at(r, "seed_results[1].rd_attnres.full_validation_lm_loss") ==
        r.at("seed_results")
            .at(size_t{1})
            .at("rd_attnres")
            .at("full_validation_lm_loss")
            .as_double());
  CHECK(string_at(r, "paired.metric") == "full validation NLL (nats/token)");
  CHECK(numbers_at(r, "paired.ci95").size() == 2);
  CHECK(matrix_at(r, "seed_results[0].rd_attnres.routes_validation.mean_alpha_qk").size() == 3);
  CHECK_THROWS_WITH_AS(number_at(r, "seed_results[7].seed"),
                       doctest::Contains("'seed_results[7].seed': 'seed_results' has 3 elements, "
                                         "no [7]"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(number_at(r, "paired.metric"), doctest::Contains("is string, not a number"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(value_at(r, "paired.ci95.low"),
                       doctest::Contains("'paired.ci95' is array, not an object with key 'low'"),
                       std::runtime_error);
  // Optional: nothing when the last step is absent ...
  CHECK(optional_value_at(r, "reference_recorded") == nullptr);
  CHECK(optional_value_at(r, "paired.ci95[2]") == nullptr);
  CHECK_FALSE(optional_number_at(r, "baseline.no_such_number").has_value());
  CHECK(optional_number_at(r, "paired.n") == 3.0);
  // ... but a missing step before it is still an error (a mistyped parent is not "absent").
  CHECK_THROWS_WITH_AS(optional_value_at(r, "pairedd.n"),
                       doctest::Contains("the result has no key 'pairedd'"), std::runtime_error);
  CHECK_THROWS_AS(optional_number_at(r, "paired.metric"), std::runtime_error);  // wrong kind
}

TEST_CASE("svg_line_chart: axes, legend, gaps at NaN, a note when there is no data") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::string svg =
      svg_line_chart("Loss <a&b>", "step", "loss",
                     {{"block", {3.0, 2.5, nan, 2.0, 1.8}, ""}, {"rd", {3.1, 2.4}, "#ff0000"}});
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(tag_balance_problem(svg) == "");
  CHECK(has(svg, "Loss &lt;a&amp;b&gt;"));
  CHECK(count(svg, "<polyline") == 3);  // block splits at the NaN into two runs
  CHECK(has(svg, "stroke=\"#ff0000\""));
  CHECK(has(svg, ">block</text>"));
  CHECK(has(svg, ">rd</text>"));
  CHECK(has(svg, ">step</text>"));
  CHECK_FALSE(has_word(svg, "nan"));
  CHECK(svg ==
        svg_line_chart("Loss <a&b>", "step", "loss",
                       {{"block", {3.0, 2.5, nan, 2.0, 1.8}, ""}, {"rd", {3.1, 2.4}, "#ff0000"}}));
  for (const std::string& empty : {svg_line_chart("t", "x", "y", {}),
                                   svg_line_chart("t", "x", "y", {{"a", {nan, nan}, ""}})}) {
    CHECK(has(empty, "no data"));
    CHECK(tag_balance_problem(empty) == "");
  }
  // A constant series and a single point still draw.
  const std::string flat =
      svg_line_chart("flat", "x", "y", {{"a", {1.0, 1.0, 1.0}, ""}, {"b", {2.0}, ""}});
  CHECK(count(flat, "<polyline") == 1);
  CHECK(count(flat, "<circle") == 1);
  CHECK_FALSE(has_word(flat, "nan"));
}

TEST_CASE("svg_bar_chart: negative bars hang from the zero line") {
  const std::string svg =
      svg_bar_chart("diffs", {"seed 1", "seed 2", "seed 3"},
                    {0.5, -0.25, std::numeric_limits<double>::quiet_NaN()}, "nats");
  CHECK(tag_balance_problem(svg) == "");
  const size_t z = svg.find("class=\"zero\"");
  REQUIRE(z != std::string::npos);
  const double zero_y = std::stod(attribute(svg.substr(z - 1, svg.find('>', z) - z + 1), "y1"));
  const size_t neg = svg.find("class=\"bar neg\""), pos = svg.find("class=\"bar pos\"");
  REQUIRE(neg != std::string::npos);
  REQUIRE(pos != std::string::npos);
  const std::string neg_tag = svg.substr(neg - 1, svg.find('>', neg) - neg + 1),
                    pos_tag = svg.substr(pos - 1, svg.find('>', pos) - pos + 1);
  CHECK(std::stod(attribute(neg_tag, "y")) == doctest::Approx(zero_y).epsilon(1e-3));
  CHECK(std::stod(attribute(pos_tag, "y")) + std::stod(attribute(pos_tag, "height")) ==
        doctest::Approx(zero_y).epsilon(1e-3));
  // The positive bar is twice as tall as the negative one.
  CHECK(std::stod(attribute(pos_tag, "height")) ==
        doctest::Approx(2 * std::stod(attribute(neg_tag, "height"))).epsilon(0.02));
  CHECK(has(svg, ">n/a</text>"));
  CHECK(has(svg, ">-0.25</text>"));
  CHECK(has(svg_bar_chart("none", {}, {}, "y"), "no data"));
}

TEST_CASE("svg_heatmap: value labels, ragged rows, colour scale") {
  const std::string svg = svg_heatmap("routes", {"layer 0", "layer 1"}, {"emb", "B0"},
                                      {{1.0}, {0.3094, std::numeric_limits<double>::quiet_NaN()}});
  CHECK(tag_balance_problem(svg) == "");
  CHECK(has(svg, ">1.00</text>"));
  CHECK(has(svg, ">0.31</text>"));
  CHECK(has(svg, ">n/a</text>"));
  CHECK(has(svg, ">layer 1</text>"));
  CHECK(has(svg, ">B0</text>"));
  CHECK(has(svg, "fill=\"#08306b\""));       // 1.0 is the darkest colour
  CHECK(count(svg, "height=\"10\"") == 10);  // the ten colour-scale swatches
  CHECK_FALSE(has_word(svg, "nan"));
  CHECK(has(svg_heatmap("empty", {}, {}, {}), "no data"));
}

TEST_CASE("the reproduce page is the shared page shell with the one stylesheet") {
  const std::string html = render_reproduce_html(load_sample("report_parity.json"));
  const size_t style = html.find("<style>"), style_end = html.find("</style>");
  REQUIRE(style != std::string::npos);
  CHECK(html.substr(style + 7, style_end - style - 7) == report_stylesheet());
  CHECK(count(html, "<style") == 1);
  CHECK(has(html, "<title>Role-Decoupled Attention Residuals — depthgrad reproduce</title>"));
  CHECK(has(html,
            "<header>\n<h1>Role-Decoupled Attention Residuals</h1>\n<div class=\"meta\">"
            "depthgrad reproduce · protocol <b>parity</b>"));
  CHECK(has(html, "<footer>Rendered from result.json by depthgrad 0.1.0."));
  // The shell itself: escaped title, CJK-capable fonts, nothing fetched.
  PageShell shell{"比较 <A&B>", "evolve", "run x", "9.9", "note"};
  const std::string page = render_page(shell, "<p>body</p>\n");
  CHECK(page.rfind("<!DOCTYPE html>\n<html lang=\"en\">", 0) == 0);
  CHECK(has(page, "<title>比较 &lt;A&amp;B&gt; — depthgrad evolve</title>"));
  CHECK(has(page,
            "<div class=\"meta\">depthgrad evolve · run x</div>\n</header>\n<p>body</p>\n"
            "<footer>Rendered from result.json by depthgrad 9.9. note</footer>"));
  CHECK(tag_balance_problem(page) == "");
  CHECK(has(report_stylesheet(), kReportFontStack));
  CHECK(has(kReportFontStack, "'Noto Sans CJK SC'"));
  CHECK(has(kReportFontStack, "'Microsoft YaHei'"));
  CHECK_FALSE(has(report_stylesheet(), "url("));
}

namespace {

// The sample paired result (3 seeds) grown or shrunk to n seeds: seeds cycle through the sample's,
// each seed's losses shifted so the seeds differ, and the rd arm's losses equal to the block arm's
// for the first 5 steps and lower from step 5 on (as with identical initialisation).
json::Value with_seeds(const json::Value& sample, size_t n) {
  json::Value r = sample;
  const json::Array& source = sample.at("seed_results").as_array();
  json::Array seeds;
  json::Array diffs;
  for (size_t i = 0; i < n; ++i) {
    json::Value s = source[i % source.size()];
    s["seed"] = static_cast<int64_t>(i + 1);
    json::Array block, rd;
    for (const json::Value& v : s.at("block_attnres").at("training").at("losses").as_array()) {
      const double loss = v.as_double() + 0.01 * static_cast<double>(i);
      block.emplace_back(loss);
      rd.emplace_back(rd.size() < 5 ? loss : loss - 0.002 * static_cast<double>(i + 1));
    }
    s["block_attnres"]["training"]["losses"] = json::Value(std::move(block));
    s["rd_attnres"]["training"]["losses"] = json::Value(std::move(rd));
    diffs.emplace_back(s.at("rd_attnres").at("full_validation_lm_loss").as_double() -
                       s.at("block_attnres").at("full_validation_lm_loss").as_double());
    seeds.push_back(std::move(s));
  }
  r["seed_results"] = json::Value(std::move(seeds));
  r["paired"]["n"] = static_cast<int64_t>(n);
  r["paired"]["differences_method_minus_baseline"] = json::Value(std::move(diffs));
  json::Array layers;
  for (const json::Value& layer : sample.at("paired").at("validation_js_per_layer").as_array()) {
    json::Value l = layer;
    json::Array per_seed;
    const json::Array& values = layer.at("per_seed").as_array();
    for (size_t i = 0; i < n; ++i) per_seed.push_back(values[i % values.size()]);
    l["per_seed"] = json::Value(std::move(per_seed));
    layers.push_back(std::move(l));
  }
  r["paired"]["validation_js_per_layer"] = json::Value(std::move(layers));
  return r;
}

// The <svg> element whose aria-label starts with `title`.
std::string chart(const std::string& html, const std::string& title) {
  const size_t at = html.find("aria-label=\"" + title);
  if (at == std::string::npos) return "";
  const size_t open = html.rfind("<svg", at);
  return html.substr(open, html.find("</svg>", at) + 6 - open);
}

// The <table> … </table> that contains `part`.
std::string table_with(const std::string& html, const std::string& part) {
  const size_t at = html.find(part);
  if (at == std::string::npos) return "";
  const size_t open = html.rfind("<table", at);
  return html.substr(open, html.find("</table>", at) + 8 - open);
}

}  // namespace

TEST_CASE("paired page at 1, 6 and 10 seeds: arm means with bands, one legend entry per arm") {
  const json::Value sample = load_sample("report_paired.json");
  for (size_t n : {size_t{1}, size_t{6}, size_t{10}}) {
    CAPTURE(n);
    const json::Value r = with_seeds(sample, n);
    const std::string html = render_reproduce_html(r);
    check_page(html, r);
    // Training loss: the legend names the two arms only, whatever the number of seeds.
    const std::string loss = chart(html, "Training loss per step");
    REQUIRE_FALSE(loss.empty());
    CHECK(count(loss, "class=\"legend-entry\"") == 2);
    CHECK(count(loss, "class=\"band\"") == (n > 1 ? 2u : 0u));          // min–max band per arm
    CHECK(count(loss, "<g class=\"faint\">") == (n > 1 ? 2 * n : 0u));  // each seed, faint
    if (n > 1) CHECK(has(loss, "mean of " + std::to_string(n) + " seeds, band min–max"));
    // The difference rd − block: its 95% interval over seeds, and where the arms part.
    const std::string diff = chart(html, "Training loss difference per step");
    REQUIRE_FALSE(diff.empty());
    CHECK(count(diff, "class=\"band\"") == (n > 1 ? 1u : 0u));
    CHECK(count(diff, "class=\"legend-entry\"") == 1);
    CHECK(has(html, "bit-identical for the first 5 steps and differ from step 5 on"));
    // The per-seed differences with the mean and (several seeds) its confidence interval.
    const std::string bars = chart(html, "rd_attnres − block_attnres per seed");
    REQUIRE_FALSE(bars.empty());
    CHECK(count(bars, "class=\"bar ") == n);
    CHECK(count(bars, "class=\"reference-line\"") == 1);
    CHECK(count(bars, "class=\"reference-band\"") == (n > 1 ? 1u : 0u));
    // Per-layer JS: error bars over seeds, and a table whose width does not grow with the seeds.
    const std::string js = chart(html, "Validation JS per layer");
    const size_t layers = sample.at("paired").at("validation_js_per_layer").size();
    CHECK(count(js, "class=\"error-bar\"") == (n > 1 ? layers : 0u));
    const std::string js_table = table_with(html, "Validation mean over seeds");
    CHECK(count(js_table.substr(0, js_table.find("</tr>")), "<th") == 4);
    CHECK(count(js_table, "data-json=\"paired.validation_js_per_layer[0].per_seed[") == n);
    // Every table sits in a container that scrolls sideways instead of running off the page.
    CHECK(count(html, "<table") == count(html, "<div class=\"table-wrap\"><table"));
    CHECK(count(html, "</table></div>") == count(html, "<table"));
  }
}

TEST_CASE("paired headline: the relative change is in the paired statistics' metric, named") {
  const json::Value r = load_sample("report_paired.json");
  const std::string md = render_reproduce_markdown(r);
  CHECK(has(md,
            "Relative to the same-budget block_attnres baseline, on the full validation NLL "
            "(nats/token) (the paired statistics' metric; mean over 3 seeds): +0.000029% NLL"));
  CHECK(has(md, "On the LM loss column (32 validation windows of 64 tokens), the same comparison"));
  CHECK(has(md,
            "LM loss and perplexity: 32 validation windows of 64 tokens; validation NLL: every "
            "window of the validation split; means over seeds."));
  const std::string html = render_reproduce_html(r);
  const size_t relative = html.find("<p class=\"relative\">");
  REQUIRE(relative != std::string::npos);
  const std::string line = html.substr(relative, html.find("</p>", relative) - relative);
  CHECK(has(line, "data-json=\"paired.relative_percent\""));
  CHECK(has(line, "data-json=\"paired.perplexity_relative_percent\""));
  CHECK_FALSE(has(line, "data-json=\"relative.lm_loss_percent\""));  // the 32-window number
  CHECK(has(html, "<p class=\"relative-windows\">On the LM loss column"));
  // Every loss column names what it was computed on.
  CHECK(has(html, "LM loss<span class=\"sub\">32 validation windows of 64 tokens</span>"));
  CHECK(has(html, "Validation NLL<span class=\"sub\">every window of the validation split</span>"));
  CHECK(has(html, "Initial loss<span class=\"sub\">mean of the first 10 training batches"));
  // The mean over seeds, not the first seed's value.
  CHECK(has(html, "data-json=\"baseline.full_validation_lm_loss\""));
  CHECK(number_at(r, "baseline.full_validation_lm_loss") !=
        number_at(r, "seed_results[0].block_attnres.full_validation_lm_loss"));
  // Without paired statistics (parity), the headline stays on the LM loss and says so.
  const std::string parity = render_reproduce_markdown(load_sample("report_parity.json"));
  CHECK(has(parity,
            "Relative to the same-budget block_attnres baseline, on the LM loss over the "
            "reference's validation windows: LM loss +0.11%, perplexity +0.61%."));
}

TEST_CASE("svg_line_chart: bands, faint lines, and a legend only for what carries a label") {
  Series mean("block (mean)", {3.0, 2.5, 2.0}, "#2f6db5");
  mean.band_lo = {2.8, 2.4, 1.9};
  mean.band_hi = {3.2, 2.7, 2.2};
  Series faint("", {3.2, 2.7, 2.2}, "#2f6db5");
  faint.faint = true;
  Series faint_labelled("seed 1", {2.8, 2.4, 1.9}, "#2f6db5");
  faint_labelled.faint = true;
  const std::string svg = svg_line_chart("t", "step", "loss", {faint, faint_labelled, mean});
  CHECK(tag_balance_problem(svg) == "");
  CHECK(count(svg, "class=\"band\"") == 1);
  CHECK(count(svg, "<g class=\"faint\">") == 2);
  CHECK(count(svg, "class=\"legend-entry\"") == 1);  // faint lines have no legend entry
  CHECK_FALSE(has(svg, ">seed 1</text>"));
  // The band comes before (under) the mean line, the faint lines before the band.
  CHECK(svg.find("class=\"faint\"") < svg.find("class=\"band\""));
  CHECK(svg.find("class=\"band\"") < svg.rfind("<polyline"));
  // x ticks are whole steps even for a short series (no "0.5").
  CHECK_FALSE(has(svg, ">0.5</text>"));
  CHECK_FALSE(has(svg, ">1.5</text>"));
}

TEST_CASE("svg_bar_chart: error bars and a reference band, named in the legend") {
  BarErrors errors;
  errors.lo = {0.4, -0.3, kNoValue};
  errors.hi = {0.6, -0.2, kNoValue};
  errors.label = "±1 sd";
  ReferenceBand band;
  band.at = 0.1;
  band.lo = -0.05;
  band.hi = 0.25;
  band.label = "mean and 95% CI";
  const std::string svg =
      svg_bar_chart("d", {"a", "b", "c"}, {0.5, -0.25, 0.1}, "nats", 640, 280, errors, band);
  CHECK(tag_balance_problem(svg) == "");
  CHECK(count(svg, "class=\"error-bar\"") == 2);  // none for the third bar
  CHECK(count(svg, "class=\"reference-band\"") == 1);
  CHECK(count(svg, "class=\"reference-line\"") == 1);
  CHECK(count(svg, "class=\"legend-entry\"") == 2);
  CHECK(has(svg, ">±1 sd</text>"));
  CHECK(has(svg, ">mean and 95% CI</text>"));
  // Without extras: no legend at all.
  CHECK_FALSE(has(svg_bar_chart("d", {"a"}, {1.0}, "y"), "legend-entry"));
}

TEST_CASE("svg_interval_chart: points with error bars on a numeric or log axis") {
  IntervalSeries effect;
  effect.label = "rd − block";
  effect.line = IntervalLine::straight;
  effect.points = {{1.4e5, -0.01, -0.02, 0.0, "micro"},
                   {2.1e6, -0.02, -0.03, -0.01, "small"},
                   {8.5e7, -0.03, -0.05, -0.01, "base"}};
  IntervalChartOptions o;
  o.log_x = true;
  o.error_bar_label = "95% CI over seeds";
  o.zero_line = true;
  const std::string svg = svg_interval_chart("effect vs size", "parameters", "Δ NLL", {effect}, o);
  CHECK(tag_balance_problem(svg) == "");
  CHECK(count(svg, "class=\"error-bar\"") == 3);
  CHECK(count(svg, "class=\"point\"") == 3);
  CHECK(count(svg, "class=\"legend-entry\"") == 2);
  CHECK(has(svg, ">1e+06</text>") + has(svg, ">1.00e+06</text>") >= 1);  // decade ticks
  CHECK(has(svg, "<title>small</title>"));
  // Integer x: generation ticks are whole numbers.
  IntervalSeries gens;
  gens.label = "champion";
  gens.points = {{0, 5.0, kNoValue, kNoValue, ""},
                 {1, 4.9, kNoValue, kNoValue, ""},
                 {2, 4.85, kNoValue, kNoValue, ""}};
  IntervalChartOptions integer;
  integer.integer_x = true;
  const std::string g = svg_interval_chart("lineage", "generation", "NLL", {gens}, integer);
  CHECK(has(g, ">1</text>"));
  CHECK_FALSE(has(g, ">0.5</text>"));
  CHECK_FALSE(has(g, "class=\"error-bar\""));
  CHECK(has(svg_interval_chart("none", "x", "y", {}), "no data"));
}
