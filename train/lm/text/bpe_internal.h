// Internals shared by the BPE trainer (bpe_train.cpp) and the encoder (bpe.cpp): a pair of
// symbol ids as one 64-bit key, and a hash map keyed by views into the text. Not a public header.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <utility>
#include <vector>

namespace dg::bpe_internal {

inline uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}
inline int32_t pair_left(uint64_t key) { return static_cast<int32_t>(key >> 32); }
inline int32_t pair_right(uint64_t key) { return static_cast<int32_t>(key & 0xFFFFFFFFu); }

// Open-addressing hash map keyed by string views that outlive it (pieces of the input text).
template <class V>
class ViewMap {
 public:
  ViewMap() { rehash(1024); }

  // The value stored for `key`, default-constructed and inserted when absent.
  V& get(std::string_view key, bool& inserted) {
    if ((used_ + 1) * 2 > slots_.size()) rehash(slots_.size() * 2);
    const size_t hash = std::hash<std::string_view>{}(key);
    const size_t mask = slots_.size() - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
      Slot& slot = slots_[i];
      if (!slot.occupied) {
        slot = Slot{key, hash, V{}, true};
        ++used_;
        inserted = true;
        return slot.value;
      }
      if (slot.hash == hash && slot.key == key) {
        inserted = false;
        return slot.value;
      }
    }
  }

  template <class F>
  void for_each(F&& visit) const {
    for (const Slot& slot : slots_) {
      if (slot.occupied) visit(slot.key, slot.value);
    }
  }
  size_t size() const { return used_; }

 private:
  struct Slot {
    std::string_view key;
    size_t hash = 0;
    V value{};
    bool occupied = false;
  };

  void rehash(size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    const size_t mask = capacity - 1;
    for (Slot& slot : old) {
      if (!slot.occupied) continue;
      size_t i = slot.hash & mask;
      while (slots_[i].occupied) i = (i + 1) & mask;
      slots_[i] = std::move(slot);
    }
  }

  std::vector<Slot> slots_;
  size_t used_ = 0;
};

}  // namespace dg::bpe_internal
