// Weights and training checkpoints in safetensors (see checkpoint.h).
#include "train/checkpoint.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <set>

#include "autograd/tape.h"
#include "tensor/exercise.h"

namespace dg {

namespace {
const char* safetensors_dtype_of(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "F32";
    case DType::f64:
      return "F64";
    case DType::i32:
      return "I32";
    case DType::i64:
      return "I64";
    case DType::b8:
      return "BOOL";
    case DType::u8:
      return "U8";
  }
  throw std::logic_error("safetensors_dtype_of: unknown dtype");
}

TensorEntry entry_from(const std::string& name, const Tensor& t) {
  TensorEntry e;
  e.name = name;
  e.dtype = safetensors_dtype_of(t.dtype());
  e.shape = t.shape();
  Tensor c = t.contiguous();
  const size_t bytes = static_cast<size_t>(c.numel()) * dtype_size(c.dtype());
  e.bytes.resize(bytes);
  std::memcpy(e.bytes.data(),
              static_cast<const char*>(c.storage()->data()) + c.offset() * dtype_size(c.dtype()),
              bytes);
  return e;
}

// A tensor holding the entry's values in `dtype` (F32/F64 accepted and converted).
Tensor tensor_from(const TensorEntry& e, const std::string& path) {
  DType src;
  if (e.dtype == "F32")
    src = DType::f32;
  else if (e.dtype == "F64")
    src = DType::f64;
  else
    throw std::runtime_error(
        fmt::format("{}: tensor '{}' has dtype {}, expected F32 or F64", path, e.name, e.dtype));
  Tensor t = Tensor::empty(e.shape, src);
  std::memcpy(t.storage()->data(), e.bytes.data(), e.bytes.size());
  return t;
}

// A tensor holding the entry's values in its own dtype (F32, F64, I32, I64, BOOL, U8).
Tensor tensor_as_stored(const TensorEntry& e, const std::string& path) {
  DType dtype;
  if (e.dtype == "F32")
    dtype = DType::f32;
  else if (e.dtype == "F64")
    dtype = DType::f64;
  else if (e.dtype == "I32")
    dtype = DType::i32;
  else if (e.dtype == "I64")
    dtype = DType::i64;
  else if (e.dtype == "BOOL")
    dtype = DType::b8;
  else if (e.dtype == "U8")
    dtype = DType::u8;
  else
    throw std::runtime_error(fmt::format(
        "{}: tensor '{}' has dtype {}; depthgrad tensors are F32, F64, I32, I64, BOOL or U8", path,
        e.name, e.dtype));
  Tensor t = Tensor::empty(e.shape, dtype);
  if (dtype == DType::b8) {  // a byte other than 0 or 1 is not a C++ bool: nonzero reads true
    bool* out = t.data<bool>();
    for (size_t i = 0; i < e.bytes.size(); ++i) out[i] = e.bytes[i] != 0;
  } else if (!e.bytes.empty()) {
    std::memcpy(t.storage()->data(), e.bytes.data(), e.bytes.size());
  }
  return t;
}

// Weights and moments must be finite (and second moments >= 0): a NaN read from a file would
// otherwise come out as `loss nan` or poison the next optimizer step without an error.
void check_finite(const Tensor& t, const std::string& path, const std::string& name,
                  bool non_negative) {
  const int64_t n = t.numel();
  auto scan = [&](const auto* data) {
    for (int64_t i = 0; i < n; ++i) {
      const double x = static_cast<double>(data[i]);
      if (!std::isfinite(x) || (non_negative && x < 0))
        throw std::runtime_error(fmt::format(
            "{}: tensor '{}' holds {} at element {}: {}", path, name, x, i,
            non_negative ? "expected finite values >= 0" : "a model's values must be finite"));
    }
  };
  if (t.dtype() == DType::f32)
    scan(t.data<float>());
  else if (t.dtype() == DType::f64)
    scan(t.data<double>());
}

// The model's state dict: its parameters and persistent buffers (I64 for an integer buffer such as
// BatchNorm's num_batches_tracked), in torch's state_dict order.
std::vector<TensorEntry> weight_entries(const std::vector<NamedTensor>& state) {
  std::vector<TensorEntry> out;
  for (auto& [name, p] : state) out.push_back(entry_from(name, p));
  return out;
}

// What a training checkpoint holds of the model: its state dict less the frozen parameters
// (requires_grad false: a LoRA run's base), which the caller rebuilds before loading.
std::vector<NamedTensor> training_state(const Module& model) {
  std::set<const TensorImpl*> frozen;
  for (auto& [name, p] : model.named_parameters())
    if (!p.requires_grad()) frozen.insert(p.impl());
  std::vector<NamedTensor> state = model.state_dict();
  std::erase_if(state, [&](const NamedTensor& e) { return frozen.count(e.second.impl()) > 0; });
  return state;
}
// The parameters that train (the optimiser's slots), in named_parameters() order.
std::vector<NamedTensor> trainable_parameters(const Module& model) {
  std::vector<NamedTensor> out = model.named_parameters();
  std::erase_if(out, [](const NamedTensor& e) { return !e.second.requires_grad(); });
  return out;
}

// Checks every tensor of `state` (parameters and persistent buffers) against the file before
// anything is copied. A floating tensor takes F32 or F64 (converted on copy), an integer buffer I32
// or I64.
std::vector<std::pair<Tensor, Tensor>> match_weights(const SafetensorsFile& file,
                                                     const std::vector<NamedTensor>& state,
                                                     const std::string& path,
                                                     const std::string& prefix) {
  std::vector<std::pair<Tensor, Tensor>> pairs;
  for (auto& [name, p] : state) {
    const TensorEntry* e = file.find(prefix + name);
    if (!e) throw std::runtime_error(fmt::format("{}: missing tensor '{}'", path, prefix + name));
    if (e->shape != p.shape())
      throw std::runtime_error(fmt::format("{}: tensor '{}' has shape {}, the model expects {}",
                                           path, prefix + name, shape_str(e->shape),
                                           shape_str(p.shape())));
    if (!is_floating(p.dtype())) {
      Tensor stored = tensor_as_stored(*e, path);
      if (is_floating(stored.dtype()))
        throw std::runtime_error(fmt::format("{}: tensor '{}' is {}, the model's buffer is {}",
                                             path, prefix + name, e->dtype, dtype_name(p.dtype())));
      pairs.emplace_back(p, stored);
      continue;
    }
    pairs.emplace_back(p, tensor_from(*e, path));
    check_finite(pairs.back().second, path, prefix + name, false);
  }
  return pairs;
}
}  // namespace

void save_tensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                  const std::map<std::string, std::string>& metadata) {
  std::vector<TensorEntry> entries;
  entries.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    if (!t.defined())
      throw std::invalid_argument(
          fmt::format("save_tensors: {}: tensor '{}' is undefined", path, name));
    entries.push_back(entry_from(name, t));
  }
  save_safetensors(path, entries, metadata);  // refuses duplicate and reserved names
}

std::vector<NamedTensor> load_tensors(const std::string& path) {
  SafetensorsFile file = load_safetensors(path);
  std::vector<NamedTensor> out;
  out.reserve(file.tensors.size());
  for (const TensorEntry& e : file.tensors) out.emplace_back(e.name, tensor_as_stored(e, path));
  return out;
}

void save_weights(const std::string& path, const Module& model,
                  const std::map<std::string, std::string>& metadata) {
  std::map<std::string, std::string> meta = metadata;
  meta.emplace("format", "pt");
  save_safetensors(path, weight_entries(model.state_dict()), meta);
}

std::map<std::string, std::string> load_weights(const std::string& path, Module& model) {
  return load_weights(load_safetensors(path), path, model);
}

std::map<std::string, std::string> load_weights(const SafetensorsFile& file,
                                                const std::string& path, Module& model) {
  auto pairs = match_weights(file, model.state_dict(), path, "");
  // Unknown tensors mean the file belongs to another model (a training checkpoint's optimizer
  // and state sections are expected extras, not model tensors).
  const auto named = model.state_dict();
  for (const TensorEntry& e : file.tensors) {
    if (e.name.rfind("optimizer.", 0) == 0 || e.name.rfind("state.", 0) == 0) continue;
    bool ok = false;
    for (auto& [name, p] : named) ok = ok || name == e.name;
    if (!ok)
      throw std::runtime_error(fmt::format(
          "{}: unexpected tensor '{}' (not a parameter or buffer of this model)", path, e.name));
  }
  NoGradGuard no_grad;
  for (auto& [param, value] : pairs) param.copy_from(value);
  return file.metadata;
}

DG_EXERCISE OptimizerState optimizer_state(FlatOptimizer& optimizer) {
  return OptimizerState{optimizer.name(), optimizer.element_state(), optimizer.scalar_state()};
}

namespace {
// Where a scalar of the optimiser is stored. The step count keeps its historic key.
std::string scalar_key(const std::string& name) {
  return name == "step" ? "depthgrad.optimizer_step" : "depthgrad.optimizer." + name;
}
// A per-parameter view of a flat state tensor: parameters are views into the flat buffer, so
// their offset is their slot's.
Tensor slot_view(const Tensor& flat, const Tensor& parameter) {
  return Tensor::from_storage(flat.storage(), parameter.shape(),
                              contiguous_strides(parameter.shape()), parameter.offset(),
                              flat.dtype());
}
}  // namespace

void save_training_checkpoint(const std::string& path, const Module& model,
                              const OptimizerState& optimizer, const TrainingState& state) {
  std::vector<TensorEntry> entries = weight_entries(training_state(model));
  auto named = trainable_parameters(model);
  // The state is flat; slice it per parameter in registry order (the optimizer's slot order).
  for (auto& [name, p] : named)
    for (const auto& [state_name, flat] : optimizer.elements)
      entries.push_back(entry_from("optimizer." + state_name + "." + name, slot_view(flat, p)));
  for (auto& [key, blob] : state.blobs) {
    TensorEntry e;
    e.name = "state." + key;
    e.dtype = "U8";
    e.shape = {static_cast<int64_t>(blob.size())};
    e.bytes = blob;
    entries.push_back(std::move(e));
  }
  std::map<std::string, std::string> meta = state.metadata;
  meta["depthgrad.optimizer"] = optimizer.name;
  for (const auto& [name, value] : optimizer.scalars)
    meta[scalar_key(name)] = std::to_string(value);
  meta["format"] = "pt";
  save_safetensors(path, entries, meta);
}

TrainingState load_training_checkpoint(const std::string& path, Module& model,
                                       FlatOptimizer& optimizer) {
  if (optimizer.shard_begin() != 0 || !optimizer.flat_parameters() ||
      optimizer.shard_end() != optimizer.flat_parameters()->total)
    throw std::invalid_argument(fmt::format(
        "{}: load_training_checkpoint needs an unsharded optimiser over the flat buffers", path));
  OptimizerState state = optimizer_state(optimizer);
  TrainingState out = load_training_checkpoint(load_safetensors(path), path, model, state);
  optimizer.set_scalar_state(state.scalars);
  return out;
}

TrainingState load_training_checkpoint(const SafetensorsFile& file, const std::string& path,
                                       Module& model, OptimizerState& optimizer) {
  {
    auto it = file.metadata.find("depthgrad.optimizer");
    const std::string saved = it == file.metadata.end() ? "AdamW" : it->second;
    if (saved != optimizer.name)
      throw std::runtime_error(
          fmt::format("{}: the checkpoint was written with optimizer '{}', this run uses '{}'",
                      path, saved, optimizer.name));
  }
  auto weights = match_weights(file, training_state(model), path, "");
  std::vector<std::pair<Tensor, Tensor>> states;
  for (auto& [name, p] : trainable_parameters(model)) {
    for (const auto& [state_name, flat] : optimizer.elements) {
      const std::string key = "optimizer." + state_name + "." + name;
      const TensorEntry* e = file.find(key);
      if (!e)
        throw std::runtime_error(
            fmt::format("{}: missing tensor '{}' (not a training checkpoint?)", path, key));
      if (e->shape != p.shape())
        throw std::runtime_error(fmt::format("{}: tensor '{}' has shape {}, expected {}", path, key,
                                             shape_str(e->shape), shape_str(p.shape())));
      states.emplace_back(slot_view(flat, p), tensor_from(*e, path));
      // Averages and sums of squares (Adam's, RMSprop's, Adagrad's) are >= 0; any state must be
      // finite.
      const bool squares =
          state_name == "exp_avg_sq" || state_name == "square_avg" || state_name == "sum";
      check_finite(states.back().second, path, key, squares);
    }
  }
  // Every tensor is a weight, one of its optimizer states or a state blob: anything else means a
  // checkpoint of another model (the same rule load_weights applies to weights files).
  {
    std::set<std::string> known;
    for (auto& [name, t] : training_state(model)) known.insert(name);
    for (auto& [name, p] : trainable_parameters(model))
      for (const auto& [state_name, flat] : optimizer.elements)
        known.insert("optimizer." + state_name + "." + name);
    std::set<std::string> frozen;  // a frozen parameter's name and its state's
    for (auto& [name, p] : model.named_parameters()) {
      if (p.requires_grad()) continue;
      frozen.insert(name);
      for (const auto& [state_name, flat] : optimizer.elements)
        frozen.insert("optimizer." + state_name + "." + name);
    }
    for (const TensorEntry& e : file.tensors)
      if (!known.count(e.name) && e.name.rfind("state.", 0) != 0)
        throw std::runtime_error(fmt::format(
            "{}: unexpected tensor '{}' ({})", path, e.name,
            frozen.count(e.name) ? "of a frozen parameter of this model: a training checkpoint "
                                   "holds only the trainable ones, so this file is of another run"
                                 : "not a parameter of this model or its optimizer state"));
  }
  std::map<std::string, int64_t> scalars;
  for (const auto& [name, value] : optimizer.scalars) {
    const std::string key = scalar_key(name);
    auto it = file.metadata.find(key);
    if (it == file.metadata.end())
      throw std::runtime_error(
          fmt::format("{}: metadata '{}' is missing (not a training checkpoint?)", path, key));
    int64_t parsed = -1;
    const std::string& text = it->second;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), parsed);
    // A negative step count would make AdamW's bias corrections negative.
    if (error != std::errc() || end != text.data() + text.size() || parsed < 0)
      throw std::runtime_error(
          fmt::format("{}: metadata '{}' is not a non-negative integer: '{}'", path, key, text));
    scalars[name] = parsed;
  }
  TrainingState state;
  state.metadata = file.metadata;
  for (const TensorEntry& e : file.tensors) {
    if (e.name.rfind("state.", 0) != 0) continue;
    if (e.dtype != "U8")
      throw std::runtime_error(fmt::format("{}: tensor '{}' must be U8", path, e.name));
    state.blobs[e.name.substr(6)] = e.bytes;
  }
  // Every check passed: now copy.
  NoGradGuard no_grad;
  for (auto& [dst, src] : weights) dst.copy_from(src);
  for (auto& [dst, src] : states) dst.copy_from(src);
  optimizer.scalars = std::move(scalars);
  return state;
}

}  // namespace dg
