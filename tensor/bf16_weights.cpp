// bf16 copies of weights (see bf16_weights.h): a registry of kept storages, each with its copy and
// the storage version the copy was rounded at.
#include "tensor/bf16_weights.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "tensor/gemm_kernels.h"  // to_bf16, pack_bf16

namespace dg {

namespace {

struct KeptCopy {
  std::weak_ptr<Storage> storage;  // expired: the storage is gone and the entry is dropped
  const Storage* identity = nullptr;
  const float* base = nullptr;  // the storage's element 0
  int64_t elements = 0;
  std::vector<uint16_t> copy;  // [elements], rounded at `version` when `current`
  uint64_t version = 0;
  bool current = false;
};

struct Registry {
  std::mutex mutex;
  std::vector<KeptCopy> kept;
  int64_t roundings = 0;
};
Registry& registry() {
  static Registry r;
  return r;
}

// Drops entries whose storage is gone (their memory may already hold another storage).
void prune(Registry& r) {
  std::erase_if(r.kept, [](const KeptCopy& k) { return k.storage.expired(); });
}

KeptCopy* find_storage(Registry& r, const Storage* s) {
  for (KeptCopy& k : r.kept)
    if (k.identity == s && !k.storage.expired()) return &k;
  return nullptr;
}

// dst[i] = to_bf16(src[i]) for n elements, in fixed chunks over the threads (outside a parallel
// region); how an element rounds does not depend on who rounds it.
void round_spread(const float* src, int64_t n, uint16_t* dst) {
  constexpr int64_t kChunk = int64_t(1) << 16;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1 && !omp_in_parallel())
  for (int64_t c = 0; c < chunks; ++c)
    to_bf16(src + c * kChunk, std::min(kChunk, n - c * kChunk), dst + c * kChunk);
}

void check_float32(const Tensor& t, const char* who) {
  if (!t.defined() || t.dtype() != DType::f32)
    throw std::invalid_argument(
        fmt::format("{}: the tensor must be a defined float32 tensor, got {}", who,
                    t.defined() ? t.describe() : "undefined"));
}
}  // namespace

void keep_bf16_copy(const Tensor& t) {
  check_float32(t, "keep_bf16_copy");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  prune(r);
  const std::shared_ptr<Storage>& s = t.storage();
  if (find_storage(r, s.get())) return;
  KeptCopy k;
  k.storage = s;
  k.identity = s.get();
  k.base = static_cast<const float*>(s->data());
  k.elements = static_cast<int64_t>(s->bytes() / sizeof(float));
  k.copy.resize(static_cast<size_t>(k.elements));
  r.kept.push_back(std::move(k));
}

void drop_bf16_copy(const Tensor& t) {
  if (!t.defined()) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const Storage* s = t.storage().get();
  std::erase_if(r.kept, [&](const KeptCopy& k) { return k.identity == s || k.storage.expired(); });
}

bool keeps_bf16_copy(const Tensor& t) {
  if (!t.defined()) return false;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return find_storage(r, t.storage().get()) != nullptr;
}

const uint16_t* bf16_copy_of(const float* p, int64_t elements) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (KeptCopy& k : r.kept) {
    if (p < k.base || p + elements > k.base + k.elements) continue;
    const std::shared_ptr<Storage> s = k.storage.lock();
    if (!s) continue;  // gone: another storage may live at this address now
    if (!k.current || k.version != s->version()) {
      round_spread(k.base, k.elements, k.copy.data());
      k.version = s->version();
      k.current = true;
      ++r.roundings;
    }
    return k.copy.data() + (p - k.base);
  }
  return nullptr;
}

uint16_t* bf16_copy_to_write(const Tensor& t) {
  if (!t.defined()) return nullptr;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  KeptCopy* k = find_storage(r, t.storage().get());
  if (!k) return nullptr;
  k->current = false;  // until bf16_copy_written
  return k->copy.data();
}

void bf16_copy_written(const Tensor& t) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  KeptCopy* k = find_storage(r, t.storage().get());
  if (!k) return;
  k->version = t.storage()->version();
  k->current = true;
}

int64_t bf16_copy_bytes() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  int64_t bytes = 0;
  for (const KeptCopy& k : r.kept)
    if (!k.storage.expired()) bytes += k.elements * 2;
  return bytes;
}

int64_t bf16_copy_roundings() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.roundings;
}

}  // namespace dg
