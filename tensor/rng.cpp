// TorchGenerator (mt19937 + torch 1.13's CPU sampling kernels), NumpyGenerator (SeedSequence +
// PCG64 + numpy's bounded-integer methods) and depthgrad's name_seed. Written from the documented
// behaviour and checked against torch 1.13 / numpy 1.24 outputs (tests/test_rng.cpp); it does not
// support other torch versions' kernels, non-contiguous outputs, or numpy's legacy RandomState.
#include "tensor/rng.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace dg {

namespace {

// ---- little-endian blob helpers (for state()/set_state()) ------------------------------------

void put_u8(std::vector<uint8_t>& out, uint8_t v) { out.push_back(v); }
void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// Reads fields in order; the caller has already checked the total size.
struct BlobReader {
  const std::vector<uint8_t>& bytes;
  size_t at = 0;
  uint8_t u8() { return bytes[at++]; }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(bytes[at++]) << (8 * i);
    return v;
  }
  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(bytes[at++]) << (8 * i);
    return v;
  }
};

uint64_t fnv1a64_bytes(const uint8_t* data, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; ++i) {
    h ^= data[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

// Appends the checksum of everything written so far.
void seal(std::vector<uint8_t>& blob) { put_u64(blob, fnv1a64_bytes(blob.data(), blob.size())); }

// Checks size, magic, version and checksum of a blob produced by seal(); returns a reader
// positioned just after magic and version.
BlobReader open_blob(const std::vector<uint8_t>& blob, const char (&magic)[9], size_t expected_size,
                     const char* who) {
  if (blob.size() != expected_size)
    throw std::invalid_argument(fmt::format("{}::set_state: state blob has {} bytes, expected {}",
                                            who, blob.size(), expected_size));
  if (std::memcmp(blob.data(), magic, 8) != 0)
    throw std::invalid_argument(fmt::format(
        "{}::set_state: state blob does not start with the magic \"{}\" (not a {} state)", who,
        magic, who));
  BlobReader reader{blob, 8};
  uint32_t version = reader.u32();
  if (version != 1)
    throw std::invalid_argument(fmt::format(
        "{}::set_state: state blob version {} is not supported (expected 1)", who, version));
  uint64_t stored = 0;
  for (int i = 0; i < 8; ++i) stored |= static_cast<uint64_t>(blob[blob.size() - 8 + i]) << (8 * i);
  if (stored != fnv1a64_bytes(blob.data(), blob.size() - 8))
    throw std::invalid_argument(
        fmt::format("{}::set_state: state blob checksum mismatch (the blob is corrupted)", who));
  return reader;
}

// ---- torch's AVX2 Box–Muller transcendental kernels ------------------------------------------
//
// torch 1.13 computes float normal_ (n >= 16) with 8-wide AVX2 polynomial kernels of the
// Cephes family (natural log, and sine/cosine together), compiled by GCC with fused
// multiply-adds where a product feeds an addition. These are scalar renderings of the same
// arithmetic, with every fused step written as an explicit std::fma so the result does not
// depend on this compiler's contraction choices. The inputs are in range by construction:
// log_for_box_muller gets x in [2⁻²⁴, 1]; sincos_for_box_muller gets θ in [0, 2π).

float log_for_box_muller(float x) {
  // x = m·2^e with m in [0.5, 1); if m < √½ use 2m and e−1, so that m−1 is in [−0.29, 0.41).
  uint32_t bits = std::bit_cast<uint32_t>(x);
  float e = static_cast<float>(static_cast<int32_t>(bits >> 23) - 0x7f) + 1.0f;
  float m = std::bit_cast<float>((bits & 0x807FFFFFu) | 0x3f000000u);
  float m_if_small = 0.0f;
  if (m < 0.707106781186547524f) {
    m_if_small = m;
    e = e - 1.0f;
  }
  m = (m - 1.0f) + m_if_small;
  float z = m * m;
  // log(1+m) ≈ m − m²/2 + m³·P(m), P of degree 8 (Horner, fused).
  float p = 7.0376836292e-2f;
  p = std::fma(p, m, -1.1514610310e-1f);
  p = std::fma(p, m, 1.1676998740e-1f);
  p = std::fma(p, m, -1.2420140846e-1f);
  p = std::fma(p, m, 1.4249322787e-1f);
  p = std::fma(p, m, -1.6668057665e-1f);
  p = std::fma(p, m, 2.0000714765e-1f);
  p = std::fma(p, m, -2.4999993993e-1f);
  p = std::fma(p, m, 3.3333331174e-1f);
  float y = std::fma(p * m, z, e * -2.12194440e-4f);  // + e·(log 2 − 0.693359375)
  y = std::fma(-z, 0.5f, y);
  return std::fma(e, 0.693359375f, m + y);  // + e·0.693359375 (exact in float)
}

void sincos_for_box_muller(float theta, float& sin_out, float& cos_out) {
  uint32_t sin_sign = std::bit_cast<uint32_t>(theta) & 0x80000000u;
  float x = std::fabs(theta);
  // Octant j (made even) of x·4/π; reduce x by j·π/4 in three parts (extended precision).
  int32_t j = static_cast<int32_t>(x * 1.27323954473516f);
  j = (j + 1) & ~1;
  float y = static_cast<float>(j);
  sin_sign ^= static_cast<uint32_t>(j & 4) << 29;
  uint32_t cos_sign = static_cast<uint32_t>(~(j - 2) & 4) << 29;
  bool swap = (j & 2) != 0;  // octants 2,3 (mod 4): sine and cosine polynomials trade places
  x = std::fma(y, -0.78515625f, x);
  x = std::fma(y, -2.4187564849853515625e-4f, x);
  x = std::fma(y, -3.77489497744594108e-8f, x);
  float z = x * x;
  float cos_poly = 2.443315711809948e-5f;
  cos_poly = std::fma(cos_poly, z, -1.388731625493765e-3f);
  cos_poly = std::fma(cos_poly, z, 4.166664568298827e-2f);
  cos_poly = std::fma(cos_poly * z, z, -(z * 0.5f)) + 1.0f;  // 1 − z/2 + z²·Q(z)
  float sin_poly = -1.9515295891e-4f;
  sin_poly = std::fma(sin_poly, z, 8.3321608736e-3f);
  sin_poly = std::fma(sin_poly, z, -1.6666654611e-1f);
  sin_poly = std::fma(sin_poly * z, x, x);  // x + x³·R(z)
  float s = swap ? cos_poly : sin_poly;
  float c = swap ? sin_poly : cos_poly;
  sin_out = std::bit_cast<float>(std::bit_cast<uint32_t>(s) ^ sin_sign);
  cos_out = std::bit_cast<float>(std::bit_cast<uint32_t>(c) ^ cos_sign);
}

// One block of 16 uniforms d[0..16) → 16 normals: slot j (radius) pairs with slot j+8 (angle).
void box_muller_16(float* d, float mean, float std) {
  const float two_pi = static_cast<float>(2.0 * 3.14159265358979323846);
  for (int j = 0; j < 8; ++j) {
    float radius = std::sqrt(-2.0f * log_for_box_muller(1.0f - d[j]));
    float s, c;
    sincos_for_box_muller(two_pi * d[j + 8], s, c);
    d[j] = std::fma(radius * c, std, mean);
    d[j + 8] = std::fma(radius * s, std, mean);
  }
}

// The double-precision twin: same layout and formula, libm transcendentals.
void box_muller_16(double* d, double mean, double std) {
  const double two_pi = 2.0 * 3.14159265358979323846;
  for (int j = 0; j < 8; ++j) {
    double radius = std::sqrt(-2.0 * std::log(1.0 - d[j]));
    double theta = two_pi * d[j + 8];
    d[j] = radius * std::cos(theta) * std + mean;
    d[j + 8] = radius * std::sin(theta) * std + mean;
  }
}

void check_buffer(const void* out, int64_t n, const char* what) {
  if (n < 0)
    throw std::invalid_argument(fmt::format("TorchGenerator::{}: negative count {}", what, n));
  if (n > 0 && out == nullptr)
    throw std::invalid_argument(
        fmt::format("TorchGenerator::{}: null output buffer for {} values", what, n));
}

void check_uniform_range(double a, double b) {
  if (!(a <= b))
    throw std::invalid_argument(
        fmt::format("TorchGenerator::uniform_: expects a <= b, got a={} b={}", a, b));
}

void check_normal_std(double std) {
  if (!(std >= 0.0))
    throw std::invalid_argument(
        fmt::format("TorchGenerator::normal_: expects std >= 0, got {}", std));
}

void check_linear_shape(int64_t out_features, int64_t in_features) {
  if (out_features < 0 || in_features <= 0)
    throw std::invalid_argument(fmt::format(
        "TorchGenerator::kaiming_uniform_linear_: bad Linear shape out={} in={} (need in > 0)",
        out_features, in_features));
}

constexpr char kTorchMagic[9] = "dgTorchG";
constexpr char kNumpyMagic[9] = "dgPCG64n";
constexpr size_t kTorchBlobSize = 8 + 4 + 8 + 4 + 624 * 4 + 1 + 8 + 8;
constexpr size_t kNumpyBlobSize = 8 + 4 + 4 * 8 + 1 + 4 + 8;

}  // namespace

// =============================================================================================
// TorchGenerator
// =============================================================================================

TorchGenerator::TorchGenerator(uint64_t seed) { manual_seed(seed); }

void TorchGenerator::manual_seed(uint64_t seed) {
  seed_ = seed;
  words_[0] = static_cast<uint32_t>(seed);
  for (uint32_t i = 1; i < 624; ++i)
    words_[i] = 1812433253u * (words_[i - 1] ^ (words_[i - 1] >> 30)) + i;
  position_ = 624;
  next_double_normal_.reset();
}

void TorchGenerator::twist() {
  auto mixed = [this](int i, int next, int far) {
    uint32_t y = (words_[i] & 0x80000000u) | (words_[next] & 0x7fffffffu);
    words_[i] = words_[far] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
  };
  // The same recurrence as i = 0..623 with indices mod 624, split so no modulo is needed.
  for (int i = 0; i < 227; ++i) mixed(i, i + 1, i + 397);
  for (int i = 227; i < 623; ++i) mixed(i, i + 1, i - 227);
  mixed(623, 0, 396);
  position_ = 0;
}

namespace {
// mt19937's tempering of one state word: the engine's output
inline uint32_t mt_temper(uint32_t y) {
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}
// torch's float uniform in [0, 1) from one output: its low 24 bits
inline float mt_uniform_float(uint32_t r) {
  return static_cast<float>(r & 0xFFFFFFu) * (1.0f / 16777216.0f);
}
}  // namespace

uint32_t TorchGenerator::next_u32() {
  if (position_ >= 624) twist();
  return mt_temper(words_[position_++]);
}

uint64_t TorchGenerator::next_u64() {
  uint64_t high = next_u32();
  uint64_t low = next_u32();
  return (high << 32) | low;
}

float TorchGenerator::next_uniform_float() { return mt_uniform_float(next_u32()); }

double TorchGenerator::next_uniform_double53() {
  return static_cast<double>(next_u64() & ((uint64_t{1} << 53) - 1)) * (1.0 / 9007199254740992.0);
}

// torch's scalar Box–Muller: u1 picks the angle, u2 the radius; the sine sample is cached and
// returned by the next scalar draw (torch keeps it in the generator, so do we).
double TorchGenerator::scalar_normal(double mean, double std) {
  if (next_double_normal_) {
    double cached = *next_double_normal_;
    next_double_normal_.reset();
    return std::fma(cached, std, mean);
  }
  double u1 = next_uniform_double53();
  double u2 = next_uniform_double53();
  double radius = std::sqrt(-2.0 * std::log(1.0 - u2));
  double theta = 2.0 * 3.14159265358979323846 * u1;
  next_double_normal_ = radius * std::sin(theta);
  return std::fma(radius * std::cos(theta), std, mean);
}

// out: (n,) fp32. torch: from/to rounded to float, one engine output per value, fused u·(b−a)+a.
void TorchGenerator::uniform_(float* out, int64_t n, double a, double b) {
  check_buffer(out, n, "uniform_");
  check_uniform_range(a, b);
  const float from = static_cast<float>(a), to = static_cast<float>(b), span = to - from;
  // next_uniform_float's values, a run of untempered words at a time so the tempering vectorises
  // (a dropout mask of 400k values drew 0.55 ms serially one call each)
  for (int64_t i = 0; i < n;) {
    if (position_ >= 624) twist();
    const int64_t m = std::min<int64_t>(n - i, 624 - position_);
    const uint32_t* w = words_.data() + position_;
#pragma omp simd
    for (int64_t j = 0; j < m; ++j) {
      out[i + j] = std::fma(mt_uniform_float(mt_temper(w[j])), span, from);
    }
    position_ += static_cast<uint32_t>(m);
    i += m;
  }
}

// out: (n,) fp64, same stream (24-bit uniforms), double arithmetic.
void TorchGenerator::uniform_(double* out, int64_t n, double a, double b) {
  check_buffer(out, n, "uniform_");
  check_uniform_range(a, b);
  for (int64_t i = 0; i < n; ++i)
    out[i] = std::fma(static_cast<double>(next_uniform_float()), b - a, a);
}

// out: (n,) fp32. n >= 16: uniforms, 16-wide Box–Muller, tail block redrawn; n < 16: scalar path.
void TorchGenerator::normal_(float* out, int64_t n, double mean, double std) {
  check_buffer(out, n, "normal_");
  check_normal_std(std);
  if (n < 16) {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(scalar_normal(mean, std));
    return;
  }
  const float mean_f = static_cast<float>(mean), std_f = static_cast<float>(std);
  for (int64_t i = 0; i < n; ++i) out[i] = next_uniform_float();
  for (int64_t i = 0; i + 16 <= n; i += 16) box_muller_16(out + i, mean_f, std_f);
  if (n % 16 != 0) {
    float* tail = out + n - 16;  // overlaps the last full block: redrawn and overwritten
    for (int i = 0; i < 16; ++i) tail[i] = next_uniform_float();
    box_muller_16(tail, mean_f, std_f);
  }
}

// out: (n,) fp64, same stream and layout as the float version.
void TorchGenerator::normal_(double* out, int64_t n, double mean, double std) {
  check_buffer(out, n, "normal_");
  check_normal_std(std);
  if (n < 16) {
    for (int64_t i = 0; i < n; ++i) out[i] = scalar_normal(mean, std);
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = next_uniform_float();
  for (int64_t i = 0; i + 16 <= n; i += 16) box_muller_16(out + i, mean, std);
  if (n % 16 != 0) {
    double* tail = out + n - 16;
    for (int i = 0; i < 16; ++i) tail[i] = next_uniform_float();
    box_muller_16(tail, mean, std);
  }
}

// torch.nn.init.kaiming_uniform_(w, a=√5) with fan_in = in_features, evaluated as
// gain = √(2/(1+a²)), std = gain/√fan_in, bound = √3·std (Python doubles, same order).
double TorchGenerator::kaiming_uniform_bound(int64_t in_features) {
  check_linear_shape(0, in_features);
  const double a = std::sqrt(5.0);
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double std = gain / std::sqrt(static_cast<double>(in_features));
  return std::sqrt(3.0) * std;
}

// w: (out_features, in_features) row-major, as nn.Linear's weight.
void TorchGenerator::kaiming_uniform_linear_(float* w, int64_t out_features, int64_t in_features) {
  check_linear_shape(out_features, in_features);
  const double bound = kaiming_uniform_bound(in_features);
  uniform_(w, out_features * in_features, -bound, bound);
}

void TorchGenerator::kaiming_uniform_linear_(double* w, int64_t out_features, int64_t in_features) {
  check_linear_shape(out_features, in_features);
  const double bound = kaiming_uniform_bound(in_features);
  uniform_(w, out_features * in_features, -bound, bound);
}

std::vector<uint8_t> TorchGenerator::state() const {
  std::vector<uint8_t> blob(kTorchMagic, kTorchMagic + 8);
  blob.reserve(kTorchBlobSize);
  put_u32(blob, 1);
  put_u64(blob, seed_);
  put_u32(blob, position_);
  for (uint32_t word : words_) put_u32(blob, word);
  put_u8(blob, next_double_normal_ ? 1 : 0);
  put_u64(blob, std::bit_cast<uint64_t>(next_double_normal_.value_or(0.0)));
  seal(blob);
  return blob;
}

void TorchGenerator::set_state(const std::vector<uint8_t>& blob) {
  BlobReader reader = open_blob(blob, kTorchMagic, kTorchBlobSize, "TorchGenerator");
  uint64_t seed = reader.u64();
  uint32_t position = reader.u32();
  if (position > 624)
    throw std::invalid_argument(fmt::format(
        "TorchGenerator::set_state: mt19937 position {} is out of range [0, 624]", position));
  std::array<uint32_t, 624> words;
  for (uint32_t& word : words) word = reader.u32();
  uint8_t has_normal = reader.u8();
  double cached = std::bit_cast<double>(reader.u64());
  if (has_normal > 1)
    throw std::invalid_argument(fmt::format(
        "TorchGenerator::set_state: cached-normal flag is {}, expected 0 or 1", has_normal));
  seed_ = seed;
  position_ = position;
  words_ = words;
  next_double_normal_.reset();
  if (has_normal) next_double_normal_ = cached;
}

// =============================================================================================
// NumpyGenerator
// =============================================================================================

// SeedSequence(seed): entropy = little-endian uint32 words of seed ([0] for 0), pool of 4.
std::array<uint64_t, 4> NumpyGenerator::seed_sequence_state(uint64_t seed) {
  constexpr uint32_t kInitA = 0x43b0d7e5u, kMultA = 0x931e8875u;
  constexpr uint32_t kInitB = 0x8b51f9ddu, kMultB = 0x58f38dedu;
  constexpr uint32_t kMixL = 0xca01f9ddu, kMixR = 0x4973f715u;
  std::vector<uint32_t> entropy{static_cast<uint32_t>(seed)};
  if (seed >> 32) entropy.push_back(static_cast<uint32_t>(seed >> 32));

  uint32_t hash_a = kInitA;  // persists across every hashmix call
  auto hashmix = [&hash_a](uint32_t value) {
    value ^= hash_a;
    hash_a *= kMultA;
    value *= hash_a;
    return value ^ (value >> 16);
  };
  auto mix = [](uint32_t x, uint32_t y) {
    uint32_t r = kMixL * x - kMixR * y;
    return r ^ (r >> 16);
  };
  std::array<uint32_t, 4> pool{};
  for (size_t i = 0; i < 4; ++i) pool[i] = hashmix(i < entropy.size() ? entropy[i] : 0u);
  for (size_t src = 0; src < 4; ++src)
    for (size_t dst = 0; dst < 4; ++dst)
      if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src]));
  // (entropy beyond 4 words would be mixed in here; a uint64 seed has at most 2.)

  uint32_t hash_b = kInitB;
  std::array<uint32_t, 8> words{};
  for (size_t i = 0; i < 8; ++i) {
    uint32_t value = pool[i % 4] ^ hash_b;
    hash_b *= kMultB;
    value *= hash_b;
    words[i] = value ^ (value >> 16);
  }
  std::array<uint64_t, 4> out{};
  for (size_t i = 0; i < 4; ++i)
    out[i] = words[2 * i] | (static_cast<uint64_t>(words[2 * i + 1]) << 32);
  return out;
}

namespace {
using u128 = unsigned __int128;
constexpr u128 kPcgMultiplier =
    (static_cast<u128>(0x2360ED051FC65DA4ULL) << 64) | 0x4385DF649FCCF645ULL;
u128 make_u128(uint64_t high, uint64_t low) { return (static_cast<u128>(high) << 64) | low; }
}  // namespace

NumpyGenerator::NumpyGenerator(uint64_t seed) {
  std::array<uint64_t, 4> s = seed_sequence_state(seed);
  increment_ = (make_u128(s[2], s[3]) << 1) | 1u;
  state_ = 0;
  state_ = state_ * kPcgMultiplier + increment_;
  state_ += make_u128(s[0], s[1]);
  state_ = state_ * kPcgMultiplier + increment_;
}

uint64_t NumpyGenerator::next64() {
  state_ = state_ * kPcgMultiplier + increment_;
  uint64_t folded = static_cast<uint64_t>(state_ >> 64) ^ static_cast<uint64_t>(state_);
  return std::rotr(folded, static_cast<int>(state_ >> 122));
}

uint32_t NumpyGenerator::next32() {
  if (has_buffered_u32_) {
    has_buffered_u32_ = false;
    return buffered_u32_;
  }
  uint64_t n = next64();
  has_buffered_u32_ = true;
  buffered_u32_ = static_cast<uint32_t>(n >> 32);
  return static_cast<uint32_t>(n);
}

double NumpyGenerator::random() {
  return static_cast<double>(next64() >> 11) * (1.0 / 9007199254740992.0);
}

int64_t NumpyGenerator::integers(int64_t low, int64_t high) {
  if (low >= high)
    throw std::invalid_argument(fmt::format(
        "NumpyGenerator::integers: low >= high (low={}, high={}; high is exclusive)", low, high));
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low) - 1;  // inclusive
  uint64_t offset = 0;
  if (range == 0) {
    offset = 0;  // numpy returns low without drawing
  } else if (range == 0xFFFFFFFFULL) {
    offset = next32();
  } else if (range < 0xFFFFFFFFULL) {
    // Lemire's nearly-divisionless method on 32-bit draws.
    const uint32_t count = static_cast<uint32_t>(range) + 1;
    uint64_t m = static_cast<uint64_t>(next32()) * count;
    uint32_t leftover = static_cast<uint32_t>(m);
    if (leftover < count) {
      const uint32_t threshold = (0xFFFFFFFFu - static_cast<uint32_t>(range)) % count;
      while (leftover < threshold) {
        m = static_cast<uint64_t>(next32()) * count;
        leftover = static_cast<uint32_t>(m);
      }
    }
    offset = m >> 32;
  } else {
    // The same on 64-bit draws with a 128-bit product (range < 2⁶⁴−1 for any int64 pair).
    const uint64_t count = range + 1;
    u128 m = static_cast<u128>(next64()) * count;
    uint64_t leftover = static_cast<uint64_t>(m);
    if (leftover < count) {
      const uint64_t threshold = (~uint64_t{0} - range) % count;
      while (leftover < threshold) {
        m = static_cast<u128>(next64()) * count;
        leftover = static_cast<uint64_t>(m);
      }
    }
    offset = static_cast<uint64_t>(m >> 64);
  }
  return static_cast<int64_t>(static_cast<uint64_t>(low) + offset);
}

void NumpyGenerator::integers(int64_t low, int64_t high, int64_t* out, int64_t n) {
  if (n < 0)
    throw std::invalid_argument(fmt::format("NumpyGenerator::integers: negative size {}", n));
  if (n > 0 && out == nullptr)
    throw std::invalid_argument(
        fmt::format("NumpyGenerator::integers: null output buffer for {} values", n));
  if (low >= high)  // numpy checks even for size 0
    throw std::invalid_argument(fmt::format(
        "NumpyGenerator::integers: low >= high (low={}, high={}; high is exclusive)", low, high));
  for (int64_t i = 0; i < n; ++i) out[i] = integers(low, high);
}

std::vector<uint8_t> NumpyGenerator::state() const {
  std::vector<uint8_t> blob(kNumpyMagic, kNumpyMagic + 8);
  blob.reserve(kNumpyBlobSize);
  put_u32(blob, 1);
  put_u64(blob, static_cast<uint64_t>(state_ >> 64));
  put_u64(blob, static_cast<uint64_t>(state_));
  put_u64(blob, static_cast<uint64_t>(increment_ >> 64));
  put_u64(blob, static_cast<uint64_t>(increment_));
  put_u8(blob, has_buffered_u32_ ? 1 : 0);
  put_u32(blob, buffered_u32_);
  seal(blob);
  return blob;
}

void NumpyGenerator::set_state(const std::vector<uint8_t>& blob) {
  BlobReader reader = open_blob(blob, kNumpyMagic, kNumpyBlobSize, "NumpyGenerator");
  uint64_t state_high = reader.u64(), state_low = reader.u64();
  uint64_t inc_high = reader.u64(), inc_low = reader.u64();
  uint8_t has_buffered = reader.u8();
  uint32_t buffered = reader.u32();
  if ((inc_low & 1u) == 0)
    throw std::invalid_argument("NumpyGenerator::set_state: PCG64 increment is even (must be odd)");
  if (has_buffered > 1)
    throw std::invalid_argument(fmt::format(
        "NumpyGenerator::set_state: buffered-uint32 flag is {}, expected 0 or 1", has_buffered));
  state_ = make_u128(state_high, state_low);
  increment_ = make_u128(inc_high, inc_low);
  has_buffered_u32_ = has_buffered != 0;
  buffered_u32_ = buffered;
}

// =============================================================================================
// the default generator
// =============================================================================================

TorchGenerator& default_generator() {
  static TorchGenerator generator(67280421310721ULL);
  return generator;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

// =============================================================================================
// name_seed
// =============================================================================================

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t fnv1a64(std::string_view bytes) {
  return fnv1a64_bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

uint64_t name_seed(uint64_t seed, std::string_view name) {
  return splitmix64(splitmix64(seed) ^ fnv1a64(name));
}

}  // namespace dg
