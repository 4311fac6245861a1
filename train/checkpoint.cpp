// Weights and training checkpoints in safetensors (see checkpoint.h).
#include "train/checkpoint.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <set>

#include "autograd/tape.h"

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

// A tensor holding the entry's values in its own dtype (F32, F64, I32, I64).
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
  else
    throw std::runtime_error(
        fmt::format("{}: tensor '{}' has dtype {}; depthgrad tensors are F32, F64, I32 or I64",
                    path, e.name, e.dtype));
  Tensor t = Tensor::empty(e.shape, dtype);
  if (!e.bytes.empty()) std::memcpy(t.storage()->data(), e.bytes.data(), e.bytes.size());
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

std::vector<TensorEntry> weight_entries(const Module& model) {
  std::vector<TensorEntry> out;
  for (auto& [name, p] : model.named_parameters()) out.push_back(entry_from(name, p));
  return out;
}

// Checks every parameter against the file before anything is copied.
std::vector<std::pair<Tensor, Tensor>> match_weights(const SafetensorsFile& file,
                                                     const Module& model, const std::string& path,
                                                     const std::string& prefix) {
  std::vector<std::pair<Tensor, Tensor>> pairs;
  for (auto& [name, p] : model.named_parameters()) {
    const TensorEntry* e = file.find(prefix + name);
    if (!e) throw std::runtime_error(fmt::format("{}: missing tensor '{}'", path, prefix + name));
    if (e->shape != p.shape())
      throw std::runtime_error(fmt::format("{}: tensor '{}' has shape {}, the model expects {}",
                                           path, prefix + name, shape_str(e->shape),
                                           shape_str(p.shape())));
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
  save_safetensors(path, weight_entries(model), meta);
}

std::map<std::string, std::string> load_weights(const std::string& path, Module& model) {
  return load_weights(load_safetensors(path), path, model);
}

std::map<std::string, std::string> load_weights(const SafetensorsFile& file,
                                                const std::string& path, Module& model) {
  auto pairs = match_weights(file, model, path, "");
  // Unknown tensors mean the file belongs to another model (a training checkpoint's optimizer
  // and state sections are expected extras, not model tensors).
  const auto named = model.named_parameters();
  for (const TensorEntry& e : file.tensors) {
    if (e.name.rfind("optimizer.", 0) == 0 || e.name.rfind("state.", 0) == 0) continue;
    bool ok = false;
    for (auto& [name, p] : named) ok = ok || name == e.name;
    if (!ok)
      throw std::runtime_error(
          fmt::format("{}: unexpected tensor '{}' (not a parameter of this model)", path, e.name));
  }
  NoGradGuard no_grad;
  for (auto& [param, value] : pairs) param.copy_from(value);
  return file.metadata;
}

void save_training_checkpoint(const std::string& path, const Module& model, AdamW& optimizer,
                              const TrainingState& state) {
  std::vector<TensorEntry> entries = weight_entries(model);
  auto named = model.named_parameters();
  // Moments are flat; slice them per parameter in registry order (the optimizer's slot order).
  Tensor m = optimizer.exp_avg(), v = optimizer.exp_avg_sq();
  int64_t offset = 0;
  for (auto& [name, p] : named) {
    offset = p.offset();  // parameters are views into the flat buffer: their offset is the slot's
    entries.push_back(
        entry_from("optimizer.exp_avg." + name,
                   Tensor::from_storage(m.storage(), p.shape(), contiguous_strides(p.shape()),
                                        offset, m.dtype())));
    entries.push_back(
        entry_from("optimizer.exp_avg_sq." + name,
                   Tensor::from_storage(v.storage(), p.shape(), contiguous_strides(p.shape()),
                                        offset, v.dtype())));
  }
  for (auto& [key, blob] : state.blobs) {
    TensorEntry e;
    e.name = "state." + key;
    e.dtype = "U8";
    e.shape = {static_cast<int64_t>(blob.size())};
    e.bytes = blob;
    entries.push_back(std::move(e));
  }
  std::map<std::string, std::string> meta = state.metadata;
  meta["depthgrad.optimizer_step"] = std::to_string(optimizer.steps_taken());
  meta["format"] = "pt";
  save_safetensors(path, entries, meta);
}

TrainingState load_training_checkpoint(const std::string& path, Module& model, AdamW& optimizer) {
  return load_training_checkpoint(load_safetensors(path), path, model, optimizer);
}

TrainingState load_training_checkpoint(const SafetensorsFile& file, const std::string& path,
                                       Module& model, AdamW& optimizer) {
  auto weights = match_weights(file, model, path, "");
  std::vector<std::pair<Tensor, Tensor>> moments;
  for (auto& [name, p] : model.named_parameters()) {
    for (const char* which : {"optimizer.exp_avg.", "optimizer.exp_avg_sq."}) {
      const TensorEntry* e = file.find(which + name);
      if (!e)
        throw std::runtime_error(fmt::format(
            "{}: missing tensor '{}{}' (not a training checkpoint?)", path, which, name));
      if (e->shape != p.shape())
        throw std::runtime_error(fmt::format("{}: tensor '{}{}' has shape {}, expected {}", path,
                                             which, name, shape_str(e->shape),
                                             shape_str(p.shape())));
      Tensor& flat =
          std::string(which) == "optimizer.exp_avg." ? optimizer.exp_avg() : optimizer.exp_avg_sq();
      moments.emplace_back(
          Tensor::from_storage(flat.storage(), p.shape(), contiguous_strides(p.shape()), p.offset(),
                               flat.dtype()),
          tensor_from(*e, path));
      check_finite(moments.back().second, path, which + name,
                   std::string(which) == "optimizer.exp_avg_sq.");
    }
  }
  // Every tensor is a weight, one of its two moments or a state blob: anything else means a
  // checkpoint of another model (the same rule load_weights applies to weights files).
  {
    std::set<std::string> known;
    for (auto& [name, p] : model.named_parameters()) {
      known.insert(name);
      known.insert("optimizer.exp_avg." + name);
      known.insert("optimizer.exp_avg_sq." + name);
    }
    for (const TensorEntry& e : file.tensors)
      if (!known.count(e.name) && e.name.rfind("state.", 0) != 0)
        throw std::runtime_error(fmt::format(
            "{}: unexpected tensor '{}' (not a parameter of this model or its optimizer state)",
            path, e.name));
  }
  auto step_it = file.metadata.find("depthgrad.optimizer_step");
  if (step_it == file.metadata.end())
    throw std::runtime_error(fmt::format(
        "{}: metadata 'depthgrad.optimizer_step' is missing (not a training checkpoint?)", path));
  int64_t step = 0;
  try {
    step = std::stoll(step_it->second);
  } catch (const std::exception&) {
    step = -1;
  }
  if (step < 0)  // a negative step count would make AdamW's bias corrections negative
    throw std::runtime_error(
        fmt::format("{}: metadata 'depthgrad.optimizer_step' is not a non-negative integer: '{}'",
                    path, step_it->second));
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
  for (auto& [dst, src] : moments) dst.copy_from(src);
  optimizer.set_steps_taken(step);
  return state;
}

}  // namespace dg
