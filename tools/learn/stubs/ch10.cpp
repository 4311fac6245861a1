// Chapter 10's exercises (nn/lm/learn-10-depth-routing.md): write the three functions below, then
// run `make learn CHAPTER=10`. Each replaces the library's version everywhere the library calls
// it.
//   attnres_route   the reference AttnRes route: alpha = softmax(route(z)) over the sources,
//                   returns Σ_j alpha_j S_j (nn/lm/micro_lm.h)
//   pseudo_query_mix  the paper AttnRes mixture: alpha = softmax_j(w · RMSNorm(S_j)), returns
//                   Σ_j alpha_j S_j (nn/lm/micro_lm.h)
//   paired_summary  the paired comparison of per-seed losses: differences, mean, the 95% t
//                   interval, the t-test and the sign test (tools/attnres/stats.h)
#include "nn/lm/micro_lm.h"
#include "tools/attnres/stats.h"
#include "tools/learn/grade.h"

namespace dg {

Tensor attnres_route(const Linear& route, const Tensor& z, const std::vector<Tensor>& sources,
                     Tensor& alpha) {
  dg::learn::not_written("attnres_route");
}

Tensor pseudo_query_mix(const std::vector<Tensor>& sources, const Tensor& w,
                        const Tensor& unit_gain, double eps, Tensor& alpha_out) {
  dg::learn::not_written("pseudo_query_mix");
}

PairedSummary paired_summary(const std::vector<double>& baseline,
                             const std::vector<double>& method) {
  dg::learn::not_written("paired_summary");
}

}  // namespace dg
