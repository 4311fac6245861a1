// depthgrad's language model, built on the framework (<depthgrad/depthgrad.h>, included here):
// the MicroLM with its residual modes (Block AttnRes, RD-AttnRes, ...), its K/V-cached decoder,
// generation from any causal LM, its run configuration and presets, training it through the
// framework's Trainer, the byte-level BPE tokenizer and text corpora, and the Hugging Face and
// GGUF interop. Installed as <depthgrad/lm.h>; link the target depthgrad::lm (installed package,
// FetchContent or add_subdirectory; pkg-config: depthgrad-lm). The framework never includes it.
#pragma once

#include "depthgrad/depthgrad.h"

// The model: dg::MicroLM model(dg::MicroLMConfig{}); model.init_identical(42);
#include "nn/lm/micro_lm.h"
// Generation from any causal language model: a CausalLM (the MicroLM's K/V-cached Decoder, any
// full forward in a RecomputingCausalLM, or your own), sampled by generate_tokens.
//   dg::Decoder lm(model); auto r = dg::generate_tokens(lm, prompt_ids, {.max_new_tokens = 50});
#include "nn/lm/causal_lm.h"
#include "nn/lm/decode.h"
#include "train/lm/generate.h"
// The MicroLM's run settings and presets, and its training through dg::Trainer.
#include "train/lm/micro_lm_training.h"
#include "train/lm/run_config.h"
// The byte-level BPE tokenizer (train, save/load tokenizer.json, encode, decode).
#include "train/lm/text/bpe.h"
