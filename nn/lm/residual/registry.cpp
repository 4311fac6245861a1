// The registry of residual modes: one row per mode (name, one-line doc, family, the mode's
// object), and the name <-> mode lookups. Adding a mode adds its row here; nothing else in this
// file changes. The modes' arithmetic is in their own files.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "nn/lm/residual/residual.h"

namespace dg {

// Each mode file defines its make_ function (nn/lm/residual/<mode>.cpp).
const Residual& make_standard();
const Residual& make_block_attnres();
const Residual& make_rd_attnres();
const Residual& make_paper_block_attnres();
const Residual& make_paper_rd_attnres();

const std::vector<ResidualModeInfo>& residual_modes() {
  using F = ResidualFamily;
  static const std::vector<ResidualModeInfo> table{
      {"standard", "pre-norm LLaMA block: x = c + Attn(N(c)); y = x + FFN(N(x))", F::plain, false,
       make_standard},
      {"block_attnres", "reference AttnRes: one learned route over earlier blocks feeds Q, K, V",
       F::reference_attnres, false, make_block_attnres},
      {"rd_attnres", "role-decoupled AttnRes: a second route for V", F::reference_attnres, true,
       make_rd_attnres},
      {"paper_block_attnres", "paper AttnRes: every sublayer reads a pseudo-query mixture",
       F::paper_attnres, false, make_paper_block_attnres},
      {"paper_rd_attnres", "paper AttnRes with a second pseudo-query for V", F::paper_attnres, true,
       make_paper_rd_attnres},
  };
  return table;
}

ResidualMode::ResidualMode(std::string_view name) {
  const std::vector<ResidualModeInfo>& modes = residual_modes();
  for (size_t i = 0; i < modes.size(); ++i)
    if (name == modes[i].name) {
      index_ = i;
      return;
    }
  std::string expected = residual_mode_names();  // "a, b, c" -> "a, b or c"
  if (const size_t last = expected.rfind(", "); last != std::string::npos)
    expected.replace(last, 2, " or ");
  throw std::invalid_argument(
      fmt::format("unknown residual mode '{}' (expected {})", name, expected));
}

ResidualMode parse_residual_mode(const std::string& text) { return ResidualMode(text); }

std::vector<ResidualMode> all_residual_modes() {
  std::vector<ResidualMode> out;
  for (const ResidualModeInfo& m : residual_modes()) out.emplace_back(m.name);
  return out;
}

std::string residual_mode_names(std::string_view separator) {
  std::string out;
  for (const ResidualModeInfo& m : residual_modes())
    out += (out.empty() ? "" : std::string(separator)) + m.name;
  return out;
}

std::string residual_mode_table(std::string_view indent) {
  size_t width = 0;
  for (const ResidualModeInfo& m : residual_modes()) width = std::max(width, std::strlen(m.name));
  std::string out;
  for (const ResidualModeInfo& m : residual_modes())
    out += fmt::format("{}{:<{}}  {}\n", indent, m.name, width, m.doc);
  return out;
}

Tensor Residual::block_forward(MicroBlock&, const std::vector<Tensor>&) const {
  throw std::logic_error(
      "this residual mode runs its blocks from MicroLM::forward (they read the model's sources), "
      "not one at a time through MicroBlock::forward");
}

}  // namespace dg
