// SHA-256 compression, unrolled by hand in groups of eight rounds with a 16-word rolling schedule.
// Uses the x86 SHA extensions when the CPU has them (checked at run time). Reads files with
// plain POSIX read() in 1 MiB chunks; does not memory-map.
#include "train/io/sha256.h"

#include <fcntl.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace dg {

namespace {

constexpr std::array<uint32_t, 64> kRoundConstants = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr std::array<uint32_t, 8> kInitialState = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

inline uint32_t rotate_right(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

inline uint32_t load_big_endian(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

// One round with the eight working variables passed in rotated order, so no variable is
// copied between rounds: after a round, `d` and `h` hold the new e and a.
#define DG_SHA256_ROUND(a, b, c, d, e, f, g, h, k, word)                                       \
  do {                                                                                         \
    const uint32_t t1 = h + (rotate_right(e, 6) ^ rotate_right(e, 11) ^ rotate_right(e, 25)) + \
                        (g ^ (e & (f ^ g))) + (k) + (word);                                    \
    const uint32_t t2 = (rotate_right(a, 2) ^ rotate_right(a, 13) ^ rotate_right(a, 22)) +     \
                        ((a & b) | (c & (a | b)));                                             \
    d += t1;                                                                                   \
    h = t1 + t2;                                                                               \
  } while (0)

// Message schedule: w[t] = s1(w[t-2]) + w[t-7] + s0(w[t-15]) + w[t-16], in a ring of 16.
#define DG_SHA256_SCHEDULE(w, t)                                                          \
  (w[(t)&15] += (rotate_right(w[((t)-2) & 15], 17) ^ rotate_right(w[((t)-2) & 15], 19) ^  \
                 (w[((t)-2) & 15] >> 10)) +                                               \
                w[((t)-7) & 15] +                                                         \
                (rotate_right(w[((t)-15) & 15], 7) ^ rotate_right(w[((t)-15) & 15], 18) ^ \
                 (w[((t)-15) & 15] >> 3)))

void compress_portable(std::array<uint32_t, 8>& state, const uint8_t* blocks, size_t count) {
  uint32_t s0 = state[0], s1 = state[1], s2 = state[2], s3 = state[3];
  uint32_t s4 = state[4], s5 = state[5], s6 = state[6], s7 = state[7];
  for (size_t block = 0; block < count; ++block, blocks += 64) {
    uint32_t w[16];
    for (int i = 0; i < 16; ++i) w[i] = load_big_endian(blocks + 4 * i);
    uint32_t a = s0, b = s1, c = s2, d = s3, e = s4, f = s5, g = s6, h = s7;
    const uint32_t* k = kRoundConstants.data();
    // Rounds 0-15 use the message words directly; 16-63 extend the schedule first.
    for (int t = 0; t < 16; t += 8) {
      DG_SHA256_ROUND(a, b, c, d, e, f, g, h, k[t + 0], w[t + 0]);
      DG_SHA256_ROUND(h, a, b, c, d, e, f, g, k[t + 1], w[t + 1]);
      DG_SHA256_ROUND(g, h, a, b, c, d, e, f, k[t + 2], w[t + 2]);
      DG_SHA256_ROUND(f, g, h, a, b, c, d, e, k[t + 3], w[t + 3]);
      DG_SHA256_ROUND(e, f, g, h, a, b, c, d, k[t + 4], w[t + 4]);
      DG_SHA256_ROUND(d, e, f, g, h, a, b, c, k[t + 5], w[t + 5]);
      DG_SHA256_ROUND(c, d, e, f, g, h, a, b, k[t + 6], w[t + 6]);
      DG_SHA256_ROUND(b, c, d, e, f, g, h, a, k[t + 7], w[t + 7]);
    }
    for (int t = 16; t < 64; t += 8) {
      DG_SHA256_ROUND(a, b, c, d, e, f, g, h, k[t + 0], DG_SHA256_SCHEDULE(w, t + 0));
      DG_SHA256_ROUND(h, a, b, c, d, e, f, g, k[t + 1], DG_SHA256_SCHEDULE(w, t + 1));
      DG_SHA256_ROUND(g, h, a, b, c, d, e, f, k[t + 2], DG_SHA256_SCHEDULE(w, t + 2));
      DG_SHA256_ROUND(f, g, h, a, b, c, d, e, k[t + 3], DG_SHA256_SCHEDULE(w, t + 3));
      DG_SHA256_ROUND(e, f, g, h, a, b, c, d, k[t + 4], DG_SHA256_SCHEDULE(w, t + 4));
      DG_SHA256_ROUND(d, e, f, g, h, a, b, c, k[t + 5], DG_SHA256_SCHEDULE(w, t + 5));
      DG_SHA256_ROUND(c, d, e, f, g, h, a, b, k[t + 6], DG_SHA256_SCHEDULE(w, t + 6));
      DG_SHA256_ROUND(b, c, d, e, f, g, h, a, k[t + 7], DG_SHA256_SCHEDULE(w, t + 7));
    }
    s0 += a, s1 += b, s2 += c, s3 += d, s4 += e, s5 += f, s6 += g, s7 += h;
  }
  state = {s0, s1, s2, s3, s4, s5, s6, s7};
}

#undef DG_SHA256_ROUND
#undef DG_SHA256_SCHEDULE

#if defined(__x86_64__) || defined(__i386__)
// The x86 SHA extensions do two rounds per instruction. The state lives in two registers,
// ABEF and CDGH (A in the top lane); after two rounds the old ABEF is the new CDGH.
__attribute__((target("sha,sse4.1,ssse3"))) void compress_sha_ni(std::array<uint32_t, 8>& state,
                                                                 const uint8_t* blocks,
                                                                 size_t count) {
  __m128i abef = _mm_set_epi32(int(state[0]), int(state[1]), int(state[4]), int(state[5]));
  __m128i cdgh = _mm_set_epi32(int(state[2]), int(state[3]), int(state[6]), int(state[7]));
  // Reverses the bytes of each 32-bit lane: the message words are big-endian.
  const __m128i byte_swap = _mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);
  for (size_t block = 0; block < count; ++block, blocks += 64) {
    const __m128i saved_abef = abef, saved_cdgh = cdgh;
    __m128i words[4];  // ring of four groups of four schedule words, lane 0 the earliest
    for (int i = 0; i < 4; ++i)
      words[i] = _mm_shuffle_epi8(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks + 16 * i)), byte_swap);
#pragma GCC unroll 16
    for (int group = 0; group < 16; ++group) {
      if (group >= 4) {
        // w[t..t+3] from w[t-16..t-13] (+s0 of the next four), w[t-7..t-4], and s1 of w[t-2..].
        __m128i next = _mm_sha256msg1_epu32(words[group & 3], words[(group + 1) & 3]);
        next =
            _mm_add_epi32(next, _mm_alignr_epi8(words[(group + 3) & 3], words[(group + 2) & 3], 4));
        words[group & 3] = _mm_sha256msg2_epu32(next, words[(group + 3) & 3]);
      }
      __m128i word_plus_constant = _mm_add_epi32(
          words[group & 3],
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(kRoundConstants.data() + 4 * group)));
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, word_plus_constant);  // cdgh now holds ABEF
      word_plus_constant = _mm_shuffle_epi32(word_plus_constant, 0x0E);
      abef = _mm_sha256rnds2_epu32(abef, cdgh, word_plus_constant);  // and back
    }
    abef = _mm_add_epi32(abef, saved_abef);
    cdgh = _mm_add_epi32(cdgh, saved_cdgh);
  }
  alignas(16) uint32_t lanes_abef[4], lanes_cdgh[4];
  _mm_store_si128(reinterpret_cast<__m128i*>(lanes_abef), abef);
  _mm_store_si128(reinterpret_cast<__m128i*>(lanes_cdgh), cdgh);
  state = {lanes_abef[3], lanes_abef[2], lanes_cdgh[3], lanes_cdgh[2],
           lanes_abef[1], lanes_abef[0], lanes_cdgh[1], lanes_cdgh[0]};
}

bool cpu_has_sha_extensions() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const bool ssse3 = ecx & (1u << 9), sse41 = ecx & (1u << 19);
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const bool sha = ebx & (1u << 29);
  return ssse3 && sse41 && sha;
}
#else
bool cpu_has_sha_extensions() { return false; }
#endif

std::atomic<bool> force_portable{false};

bool use_sha_extensions() {
  static const bool cpu_has_sha = cpu_has_sha_extensions();  // cpuid once, thread-safe
  return cpu_has_sha && !force_portable.load(std::memory_order_relaxed);
}

}  // namespace

const char* sha256_backend() { return use_sha_extensions() ? "sha-ni" : "portable"; }

void sha256_force_portable(bool force) { force_portable.store(force); }

void Sha256::compress_blocks(const uint8_t* blocks, size_t count) {
#if defined(__x86_64__) || defined(__i386__)
  if (use_sha_extensions()) {
    compress_sha_ni(state_, blocks, count);
    return;
  }
#endif
  compress_portable(state_, blocks, count);
}

Sha256::Sha256() { reset(); }

void Sha256::reset() {
  state_ = kInitialState;
  buffered_ = 0;
  total_bytes_ = 0;
  finished_ = false;
}

void Sha256::update(std::string_view bytes) { update(bytes.data(), bytes.size()); }

void Sha256::update(const void* data, size_t size) {
  if (finished_) throw std::logic_error("Sha256::update called after finish(); call reset() first");
  const uint8_t* input = static_cast<const uint8_t*>(data);
  total_bytes_ += size;
  if (buffered_ > 0) {
    const size_t take = std::min(size, 64 - buffered_);
    std::memcpy(buffer_.data() + buffered_, input, take);
    buffered_ += take;
    input += take;
    size -= take;
    if (buffered_ < 64) return;
    compress_blocks(buffer_.data(), 1);
    buffered_ = 0;
  }
  const size_t whole_blocks = size / 64;
  if (whole_blocks > 0) compress_blocks(input, whole_blocks);
  input += whole_blocks * 64;
  size -= whole_blocks * 64;
  if (size > 0) std::memcpy(buffer_.data(), input, size);
  buffered_ = size;
}

std::array<uint8_t, 32> Sha256::finish() {
  if (finished_) throw std::logic_error("Sha256::finish called twice; call reset() first");
  const uint64_t bit_length = total_bytes_ * 8;
  // Padding: 0x80, zeros up to 56 mod 64, then the 64-bit big-endian bit length.
  uint8_t padding[72] = {0x80};
  const size_t pad_length = (buffered_ < 56 ? 56 : 120) - buffered_;
  for (int i = 0; i < 8; ++i)
    padding[pad_length + i] = static_cast<uint8_t>(bit_length >> (56 - 8 * i));
  update(padding, pad_length + 8);
  finished_ = true;
  std::array<uint8_t, 32> digest;
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) digest[4 * i + j] = static_cast<uint8_t>(state_[i] >> (24 - 8 * j));
  return digest;
}

std::string Sha256::finish_hex() {
  const std::array<uint8_t, 32> digest = finish();
  return to_hex(digest.data(), digest.size());
}

std::string to_hex(const uint8_t* data, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(size * 2, '0');
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = kDigits[data[i] >> 4];
    out[2 * i + 1] = kDigits[data[i] & 15];
  }
  return out;
}

std::string sha256_hex(std::string_view bytes) {
  Sha256 hasher;
  hasher.update(bytes);
  return hasher.finish_hex();
}

std::string sha256_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw std::runtime_error(
        fmt::format("cannot open {} for hashing: {}", path, std::strerror(errno)));
  Sha256 hasher;
  std::vector<uint8_t> chunk(1 << 20);
  while (true) {
    const ssize_t got = ::read(fd, chunk.data(), chunk.size());
    if (got < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      throw std::runtime_error(
          fmt::format("error reading {} for hashing: {}", path, std::strerror(error)));
    }
    if (got == 0) break;
    hasher.update(chunk.data(), static_cast<size_t>(got));
  }
  ::close(fd);
  return hasher.finish_hex();
}

}  // namespace dg
