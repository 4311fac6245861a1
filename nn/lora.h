// LoRA (low-rank adapters, PEFT's LoraLayer on a Linear): a frozen base Linear plus a trainable
// low-rank update, y = x·Wᵀ + b + scale · B(A(dropout(x))), A [r, in], B [out, r], scale = alpha /
// r (alpha / √r with rsLoRA). lora::apply adds adapters to the Linears of any Module (a MicroLM, an
// imported Hugging Face model, a user's Sequential) by PEFT's name matching and freezes every other
// parameter; merge folds the adapters into the weights (for export, and plain fused paths again),
// unmerge takes them out again. Cached decoding (nn/lm/decode.h) adds an unmerged adapter's term
// itself, so generation is right either way. Not here: PEFT's files (train/lm/peft.h), adapters on
// other layer kinds (embeddings, convolutions), several named adapters on one layer, DoRA and the
// other variants.
//
//   dg::MicroLM model(config);                       // or imported: train/lm/hf_model.h
//   dg::lora::Options lora{.targets = {"q", "v"}, .r = 8, .alpha = 16};
//   dg::lora::Summary s = dg::lora::apply(model, lora);  // before any optimiser or Trainer
//   // s.adapted = {"blocks.0.attention.q", "blocks.0.attention.v", ...}; s.trainable counts A, B
//   dg::AdamW opt(model, {.lr = 1e-3});              // AdamW over the adapters only
//   ... train; then dg::lora::merge(model) before export or cached decoding (either works)
//
// The adapter lives in its Linear (Linear::lora, nn/layers.h): the adapted Linear registers the
// children "lora_A" (Linear(in, r), no bias) and "lora_B" (Linear(r, out), no bias), and
// "lora_dropout" (Dropout) when dropout > 0, so the parameter names read like PEFT's in-memory
// ones without the adapter name: "blocks.0.attention.q.lora_A.weight". Its weight and bias keep
// their names ("blocks.0.attention.q.weight", where PEFT says "q.base_layer.weight").
//
// Initialisation, as PEFT's init_lora_weights=True: lora_A and lora_B are built as Linears (each
// draws torch's default kaiming-uniform init from dg::default_generator(), as PEFT's nn.Linear
// does), then A is drawn again with kaiming_uniform_(a = √5), U(−1/√in, 1/√in), and B is zeroed.
// So the default generator advances as PEFT's does, and an adapter's output is zero at init.
//
// Frozen parameters: apply sets requires_grad false on every parameter of the model that is not an
// adapter's A or B (an adapter added by an earlier apply stays trainable). The flat buffers
// (Module::flat_parameters()) hold only parameters that require grad, so an optimiser, the
// Trainer's clipping, gradient reduction over ranks and its checkpoints' optimiser state see the
// adapters only, and the base keeps its own storage, never written. Adapters must therefore be
// added before flat_parameters() is made (before any optimiser or Trainer): refused otherwise.
//
// Differences from PEFT: with dropout on a shared adapter (apply_shared), each member draws its
// own dropout mask (PEFT's fused c_attn draws one); the scale multiplies A's output [.., r] before
// B rather than B's output [.., out] (the same product, rounded differently in float32); unmerge
// subtracts the same ΔW that merge added (as PEFT does), which restores W to within the rounding
// of the add: every element within 1 ulp of max(|W|, |W + ΔW|), and bit for bit when ΔW is 0.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nn/layers.h"

namespace dg {

// A Linear built with its adapter (for a model assembled directly): Linear(in, out, bias) and then
// lora::attach with these settings. The base weight and bias are frozen (requires_grad false).
class LoRALinear : public Linear {
 public:
  LoRALinear(int64_t in_features, int64_t out_features, int64_t r, double alpha, double dropout = 0,
             bool use_rslora = false, bool bias = true, DType dtype = get_default_dtype());
};

namespace lora {

struct Options {
  // Module names: a Linear named N is a target when N == t or N ends with "." + t, for some t
  // (PEFT's matching of a list of target_modules): "q" adapts every "blocks.<i>.attention.q".
  std::vector<std::string> targets;
  int64_t r = 8;            // the rank, > 0
  double alpha = 8;         // PEFT's lora_alpha
  double dropout = 0;       // on the adapter's input, in [0, 1); 0: no lora_dropout child
  bool use_rslora = false;  // scale alpha / √r instead of alpha / r
};

// What apply / apply_shared did: the adapted Linears' names (module order) and the model's
// trainable and total parameter counts afterwards (distinct tensors, as parameter_count()).
struct Summary {
  std::vector<std::string> adapted;
  int64_t trainable = 0, total = 0;
};

// The scale an adapter of these settings gets: alpha / r, or alpha / √r with use_rslora.
double scale_of(const Options& options);

// Adds an adapter to every Linear of `model` whose name matches a target, then freezes every
// parameter that is not an adapter's. Refuses, before changing anything (std::invalid_argument
// naming it): a target that matches no module, a matching module that is not a Linear, a Linear
// that already has an adapter, r < 1, alpha not finite, dropout outside [0, 1), no targets, and a
// model whose flat_parameters() were already made (std::logic_error).
Summary apply(Module& model, const Options& options);

// GPT-2's fused c_attn: one adapter over several Linears of `model` that read the same input
// (`linear_names`: full module names, e.g. "blocks.0.attention.q", ".k", ".v"), with ONE shared A
// and each member's own B (PEFT's lora_B of c_attn is the members' B stacked in this order). The
// first member registers lora_A (and lora_dropout); the others use it without registering it
// again, so it is one parameter. options.targets is not read. Then freezes as apply does. Refuses
// as apply does, and a name given twice, members with different in_features or dtypes, or fewer
// than one name.
Summary apply_shared(Module& model, const std::vector<std::string>& linear_names,
                     const Options& options);

// Adds one adapter to `linear` (A drawn as above, B zero); `share_a_of`: an adapted Linear whose
// A (and dropout) this adapter uses instead of registering its own (apply_shared's later members).
// Freezes nothing; `name` is for messages. The building block of apply and LoRALinear.
void attach(Linear& linear, const std::string& name, const Options& options,
            const Linear* share_a_of = nullptr);

// W += scale · B·A on every adapted Linear (no autograd), which then computes the plain linear
// (Linear::plain() is true again unless something else keeps it false). Refuses (naming it) an
// adapter already merged and a model with no adapter, before changing anything.
void merge(Module& model);
// W −= scale · B·A: undoes merge. Refuses an adapter that is not merged, and a model with none.
void unmerge(Module& model);

// The Linears of `model` that carry an adapter, with their names, in module order.
std::vector<std::pair<std::string, Linear*>> adapted_linears(Module& model);

// Sets requires_grad false on every parameter of `model` that is not an adapter's A or B, true on
// those; returns the trainable and total counts (apply and apply_shared end with it).
Summary freeze_base(Module& model);

}  // namespace lora
}  // namespace dg
