// Exact-parity tests for tensor/rng: TorchGenerator against torch 1.13 (CPU, AVX2 kernels) and
// NumpyGenerator against numpy 1.24. Every golden number below was produced offline by
// /usr/bin/python3 with those versions (the calls are quoted beside each table); none is
// computed by depthgrad itself. Nothing here needs the data directory.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/rng.h"

namespace {

// FNV-1a-64 over the raw little-endian float32 bytes: the same hash python computed over
// tensor.numpy().tobytes(), so one number pins every bit of a large tensor.
uint64_t float_bytes_hash(const std::vector<float>& values) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (float v : values) {
    uint8_t bytes[4];
    std::memcpy(bytes, &v, 4);
    for (uint8_t b : bytes) {
      h ^= b;
      h *= 0x100000001b3ULL;
    }
  }
  return h;
}

void check_exact(const std::vector<float>& got, const std::vector<float>& expected,
                 const char* what) {
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(what, " index ", i);
    CHECK(got[i] == expected[i]);
  }
}

}  // namespace

// ============================================================================================
// TorchGenerator
// ============================================================================================

TEST_CASE("TorchGenerator's engine is the standard mt19937 (across several twists)") {
  for (uint32_t seed : {0u, 42u, 5489u, 4294967295u}) {
    dg::TorchGenerator ours(seed);
    std::mt19937 reference(seed);
    for (int i = 0; i < 2000; ++i) REQUIRE(ours.next_u32() == reference());
  }
  // The C++ standard's own check value: the 10000th output of mt19937 seeded 5489.
  dg::TorchGenerator g(5489);
  uint32_t last = 0;
  for (int i = 0; i < 10000; ++i) last = g.next_u32();
  CHECK(last == 4123659995u);
  // torch's random64(): first output in the high half.
  dg::TorchGenerator a(9), b(9);
  uint64_t high = a.next_u32(), low = a.next_u32();
  CHECK(b.next_u64() == ((high << 32) | low));
  // Seeds are used modulo 2^32, as torch.manual_seed does.
  dg::TorchGenerator wide((uint64_t{1} << 32) + 42), narrow(42);
  CHECK(wide.next_u32() == narrow.next_u32());
  CHECK(wide.initial_seed() == (uint64_t{1} << 32) + 42);
}

TEST_CASE("uniform_ matches torch: torch.manual_seed(42); torch.empty(4,3).uniform_()") {
  dg::TorchGenerator g(42);
  std::vector<float> got(12);
  g.uniform_(got.data(), 12, 0.0, 1.0);
  check_exact(got,
              {0.882269263f, 0.915003955f, 0.38286376f, 0.959305644f, 0.390448213f, 0.600895345f,
               0.256572485f, 0.793641329f, 0.940771461f, 0.133185923f, 0.934598088f, 0.59357965f},
              "uniform43");
}

TEST_CASE(
    "uniform_ uses torch's fused u*(b-a)+a: torch.manual_seed(11); empty(40).uniform_(0.1, 0.37)") {
  // A non-fused evaluation differs from torch in ~15% of values for this range.
  dg::TorchGenerator g(11);
  std::vector<float> got(40);
  g.uniform_(got.data(), 40, 0.1, 0.37);
  check_exact(got,
              {0.140241265f, 0.231369346f, 0.366128623f, 0.145468384f, 0.25766474f,  0.287271798f,
               0.257432938f, 0.1346782f,   0.25447312f,  0.34970665f,  0.172721207f, 0.311263353f,
               0.173409656f, 0.225072592f, 0.30712533f,  0.235655025f, 0.127675772f, 0.305199265f,
               0.316956311f, 0.306630135f, 0.335143894f, 0.295224875f, 0.325837225f, 0.257146388f,
               0.326656014f, 0.116068102f, 0.216501594f, 0.219463557f, 0.170786962f, 0.270119101f,
               0.336927146f, 0.143907934f, 0.1658272f,   0.191306964f, 0.338879555f, 0.120588131f,
               0.367308378f, 0.152493134f, 0.214898914f, 0.218317613f},
              "uniform_odd");
}

TEST_CASE(
    "kaiming_uniform_linear_ matches torch: torch.manual_seed(42); nn.Linear(64, 192).weight") {
  CHECK(dg::TorchGenerator::kaiming_uniform_bound(64) == doctest::Approx(0.125).epsilon(1e-15));
  dg::TorchGenerator g(42);
  std::vector<float> w(192 * 64);
  g.kaiming_uniform_linear_(w.data(), 192, 64);
  check_exact(
      {w.begin(), w.begin() + 6},
      {0.0955673158f, 0.103750989f, -0.02928406f, 0.114826411f, -0.0273879468f, 0.0252238363f},
      "linear first row");
  check_exact({w.end() - 6, w.end()},
              {0.0216291994f, -0.0847520679f, 0.0626238883f, 0.00921069086f, -0.0652862191f,
               -0.0726145208f},
              "linear last row");
  CHECK(float_bytes_hash(w) == 0x2ef1027086034163ULL);  // all 12,288 values bit for bit

  // A bound that is not a power of two: torch.manual_seed(13); nn.Linear(100, 7).weight
  dg::TorchGenerator g13(13);
  std::vector<float> w7(7 * 100);
  g13.kaiming_uniform_linear_(w7.data(), 7, 100);
  check_exact({w7.begin(), w7.begin() + 5},
              {-0.0816366002f, -0.00412387867f, 0.0621102564f, -0.0969785675f, -0.0969393998f},
              "Linear(100, 7) first row");
  CHECK(float_bytes_hash(w7) == 0xb8420e587dd4016aULL);
}

TEST_CASE(
    "normal_ (16-wide path) matches torch: torch.manual_seed(42); empty(64).normal_(0, 0.02)") {
  dg::TorchGenerator g(42);
  std::vector<float> got(64);
  g.normal_(got.data(), 64, 0.0, 0.02);
  check_exact(got,
              {0.0385383032f,   0.0297456812f,    0.0180143435f,   -0.042110417f,   0.0135683687f,
               -0.0246908963f,  -0.000861349516f, -0.0320933387f,  -0.0150427055f,  0.0329744592f,
               -0.00784957316f, -0.0280721411f,   -0.0145576261f,  -0.011188603f,   -0.0153767774f,
               0.0152489077f,   0.032846339f,     -0.00319194933f, -0.00994795095f, 0.00879178476f,
               -0.0151626226f,  0.0215663519f,    0.0160160102f,   0.0336124115f,   0.0255824868f,
               0.0259284563f,   0.0122093298f,    0.0266947541f,   -0.0046324865f,  0.000835189829f,
               -0.0050315056f,  0.0171971694f,    -0.0276934728f,  -0.0174247231f,  -0.0044673183f,
               0.0343472287f,   0.00637760619f,   -0.00849037897f, 0.00611441815f,  -0.0154918497f,
               -0.0311514493f,  0.0199127216f,    -0.0175957158f,  -0.0120228408f,  -0.0254830234f,
               0.0424556993f,   -0.0246930625f,   -0.00975827686f, -0.0182764605f,  -0.0131627452f,
               0.00156047742f,  0.0105161751f,    -0.00975983404f, 0.0238273814f,   -0.0162801519f,
               -0.014719855f,   -0.0280649569f,   0.000720073353f, -0.00126954541f, 0.0135122975f,
               -0.00195613783f, 0.0368918777f,    -0.0236907471f,  0.027670987f},
              "normal64");
}

TEST_CASE("normal_ tail rule (n % 16 != 0) matches torch") {
  SUBCASE("torch.manual_seed(42); torch.empty(17).normal_()") {
    dg::TorchGenerator g(42);
    std::vector<float> got(17);
    g.normal_(got.data(), 17, 0.0, 1.0);
    check_exact(
        got,
        {1.92691529f, -0.159597471f, -0.497397542f, 0.439589262f, -0.758131146f, 1.07831764f,
         0.800800562f, 1.68062055f, 0.355859905f, 1.29642284f, 0.61046648f, 1.33473778f,
         -0.23162432f, 0.041759491f, -0.251575291f, 0.859858513f, -0.309726775f},
        "normal17");
  }
  SUBCASE("torch.manual_seed(13); torch.empty(1000).normal_(0.3, 1.7)") {
    dg::TorchGenerator g(13);
    std::vector<float> got(1000);
    g.normal_(got.data(), 1000, 0.3, 1.7);
    check_exact({got.begin(), got.begin() + 4},
                {1.04316962f, 0.929103971f, 2.98867416f, 0.03541255f}, "normal_odd head");
    check_exact({got.begin() + 980, got.end()},
                {1.72323537f,  -1.13085639f,  1.66307259f,   -2.51239014f,  -1.24816763f,
                 -1.95388448f, 0.0816932097f, -0.114855073f, 0.857671201f,  -1.83204496f,
                 -2.92803717f, -3.65887451f,  -0.865836442f, -0.139324829f, -0.992533505f,
                 0.912896037f, 0.0879251435f, -0.839785516f, -1.07987761f,  2.50319862f},
                "normal_odd tail");
    CHECK(float_bytes_hash(got) == 0x1bb357f0f9997c3eULL);
  }
}

TEST_CASE("normal_ is bit-exact over 32768 draws: torch.manual_seed(42); empty(32768).normal_()") {
  // Exercises log/sin/cos over the whole input range (min -4.590487, max 4.220885).
  dg::TorchGenerator g(42);
  std::vector<float> got(32768);
  g.normal_(got.data(), 32768, 0.0, 1.0);
  CHECK(float_bytes_hash(got) == 0x5724ea09a893d81aULL);
  float lo = got[0], hi = got[0];
  for (float v : got) lo = std::min(lo, v), hi = std::max(hi, v);
  CHECK(lo == -4.590487003326416f);
  CHECK(hi == 4.220885276794434f);
}

TEST_CASE("normal_ with n < 16 takes torch's scalar path and caches the second sample") {
  SUBCASE("torch.manual_seed(42); torch.empty(5).normal_()") {
    dg::TorchGenerator g(42);
    std::vector<float> got(5);
    g.normal_(got.data(), 5, 0.0, 1.0);
    check_exact(got, {0.336690366f, 0.128809407f, 0.234462366f, 0.23033303f, -1.12285638f},
                "normal5");
  }
  SUBCASE("a sequence of scalar and 16-wide calls (seed 21: 7, 3, 20, then 1 value)") {
    // torch.manual_seed(21); cat([empty(7).normal_(0.3,1.7), empty(3).normal_(-0.2,0.37),
    //                             empty(20).normal_(0.1,0.9), empty(1).normal_(0.3,1.7)])
    // The last value is the sample cached by the 3-value call, surviving the 20-value call.
    dg::TorchGenerator g(21);
    std::vector<float> got(31);
    g.normal_(got.data(), 7, 0.3, 1.7);
    g.normal_(got.data() + 7, 3, -0.2, 0.37);
    g.normal_(got.data() + 10, 20, 0.1, 0.9);
    g.normal_(got.data() + 30, 1, 0.3, 1.7);
    check_exact(got, {0.483774006f,   -0.443853647f, -1.00846684f,   -0.0279540289f, -0.316378623f,
                      -4.53668261f,   2.75397944f,   -0.0158939511f, 0.0420599654f,  -0.172088951f,
                      1.68377888f,    1.15745378f,   0.337935954f,   -0.515902877f,  0.25928241f,
                      1.89290118f,    0.127971813f,  -0.47079578f,   0.0196720548f,  -0.211618096f,
                      1.37497306f,    0.938740969f,  -1.16238892f,   -0.533486247f,  -1.1521368f,
                      -0.0613743886f, 0.842778087f,  0.562993944f,   -0.176954061f,  -2.27326345f,
                      -0.0605377667f},
                "scalar_seq");
  }
  SUBCASE(
      "double, n < 16, is torch's float64 path: manual_seed(42); empty(5, float64).normal_(0.5, "
      "1.3)") {
    dg::TorchGenerator g(42);
    std::vector<double> got(5);
    g.normal_(got.data(), 5, 0.5, 1.3);
    const double expected[5] = {0.9376974606990165, 0.6674522266775667, 0.8048010723699912,
                                0.7994329362889955, -0.9597132897596214};
    for (int i = 0; i < 5; ++i) CHECK(got[i] == expected[i]);
  }
  SUBCASE("manual_seed drops the cached sample") {
    dg::TorchGenerator g(42);
    float first[5], again[5];
    g.normal_(first, 5, 0.0, 1.0);  // leaves a cached sample
    g.manual_seed(42);
    g.normal_(again, 5, 0.0, 1.0);
    for (int i = 0; i < 5; ++i) CHECK(first[i] == again[i]);
  }
}

// Replays upstream MicroLM's init draw order (protocol §2.5) on raw buffers. Construction:
// Embedding N(0,1); per block qk_route [v_route for rd], q, k, v, output, up, gate, down as
// Linear kaiming-uniform; then the head Linear. apply(): every weight N(0, .02) in the same
// order, token first; the tied head's draw lands in token.weight (the first token draw is
// consumed and overwritten).
struct ReplayedInit {
  std::vector<float> token;            // 512×64
  std::vector<float> block1_qk_route;  // 2×64
};

ReplayedInit replay_upstream_init(bool rd_attnres) {
  dg::TorchGenerator g(42);
  struct Linear {
    std::string name;
    int64_t out, in;
    std::vector<float> w;
  };
  std::vector<float> embedding(512 * 64);
  g.normal_(embedding.data(), 512 * 64, 0.0, 1.0);
  std::vector<Linear> linears;
  for (int64_t k : {1, 2}) {
    std::string prefix = "blocks." + std::to_string(k - 1) + ".";
    linears.push_back({prefix + "qk_route", k, 64, {}});
    if (rd_attnres) linears.push_back({prefix + "v_route", k, 64, {}});
    for (const char* name : {"q", "k", "v", "output"})
      linears.push_back({prefix + name, 64, 64, {}});
    linears.push_back({prefix + "up", 192, 64, {}});
    linears.push_back({prefix + "gate", 192, 64, {}});
    linears.push_back({prefix + "down", 64, 192, {}});
  }
  linears.push_back({"head", 512, 64, {}});
  for (Linear& l : linears) {
    l.w.resize(l.out * l.in);
    g.kaiming_uniform_linear_(l.w.data(), l.out, l.in);
  }
  g.normal_(embedding.data(), 512 * 64, 0.0, 0.02);  // Embedding visited first; overwritten below
  for (Linear& l : linears) g.normal_(l.w.data(), l.out * l.in, 0.0, 0.02);
  ReplayedInit result;
  result.token = linears.back().w;  // tied: the head's N(0, .02) values are token.weight
  for (const Linear& l : linears)
    if (l.name == "blocks.1.qk_route") result.block1_qk_route = l.w;
  return result;
}

TEST_CASE("replayed upstream init reproduces the Appendix A weights (block_attnres)") {
  ReplayedInit init = replay_upstream_init(false);
  const double expected_token[3] = {-0.0049796, 0.0322440, 0.0008954};
  const double expected_route[3] = {-0.0041371, 0.0379348, -0.0024163};
  for (int i = 0; i < 3; ++i) {
    CHECK(std::fabs(init.token[i] - expected_token[i]) <= 1e-7);
    CHECK(std::fabs(init.block1_qk_route[i] - expected_route[i]) <= 1e-7);
  }
  // Every value of token.weight bit for bit, against the same replay run with torch itself.
  CHECK(float_bytes_hash(init.token) == 0x34e77315b9bccde9ULL);
  check_exact({init.token.end() - 3, init.token.end()},
              {0.0110523058f, -0.00993287098f, -0.0421755798f}, "token[511, 61:64]");
}

TEST_CASE("replayed upstream init reproduces the Appendix A weights (rd_attnres)") {
  ReplayedInit init = replay_upstream_init(true);
  const double expected_token[3] = {0.0232577, -0.0001996, 0.0076574};
  const double expected_route[3] = {0.0321990, 0.0182761, -0.0227164};
  for (int i = 0; i < 3; ++i) {
    CHECK(std::fabs(init.token[i] - expected_token[i]) <= 1e-7);
    CHECK(std::fabs(init.block1_qk_route[i] - expected_route[i]) <= 1e-7);
  }
  CHECK(float_bytes_hash(init.token) == 0x1a202ebee57eeb3bULL);
  check_exact({init.token.end() - 3, init.token.end()},
              {0.034118101f, 0.0119063063f, -0.00103462744f}, "token[511, 61:64]");
}

TEST_CASE("double overloads follow the float stream and formulas") {
  // Same number of engine draws and the same values up to float rounding: the float path
  // rounds θ = 2π·u to float (absolute error up to ~5e-7 rad) and the radius is at most
  // √(2·24·ln 2) ≈ 5.8, so |double − float| stays below ~3e-6·std; another stream would
  // differ by O(std).
  for (int64_t n : {16, 64, 1000, 4099}) {
    dg::TorchGenerator gf(5), gd(5);
    std::vector<float> f(n);
    std::vector<double> d(n);
    gf.normal_(f.data(), n, 0.1, 0.7);
    gd.normal_(d.data(), n, 0.1, 0.7);
    for (int64_t i = 0; i < n; ++i) {
      INFO("normal n=", n, " i=", i);
      REQUIRE(std::fabs(d[i] - f[i]) <= 5e-6 * 0.7);
    }
    CHECK(gf.next_u32() == gd.next_u32());

    std::vector<float> wf(n);
    std::vector<double> wd(n);
    gf.kaiming_uniform_linear_(wf.data(), 1, n);
    gd.kaiming_uniform_linear_(wd.data(), 1, n);
    for (int64_t i = 0; i < n; ++i)
      REQUIRE(std::fabs(wd[i] - wf[i]) <= 1e-7 * std::fabs(wd[i]) + 1e-9);
    CHECK(gf.next_u32() == gd.next_u32());
  }
}

TEST_CASE("TorchGenerator state save/restore continues the identical stream") {
  dg::TorchGenerator g(42);
  std::vector<float> scratch(700);
  g.uniform_(scratch.data(), 700, 0.0, 1.0);  // past the first twist
  g.normal_(scratch.data(), 3, 0.0, 1.0);     // leaves a cached scalar sample
  const std::vector<uint8_t> saved = g.state();

  std::vector<float> first(40), second(40);
  g.normal_(first.data(), 1, 0.0, 1.0);  // consumes the cached sample
  g.normal_(first.data() + 1, 39, 0.0, 1.0);

  dg::TorchGenerator restored(7);  // a different seed, overwritten by set_state
  restored.set_state(saved);
  restored.normal_(second.data(), 1, 0.0, 1.0);
  restored.normal_(second.data() + 1, 39, 0.0, 1.0);
  check_exact(second, first, "restored stream");
  CHECK(restored.initial_seed() == 42);
  CHECK(restored.next_u32() == g.next_u32());
}

TEST_CASE("TorchGenerator rejects bad state blobs") {
  dg::TorchGenerator g(1);
  const std::vector<uint8_t> good = g.state();
  std::vector<uint8_t> flipped = good;
  flipped[100] ^= 0x10;  // inside the mt19937 words
  CHECK_THROWS_WITH_AS(g.set_state(flipped), doctest::Contains("checksum"), std::invalid_argument);
  std::vector<uint8_t> truncated(good.begin(), good.end() - 1);
  CHECK_THROWS_WITH_AS(g.set_state(truncated), doctest::Contains("bytes"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(g.set_state(dg::NumpyGenerator(1).state()),
                       doctest::Contains("TorchGenerator"), std::invalid_argument);
  // A rejected blob leaves the generator untouched.
  dg::TorchGenerator fresh(1);
  CHECK(g.next_u32() == fresh.next_u32());
}

TEST_CASE("TorchGenerator argument errors") {
  dg::TorchGenerator g(1);
  float buffer[4];
  CHECK_THROWS_AS(g.uniform_(buffer, 4, 1.0, 0.0), std::invalid_argument);
  CHECK_THROWS_AS(g.normal_(buffer, 4, 0.0, -1.0), std::invalid_argument);
  CHECK_THROWS_AS(g.normal_(buffer, -1, 0.0, 1.0), std::invalid_argument);
  CHECK_THROWS_AS(g.kaiming_uniform_linear_(buffer, 2, 0), std::invalid_argument);
}

// ============================================================================================
// NumpyGenerator
// ============================================================================================

TEST_CASE("SeedSequence(seed).generate_state(4, np.uint64)") {
  // Seed 42 is protocol Appendix B; 0 and 2^40+5 (two entropy words) from numpy 1.24.
  CHECK(dg::NumpyGenerator::seed_sequence_state(42) ==
        std::array<uint64_t, 4>{0x9f1e2e6dcd540ab7ULL, 0xd57873dc79fb94b6ULL, 0x7d282a1b64d420b7ULL,
                                0x336579714692d5ffULL});
  CHECK(dg::NumpyGenerator::seed_sequence_state(0) ==
        std::array<uint64_t, 4>{0xdb2cd7e7b0f478beULL, 0xabf4641a2c71ba49ULL, 0x20c6ed6d9d7b8d41ULL,
                                0x2c4099de223c39d4ULL});
  CHECK(dg::NumpyGenerator::seed_sequence_state((uint64_t{1} << 40) + 5) ==
        std::array<uint64_t, 4>{0xdae41755e08a170bULL, 0x8415abe87ecdcb2cULL, 0x2525c5b44b9118d0ULL,
                                0x42c2793f3392bed3ULL});
}

TEST_CASE("PCG64 raw output: np.random.PCG64(42).random_raw(3)") {
  dg::NumpyGenerator g(42);
  CHECK(g.next64() == 0xc621fbcd16d92688ULL);
  CHECK(g.next64() == 0x705a5661a791ffc1ULL);
  CHECK(g.next64() == 0xdbcd12c26eda1624ULL);
}

TEST_CASE("default_rng(42).integers(0, 119935, size=4) x 30 is the protocol's batch-start table") {
  const int64_t table[30][4] = {
      {10704, 92824, 78506, 52636},   {51933, 102975, 10307, 83638}, {24163, 11295, 63143, 117011},
      {88242, 91287, 86050, 94276},   {61553, 15365, 100715, 54017}, {60009, 44471, 21894, 111151},
      {93737, 77221, 48263, 98677},   {65416, 53180, 54025, 27253},  {11050, 66514, 106489, 7653},
      {102939, 99261, 33193, 75758},  {19816, 90921, 84017, 42520},  {8145, 116420, 53453, 107116},
      {81306, 93355, 91138, 23343},   {43645, 55976, 59702, 5253},   {65552, 18504, 89156, 81921},
      {110643, 89323, 43973, 116038}, {49275, 39077, 108605, 44431}, {9156, 56316, 95429, 22724},
      {55522, 15582, 82332, 57053},   {39602, 27214, 67703, 80334},  {112775, 52429, 19272, 99867},
      {75530, 83986, 11660, 37463},   {92091, 99817, 52197, 96519},  {100948, 46472, 107712, 34580},
      {28731, 81855, 76370, 16761},   {99874, 23975, 96535, 882},    {95569, 94379, 93592, 79738},
      {56557, 84574, 33236, 93636},   {66641, 55040, 60639, 68211},  {4469, 16766, 29441, 13736}};
  dg::NumpyGenerator rng(42);
  for (int step = 0; step < 30; ++step) {
    int64_t starts[4];
    rng.integers(0, 119935, starts, 4);
    for (int i = 0; i < 4; ++i) {
      INFO("step ", step, " row ", i);
      CHECK(starts[i] == table[step][i]);
    }
  }
}

TEST_CASE("numpy goldens: random, 64-bit ranges, rejection, buffering") {
  SUBCASE("default_rng(7).random() x5") {
    dg::NumpyGenerator g(7);
    const double expected[5] = {0x1.400c8353e3ca9p-1, 0x1.cb5f9b795e4cdp-1, 0x1.8d26acbf2815fp-1,
                                0x1.cd396d5eab510p-3, 0x1.335eca6438dd4p-2};
    for (double e : expected) CHECK(g.random() == e);
  }
  SUBCASE("default_rng(0): integers(0, 2**40, 5), integers(-5, 3*2**61, 3)") {
    dg::NumpyGenerator g(0);
    int64_t a[5], b[3];
    g.integers(0, int64_t{1} << 40, a, 5);
    g.integers(-5, 3 * (int64_t{1} << 61), b, 3);
    const int64_t ea[5] = {700346781657, 296633628802, 45050865998, 18172327443, 894200084524};
    const int64_t eb[3] = {6314013200959933084, 4196420588075033325, 5046313636171151832};
    for (int i = 0; i < 5; ++i) CHECK(a[i] == ea[i]);
    for (int i = 0; i < 3; ++i) CHECK(b[i] == eb[i]);
  }
  SUBCASE("64-bit Lemire with rejections: default_rng(0).integers(-2**62, 2**62+2**61, 12)") {
    dg::NumpyGenerator g(0);
    int64_t got[12];
    g.integers(-(int64_t{1} << 62), (int64_t{1} << 62) + (int64_t{1} << 61), got, 12);
    const int64_t expected[12] = {2731982250808283515,  -1501256978871605644, 4764681459880096452,
                                  5911669316505833904,  2382348295031000975,  1655883412594610135,
                                  4794465053139018383,  -4224470698284761805, 3800668532998530091,
                                  -2586514594449868601, 5340089400578092904,  1630936828931034044};
    for (int i = 0; i < 12; ++i) CHECK(got[i] == expected[i]);
    // numpy used 18 raw draws (6 rejected); its next raw output is:
    CHECK(g.next64() == 0x4cb9eb2014951238ULL);
  }
  SUBCASE("32-bit Lemire with rejections: default_rng(1).integers(0, 3_000_000_000, 12)") {
    dg::NumpyGenerator g(1);
    int64_t got[12];
    g.integers(0, 3000000000, got, 12);
    const int64_t expected[12] = {1535464873, 2851391088, 104557657,  2845948340,
                                  935494355,  2607075741, 1269979346, 770976088,
                                  1227597408, 1931486993, 1648781062, 257217833};
    for (int i = 0; i < 12; ++i) CHECK(got[i] == expected[i]);
    // numpy: 19 next32 calls (7 rejected) = 10 raw draws, high half of the last one buffered.
    CHECK(g.next32() == 118365490u);
    CHECK(g.next64() == 0xc0e63c2edd973235ULL);
  }
  SUBCASE(
      "buffer persists across random(): default_rng(3): integers(0,10), random(), integers(0,10), "
      "integers(0,10,3)") {
    dg::NumpyGenerator g(3);
    CHECK(g.integers(0, 10) == 8);
    CHECK(g.random() == 0x1.e4fce8296f7e8p-3);
    CHECK(g.integers(0, 10) == 0);
    int64_t rest[3];
    g.integers(0, 10, rest, 3);
    CHECK(rest[0] == 1);
    CHECK(rest[1] == 8);
    CHECK(rest[2] == 8);
    CHECK(g.next32() == 2500366905u);  // numpy's has_uint32=1, uinteger=2500366905
    CHECK(g.next64() == 0x1818d0900a160f0eULL);
  }
  SUBCASE("full 32-bit range, negative lows, empty range: default_rng(5)") {
    dg::NumpyGenerator g(5);
    int64_t full[3], negative[4], single[2];
    g.integers(0, int64_t{1} << 32, full, 3);
    g.integers(-100, -90, negative, 4);
    g.integers(7, 8, single, 2);  // draws nothing
    const int64_t e_full[3] = {2881021352, 3457461230, 97294837};
    const int64_t e_negative[4] = {-92, -96, -95, -94};
    for (int i = 0; i < 3; ++i) CHECK(full[i] == e_full[i]);
    for (int i = 0; i < 4; ++i) CHECK(negative[i] == e_negative[i]);
    CHECK(single[0] == 7);
    CHECK(single[1] == 7);
    CHECK(g.integers(0, 10) == 2);
    CHECK(g.next64() == 0x0dce670afac210edULL);
  }
  SUBCASE("instruction-loss resampling: default_rng(0).integers(0, 8) x8") {
    dg::NumpyGenerator g(0);
    const int64_t expected[8] = {6, 5, 4, 2, 2, 0, 0, 0};
    for (int64_t e : expected) CHECK(g.integers(0, 8) == e);
  }
}

TEST_CASE("NumpyGenerator state save/restore, including the buffered half") {
  dg::NumpyGenerator g(42);
  g.next32();  // leaves the high half buffered
  const std::vector<uint8_t> saved = g.state();
  std::vector<int64_t> first(50), second(50);
  g.integers(0, 119935, first.data(), 50);
  dg::NumpyGenerator restored(0);
  restored.set_state(saved);
  restored.integers(0, 119935, second.data(), 50);
  CHECK(first == second);
  CHECK(restored.next64() == g.next64());

  std::vector<uint8_t> flipped = saved;
  flipped[20] ^= 1;
  CHECK_THROWS_WITH_AS(restored.set_state(flipped), doctest::Contains("checksum"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(restored.set_state(dg::TorchGenerator(1).state()),
                       doctest::Contains("NumpyGenerator"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(restored.set_state({}), doctest::Contains("bytes"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(restored.integers(5, 5), doctest::Contains("low >= high"),
                       std::invalid_argument);
}

// ============================================================================================
// name_seed
// ============================================================================================

TEST_CASE("name_seed is splitmix64(splitmix64(seed) ^ fnv1a64(name)), stable") {
  // Published check values of the two building blocks.
  CHECK(dg::fnv1a64("") == 0xcbf29ce484222325ULL);
  CHECK(dg::fnv1a64("a") == 0xaf63dc4c8601ec8cULL);
  CHECK(dg::splitmix64(0) == 0xe220a8397b1dcdafULL);
  // Computed offline by an independent Python rendering of the documented formula.
  CHECK(dg::name_seed(42, "token.weight") == 0x9f3454c2f3f26d48ULL);
  CHECK(dg::name_seed(42, "blocks.1.qk_route.weight") == 0xb81bb46516abd021ULL);
  CHECK(dg::name_seed(43, "token.weight") != dg::name_seed(42, "token.weight"));
  // Keyed generators do not depend on which other tensors exist or in which order they draw.
  dg::TorchGenerator a(dg::name_seed(42, "blocks.0.q.weight"));
  dg::TorchGenerator extra(dg::name_seed(42, "blocks.0.v_route.weight"));
  dg::TorchGenerator b(dg::name_seed(42, "blocks.0.q.weight"));
  float wa[64], wx[64], wb[64];
  extra.normal_(wx, 64, 0.0, 0.02);
  a.normal_(wa, 64, 0.0, 0.02);
  b.normal_(wb, 64, 0.0, 0.02);
  for (int i = 0; i < 64; ++i) CHECK(wa[i] == wb[i]);
  CHECK(wa[0] != wx[0]);
}
