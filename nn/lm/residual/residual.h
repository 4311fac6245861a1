// A residual mode as one unit: the interface each mode implements (its parameters, forward,
// incremental decode step and parameter count) and the registry that names the modes. No mode's
// arithmetic lives here (nn/lm/residual/<mode>.cpp), nor the layers every block shares
// (micro_lm.h).
//
// Adding a mode: write nn/lm/residual/<mode>.cpp (a Residual subclass and its make_ function), then
// add its one row to the table in nn/lm/residual/registry.cpp. Everything else (MicroLM, the
// decoder, the memory estimate, the CLI's flags and help, evolve's search space) reads the
// registry.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/tensor.h"

namespace dg {

class MicroLM;
class MicroBlock;
struct MicroLMConfig;
template <class T>
struct DecodeStep;

// How a mode reads depth; evolve's direction rules and the reports group the modes by it.
enum class ResidualFamily {
  plain,              // one residual stream, no routes
  reference_attnres,  // a learned router per block over the earlier blocks' outputs
  paper_attnres,      // every sublayer reads a pseudo-query mixture of the sources
};

// One residual mode's behaviour. Modes hold no state: parameters live on the blocks and the model
// (their names are the checkpoint's keys), so one const object per mode serves every model.
class Residual {
 public:
  virtual ~Residual() = default;

  // Parameters, created and registered in the order the checkpoints and the initialisations
  // expect: per block before the shared layers (attention_norm, attention, ffn_norm, ffn), and
  // for the model after the blocks, before final_norm.
  virtual void add_block_parameters(MicroBlock& block) const { (void)block; }
  virtual void add_model_parameters(MicroLM& model) const { (void)model; }
  // The elements those two register: for block `layer`, and for the model. Counted in double so
  // a memory check on an absurd size does not overflow (exact up to 2^53).
  virtual double block_parameter_count(const MicroLMConfig& c, int64_t layer) const {
    (void)c, (void)layer;
    return 0;
  }
  virtual double model_parameter_count(const MicroLMConfig& c) const {
    (void)c;
    return 0;
  }

  // The residual stream: embedding h0 [B, T, D] -> what final_norm reads [B, T, D].
  virtual Tensor forward(MicroLM& model, const Tensor& h0) const = 0;
  // One block on its own, for modes whose blocks read only earlier blocks' outputs:
  // sources S_0..S_l, each [B, T, D] -> S_{l+1} [B, T, D]. The default refuses.
  virtual Tensor block_forward(MicroBlock& block, const std::vector<Tensor>& sources) const;

  // Incremental decoding (nn/lm/decode.h): how many [n, D] source slots the step uses, and the step
  // on n new rows (slot 0 holds their embedding); returns the rows final_norm reads.
  virtual int64_t decode_slots(const MicroLMConfig& c) const = 0;
  virtual const float* decode(DecodeStep<float>& step) const = 0;
  virtual const double* decode(DecodeStep<double>& step) const = 0;

  // Runs after MicroLM::init_identical's pass by name (rd_attnres copies qk_route into v_route).
  virtual void after_init_identical(MicroLM& model) const { (void)model; }
};

// One row of the registry.
struct ResidualModeInfo {
  const char* name;  // the spelling of JSON, flags and reports
  const char* doc;   // one line, for --help and the docs
  ResidualFamily family;
  bool v_route;                    // V reads its own route (the role-decoupled modes)
  const Residual& (*behaviour)();  // the mode's one object
};
// Every mode, in registry order (the order of --help, evolve's search space and the tests).
const std::vector<ResidualModeInfo>& residual_modes();

// A residual mode: a handle on its registry row, cheap to copy and compare. The default is the
// first row (standard).
class ResidualMode {
 public:
  ResidualMode() = default;
  // Throws std::invalid_argument listing the valid names when `name` is not registered.
  explicit ResidualMode(std::string_view name);
  const ResidualModeInfo& info() const { return residual_modes()[index_]; }
  const char* name() const { return info().name; }
  const Residual& behaviour() const { return info().behaviour(); }
  bool operator==(const ResidualMode&) const = default;

 private:
  size_t index_ = 0;
};

inline ResidualMode residual_mode(std::string_view name) { return ResidualMode(name); }
std::vector<ResidualMode> all_residual_modes();
// "standard, block_attnres, ..." joined by `separator`.
std::string residual_mode_names(std::string_view separator = ", ");
// The modes and their docs, one per line, each line starting with `indent` (for --help).
std::string residual_mode_table(std::string_view indent = "  ");

// Shorthands kept for their readers.
inline const char* residual_mode_name(ResidualMode mode) { return mode.name(); }
ResidualMode parse_residual_mode(const std::string& text);  // throws listing the valid names
inline bool is_reference_attnres(ResidualMode m) {
  return m.info().family == ResidualFamily::reference_attnres;
}
inline bool is_paper_attnres(ResidualMode m) {
  return m.info().family == ResidualFamily::paper_attnres;
}
inline bool has_v_route(ResidualMode m) { return m.info().v_route; }

}  // namespace dg
