// Random number generators that reproduce, value for value, the two streams PyTorch and numpy
// programs draw from: PyTorch 1.13's CPU generator (mt19937; uniform_, normal_, nn.Linear's
// kaiming-uniform init) and numpy's default_rng (SeedSequence + PCG64; random, integers).
// Also depthgrad's own per-tensor-name seed scheme. It does not draw in parallel, does not
// emulate torch's CUDA/MPS generators, and covers only the distributions depthgrad uses.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace dg {

// ---------------------------------------------------------------------------------------------
// TorchGenerator: torch.manual_seed(seed) followed by CPU draws on contiguous tensors.
//
// * Engine: standard mt19937, seeded with the low 32 bits of `seed` (torch does the same).
// * float uniform_: one 32-bit output r per value, u = (r & 0xFFFFFF)·2⁻²⁴, out = u·(b−a)+a
//   in fp32 arithmetic (a and b rounded to float first), as torch's uniform kernel.
// * float normal_ with n >= 16: fill n uniforms, then Box–Muller on each block of 16
//   (slot j pairs with slot j+8); when n % 16 != 0 the last 16 slots are refilled with 16 fresh
//   uniforms and transformed again. log/sin/cos are computed with the same single-precision
//   polynomial kernels torch's AVX2 path uses (see rng.cpp), so values match torch 1.13 bit for
//   bit on every case tested (e.g. all 32,768 values of normal_() after manual_seed(42), and
//   both arms' full init). torch 1.13 picks that path on any AVX2 CPU, AVX-512 ones included;
//   torch forced to ATEN_CPU_CAPABILITY=default uses libm instead and differs by up to ~5e-7
//   for N(0,1) draws (~1e-8 at std 0.02).
// * float normal_ with n < 16: torch's scalar double path: two 53-bit uniforms per pair, the
//   cos sample returned and the sin sample cached in the generator for the next scalar draw.
// * double overloads: the SAME stream and the same formulas as the float versions (24-bit
//   uniforms, 16-wide layout), evaluated in double precision with libm. They equal the float
//   results up to float rounding; they are NOT what torch does for float64 tensors (torch then
//   uses 53-bit uniforms), which is deliberate: a float64 model for gradient checks gets the
//   same initial weights as the float32 model.
// ---------------------------------------------------------------------------------------------
class TorchGenerator {
 public:
  explicit TorchGenerator(uint64_t seed);

  // Re-seeds like torch.manual_seed(seed): new engine state, cached normal sample dropped.
  void manual_seed(uint64_t seed);
  uint64_t initial_seed() const { return seed_; }

  // One raw engine output (torch's random()) and two combined, first one high (random64()).
  uint32_t next_u32();
  uint64_t next_u64();

  // out[0..n) ~ U[a, b).
  void uniform_(float* out, int64_t n, double a, double b);
  void uniform_(double* out, int64_t n, double a, double b);
  // out[0..n) ~ N(mean, std²).
  void normal_(float* out, int64_t n, double mean, double std);
  void normal_(double* out, int64_t n, double mean, double std);
  // What nn.Linear(in_features, out_features)'s constructor draws into its weight
  // (out_features × in_features, row-major): kaiming_uniform_(a=√5), i.e. U(−bound, bound) with
  // bound = √3·√(2/(1+5))/√in_features ≈ 1/√in_features.
  void kaiming_uniform_linear_(float* w, int64_t out_features, int64_t in_features);
  void kaiming_uniform_linear_(double* w, int64_t out_features, int64_t in_features);
  // The bound above, computed with the same double operations as torch.nn.init.
  static double kaiming_uniform_bound(int64_t in_features);

  // Checkpointing: an opaque, versioned, checksummed byte blob holding the seed, the mt19937
  // words and position, and the cached scalar-normal sample. set_state throws
  // std::invalid_argument naming what is wrong (size, magic, position, checksum).
  std::vector<uint8_t> state() const;
  void set_state(const std::vector<uint8_t>& blob);

 private:
  void twist();
  float next_uniform_float();                     // u in [0, 1), 24 bits
  double next_uniform_double53();                 // torch's uniform_real_distribution<double>(0, 1)
  double scalar_normal(double mean, double std);  // torch's at::normal_distribution<double>

  uint64_t seed_ = 0;
  std::array<uint32_t, 624> words_{};
  uint32_t position_ = 624;  // next word to temper; 624 means "twist first"
  std::optional<double> next_double_normal_;
};

// The process-wide generator that dg::randn, dg::rand, dg::randint and dg::init:: draw from when
// given no generator, as torch's default CPU generator. It starts at seed 67280421310721 (the
// seed libtorch's default generator starts at; Python torch may seed its own differently).
// Unlike torch's, it has no lock: draw from one thread at a time, or pass each thread its own.
TorchGenerator& default_generator();
// torch.manual_seed(seed): re-seeds the default generator.
void manual_seed(uint64_t seed);

// ---------------------------------------------------------------------------------------------
// NumpyGenerator: np.random.default_rng(seed) — SeedSequence(seed) with a pool of 4 words,
// generate_state(4 × uint64) feeding PCG64 (128-bit LCG, XSL-RR output), and the generator's
// buffered 32-bit draws. Only non-negative integer seeds (what numpy accepts).
// ---------------------------------------------------------------------------------------------
class NumpyGenerator {
 public:
  explicit NumpyGenerator(uint64_t seed);

  // The 4 uint64 words SeedSequence(seed).generate_state(4, np.uint64) returns.
  static std::array<uint64_t, 4> seed_sequence_state(uint64_t seed);

  uint64_t next64();
  // Buffered: one next64() serves two calls, low half first.
  uint32_t next32();
  // Generator.random(): (next64() >> 11)·2⁻⁵³, in [0, 1). Does not touch the 32-bit buffer.
  double random();
  // Generator.integers(low, high): uniform in [low, high) (high exclusive, int64 output).
  // Range − 1 ≤ 0xFFFFFFFF: 32-bit Lemire on next32(); otherwise 64-bit Lemire on next64().
  // Throws std::invalid_argument when low >= high.
  int64_t integers(int64_t low, int64_t high);
  // Generator.integers(low, high, size=n): n draws in sequence.
  void integers(int64_t low, int64_t high, int64_t* out, int64_t n);

  // PCG state, increment, buffered word and flag as a checksummed blob; set_state throws
  // std::invalid_argument on a bad blob (wrong size, magic, even increment, checksum).
  std::vector<uint8_t> state() const;
  void set_state(const std::vector<uint8_t>& blob);

 private:
  unsigned __int128 state_ = 0;
  unsigned __int128 increment_ = 1;
  bool has_buffered_u32_ = false;
  uint32_t buffered_u32_ = 0;
};

// ---------------------------------------------------------------------------------------------
// name_seed: depthgrad's own scheme (NOT torch's, which has nothing similar) for giving every
// tensor name an independent TorchGenerator ("identical init" across model variants):
//   h = FNV-1a-64(name bytes)            (offset 0xcbf29ce484222325, prime 0x100000001b3)
//   name_seed = splitmix64(splitmix64(seed) XOR h)
// Stable across platforms and releases; changing it changes every name-keyed init.
// TorchGenerator uses only the low 32 bits, as torch.manual_seed does.
// ---------------------------------------------------------------------------------------------
uint64_t name_seed(uint64_t seed, std::string_view name);
uint64_t splitmix64(uint64_t x);
uint64_t fnv1a64(std::string_view bytes);

}  // namespace dg
