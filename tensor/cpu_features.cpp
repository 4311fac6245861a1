// CPUID and XGETBV readings (see cpu_features.h).
#include "tensor/cpu_features.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace dg {

std::string CpuFeatures::summary() const {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(avx2, "avx2");
  add(fma, "fma");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512dq, "avx512dq");
  add(avx512vl, "avx512vl");
  add(avx512_bf16, "avx512_bf16");
  add(amx_tile, "amx_tile");
  add(amx_bf16, "amx_bf16");
  return s.empty() ? "none of avx2, avx512, amx" : s;
}

namespace {

#if defined(__x86_64__)
struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};
Regs cpuid(unsigned leaf, unsigned sub = 0) {
  Regs r;
  __cpuid_count(leaf, sub, r.a, r.b, r.c, r.d);
  return r;
}
uint64_t xgetbv0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}
bool bit(unsigned reg, int i) { return (reg >> i) & 1u; }

CpuFeatures read_features() {
  CpuFeatures f;
  const unsigned max_leaf = cpuid(0).a;
  {
    Regs v = cpuid(0);
    char name[13] = {};
    std::memcpy(name, &v.b, 4);
    std::memcpy(name + 4, &v.d, 4);
    std::memcpy(name + 8, &v.c, 4);
    f.vendor = name;
  }
  if (cpuid(0x80000000u).a >= 0x80000004u) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      Regs r = cpuid(0x80000002u + i);
      std::memcpy(brand + 16 * i, &r, 16);
    }
    std::string s = brand;
    const auto first = s.find_first_not_of(' '), last = s.find_last_not_of(' ');
    f.model = first == std::string::npos ? "" : s.substr(first, last - first + 1);
  }
  if (max_leaf < 7) return f;
  const Regs l1 = cpuid(1);
  const bool osxsave = bit(l1.c, 27);
  const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool os_avx = (xcr0 & 0x6) == 0x6;                 // xmm, ymm
  const bool os_avx512 = os_avx && (xcr0 & 0xE0) == 0xE0;  // opmask, zmm hi256, hi16 zmm
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;         // tile config, tile data
  const Regs l7 = cpuid(7, 0);
  f.fma = os_avx && bit(l1.c, 12);
  f.avx2 = os_avx && bit(l7.b, 5);
  f.avx512f = os_avx512 && bit(l7.b, 16);
  f.avx512dq = os_avx512 && bit(l7.b, 17);
  f.avx512bw = os_avx512 && bit(l7.b, 30);
  f.avx512vl = os_avx512 && bit(l7.b, 31);
  f.amx_bf16 = os_amx && bit(l7.d, 22);
  f.amx_tile = os_amx && bit(l7.d, 24);
  if (l7.a >= 1) f.avx512_bf16 = os_avx512 && bit(cpuid(7, 1).a, 5);
  return f;
}
#else
CpuFeatures read_features() {
  CpuFeatures f;
  f.model = "non-x86-64 CPU";
  return f;
}
#endif

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = read_features();
  return features;
}

}  // namespace dg
