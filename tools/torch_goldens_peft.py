#!/usr/bin/python3
# PEFT's LoRA merge in float64, written here from PEFT's published definitions (LoraLayer's
# get_delta_weight: ΔW = transpose(B @ A, fan_in_fan_out) * scaling, scaling = lora_alpha / r, or
# lora_alpha / sqrt(r) with use_rslora; merge adds ΔW to the base layer's weight; GPT-2's Conv1D
# stores its weight [in, out], so fan_in_fan_out transposes B @ A, and c_attn's lora_B is the rows
# of q, k and v stacked). Nothing of peft, transformers or safetensors is imported.
#
# Two modes, run offline from the repository's root with torch 1.13 or later:
#
#   /usr/bin/python3 tools/torch_goldens_peft.py goldens tests/data/peft
#     reads the tiny models of tests/data/hf (tools/hf_goldens.py), writes a small PEFT adapter for
#     each (random nonzero A and B, a few targets, lora_alpha != r) as PEFT writes it
#     (<out>/{llama,gpt2}/adapter_config.json, adapter_model.safetensors) and <out>/<model>-merged
#     .safetensors: for each adapted module, its merged weight applied to two random probe rows,
#     "<module>.probe" [2, in] (float32) and "<module>.merged_output" [2, out] (float64: probe @
#     W_mergedᵀ in the Linear orientation, the module's own output without bias).
#     tests/test_peft.cpp loads each adapter with depthgrad, merges it and compares. Running it
#     again writes the same bytes.
#
#   /usr/bin/python3 tools/torch_goldens_peft.py check ADAPTER_DIR HF_DIR [MERGED_HF_DIR]
#     checks an adapter folder (depthgrad finetune's output directory, or anyone's) against the
#     base model in HF_DIR: its adapter_config.json and keys, shapes and dtypes are PEFT's; then
#     merges it in float64 and, given MERGED_HF_DIR (a Hugging Face folder of the merged model,
#     e.g. `depthgrad export --to hf` of finetune's merged model.safetensors), compares every
#     adapted weight there with the float64 merge (max |difference| printed; fails above 1e-5).
import json
import math
import os
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "F64": torch.float64, "BF16": torch.bfloat16,
          "F16": torch.float16}


# ---- safetensors by hand (8-byte header length, JSON header, bytes)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        raw = bytearray(data[8 + n + begin:8 + n + end])
        dtype = DTYPES[e["dtype"]]
        if dtype == torch.bfloat16:
            t = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16)
        else:
            t = torch.frombuffer(raw, dtype=dtype) if raw else torch.zeros(0, dtype=dtype)
        out[name] = (t.reshape(e["shape"]).clone(), e["dtype"])
    return out, meta


def write_safetensors(path, tensors, metadata=None):
    header = {"__metadata__": metadata} if metadata else {}
    names = sorted(tensors, key=lambda k: (-tensors[k].element_size(), k))  # as the Rust writer
    blobs, offset = [], 0
    for name in names:
        t = tensors[name].contiguous()
        dtype = {torch.float32: "F32", torch.float64: "F64"}[t.dtype]
        data = t.numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def read_hf_weights(d):
    """Every tensor of a Hugging Face folder (one file or shards), as float64."""
    files = [os.path.join(d, "model.safetensors")]
    if not os.path.exists(files[0]):
        with open(os.path.join(d, "model.safetensors.index.json")) as f:
            files = [os.path.join(d, s) for s in sorted(set(json.load(f)["weight_map"].values()))]
    w = {}
    for path in files:
        tensors, _ = read_safetensors(path)
        w.update({k: v.double() for k, (v, _) in tensors.items()})
    return w


# ---- the two classes: PEFT's module names, and where each weight is in the checkpoint


def model_kind(d):
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    arch = c["architectures"][0]
    if arch == "GPT2LMHeadModel":
        return "gpt2", c["n_layer"]
    if arch == "LlamaForCausalLM":
        return "llama", c["num_hidden_layers"]
    raise SystemExit(f"{d}: {arch} is neither GPT2LMHeadModel nor LlamaForCausalLM")


def adaptable_modules(kind, layers):
    """PEFT's module names (under base_model.model.) and whether each is a Conv1D."""
    if kind == "llama":
        return [(f"model.layers.{l}.{m}", False) for l in range(layers)
                for m in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                          "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")]
    return [(f"transformer.h.{l}.{m}", True) for l in range(layers)
            for m in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")]


def checkpoint_weight(w, module):
    """A module's weight as the checkpoint stores it (GPT-2's files drop 'transformer.')."""
    for name in (module + ".weight", module.removeprefix("transformer.") + ".weight"):
        if name in w:
            return w[name]
    raise KeyError(module)


def matches(module, target):  # PEFT's check_target_module_exists for a list of names
    return module == target or module.endswith("." + target)


def merged_weight(w_base, a, b, scale, conv1d):
    """PEFT's merge: W + transpose(B @ A, fan_in_fan_out) * scaling, in float64."""
    delta = b.double() @ a.double()
    return w_base + (delta.T if conv1d else delta) * scale


def scaling(config):
    r, alpha = config["r"], config["lora_alpha"]
    return alpha / math.sqrt(r) if config.get("use_rslora") else alpha / r


# ---- goldens


def peft_config(base, r, alpha, dropout, targets, conv1d, rslora):
    """adapter_config.json as PEFT 0.15's save_pretrained writes it (sorted keys, indent 2)."""
    return {"alpha_pattern": {}, "auto_mapping": None, "base_model_name_or_path": base,
            "bias": "none", "corda_config": None, "eva_config": None, "exclude_modules": None,
            "fan_in_fan_out": conv1d, "inference_mode": True, "init_lora_weights": True,
            "layer_replication": None, "layers_pattern": None, "layers_to_transform": None,
            "loftq_config": {}, "lora_alpha": alpha, "lora_bias": False,
            "lora_dropout": dropout, "megatron_config": None, "megatron_core": "megatron.core",
            "modules_to_save": None, "peft_type": "LORA", "r": r, "rank_pattern": {},
            "revision": None, "target_modules": targets, "task_type": "CAUSAL_LM",
            "trainable_token_indices": None, "use_dora": False, "use_rslora": rslora}


def write_golden(hf_dir, out, name, r, alpha, targets, rslora):
    kind, layers = model_kind(hf_dir)
    w = read_hf_weights(hf_dir)
    modules = [(m, conv) for m, conv in adaptable_modules(kind, layers)
               if any(matches(m, t) for t in targets)]
    config = peft_config(f"tests/data/hf/{name}", r, alpha, 0.05, targets, kind == "gpt2", rslora)
    adapter, golden = {}, {}
    for module, conv1d in modules:
        base = checkpoint_weight(w, module)
        fan_in = base.shape[0] if conv1d else base.shape[1]
        fan_out = base.shape[1] if conv1d else base.shape[0]
        a = torch.randn(r, fan_in) * 0.1
        b = torch.randn(fan_out, r) * 0.1
        adapter[f"base_model.model.{module}.lora_A.weight"] = a
        adapter[f"base_model.model.{module}.lora_B.weight"] = b
        merged = merged_weight(base, a, b, scaling(config), conv1d)
        linear = merged.T if conv1d else merged  # [out, in]: the module's output is probe @ Wᵀ
        probe = torch.randn(2, fan_in) * 0.25
        golden[f"{module}.probe"] = probe
        golden[f"{module}.merged_output"] = probe.double() @ linear.T
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "adapter_config.json"), "w") as f:
        f.write(json.dumps(config, indent=2, sort_keys=True))  # PEFT writes no final newline
    write_safetensors(os.path.join(d, "adapter_model.safetensors"), adapter, {"format": "pt"})
    write_safetensors(os.path.join(out, f"{name}-merged.safetensors"), golden)


def goldens(out):
    torch.manual_seed(0)
    # Llama: q and v in both layers, down_proj in layer 1 only (a suffix with the layer's index).
    write_golden("tests/data/hf/llama", out, "llama", 4, 12,
                 ["q_proj", "v_proj", "layers.1.mlp.down_proj"], False)
    # GPT-2: c_attn (q, k, v: one A, B stacked), c_proj (attn.c_proj and mlp.c_proj alike),
    # rsLoRA's scale alpha / sqrt(r).
    write_golden("tests/data/hf/gpt2", out, "gpt2", 2, 6, ["c_attn", "c_proj"], True)


# ---- checking an adapter folder


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def check(adapter_dir, hf_dir, merged_dir=None):
    kind, layers = model_kind(hf_dir)
    with open(os.path.join(adapter_dir, "adapter_config.json")) as f:
        config = json.load(f)
    for key, want in (("peft_type", "LORA"), ("task_type", "CAUSAL_LM"), ("bias", "none"),
                      ("use_dora", False), ("modules_to_save", None), ("rank_pattern", {}),
                      ("alpha_pattern", {}), ("layers_to_transform", None),
                      ("fan_in_fan_out", kind == "gpt2")):
        if config.get(key) != want:
            fail(f"adapter_config.json: {key} is {config.get(key)!r}, PEFT's here is {want!r}")
    tensors, meta = read_safetensors(os.path.join(adapter_dir, "adapter_model.safetensors"))
    if meta != {"format": "pt"}:
        fail(f"adapter_model.safetensors: metadata {meta}, PEFT writes {{'format': 'pt'}}")
    w = read_hf_weights(hf_dir)
    merged_w = read_hf_weights(merged_dir) if merged_dir else None
    modules = [(m, conv) for m, conv in adaptable_modules(kind, layers)
               if any(matches(m, t) for t in config["target_modules"])]
    expected, r, worst = set(), config["r"], 0.0
    for module, conv1d in modules:
        base = checkpoint_weight(w, module)
        fan_in, fan_out = (base.shape[0], base.shape[1]) if conv1d else (base.shape[1], base.shape[0])
        ka, kb = (f"base_model.model.{module}.lora_{x}.weight" for x in "AB")
        expected |= {ka, kb}
        for key, shape in ((ka, [r, fan_in]), (kb, [fan_out, r])):
            if key not in tensors:
                fail(f"adapter_model.safetensors: {key} is missing")
            if list(tensors[key][0].shape) != shape or tensors[key][1] != "F32":
                fail(f"{key}: {tensors[key][1]} {list(tensors[key][0].shape)}, expected F32 {shape}")
        merged = merged_weight(base, tensors[ka][0], tensors[kb][0], scaling(config), conv1d)
        line = f"{module}: |ΔW| max {float((merged - base).abs().max()):.6g}"
        if merged_w is not None:
            diff = float((checkpoint_weight(merged_w, module) - merged).abs().max())
            worst = max(worst, diff)
            line += f", depthgrad's merged weight differs by {diff:.3g}"
        print(line)
    extra = set(tensors) - expected
    if extra:
        fail(f"adapter_model.safetensors: {sorted(extra)[0]} is no adapted module's")
    if worst > 1e-5:
        fail(f"the merged weights differ from the float64 merge by {worst:.3g}")
    print(f"OK: {len(modules)} modules, r={r}, scale {scaling(config):.6g}"
          + (f", merged weights within {worst:.3g}" if merged_dir else ""))


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "goldens":
        goldens(sys.argv[2] if len(sys.argv) > 2 else "tests/data/peft")
    elif len(sys.argv) in (4, 5) and sys.argv[1] == "check":
        check(*sys.argv[2:])
    else:
        raise SystemExit(__doc__ or "usage: torch_goldens_peft.py goldens [OUT] | "
                         "check ADAPTER_DIR HF_DIR [MERGED_HF_DIR]")
