// The oneDNN convolution path (see kernels_conv_onednn.h): primitives keyed by geometry, pass,
// chunk size, precision and algorithm (direct or Winograd), made once per thread for one thread;
// then per chunk of images: the inputs reordered from NCHW into the primitive's layouts, the
// primitive, and the output reordered back (added into it for the input gradient). Weights are
// reordered once per call.
#include "tensor/kernels_conv_onednn.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "tensor/cpu_features.h"  // amx_bf16
#include "tensor/gemm_kernels.h"  // matmul_precision
#include "tensor/threads.h"       // OneOmpThread, parallel_for

namespace dg {

namespace {
using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;

std::atomic<ConvKernel> g_conv_kernel{ConvKernel::automatic};

dnnl::engine& conv_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

// One pass of one geometry, for chunks of nb images, in one precision.
struct ConvKey {
  ConvPass pass;
  int64_t nb, C, H, W, O, kH, kW, sH, sW, pH, pW, dH, dW, Ho, Wo;
  bool bf16, bias, winograd;
  int64_t ldO = 0;  // dy's channels when the key is a block of O of them (0: O)
  bool operator==(const ConvKey&) const = default;
};
struct ConvKeyHash {
  size_t operator()(const ConvKey& k) const {
    size_t h = size_t(k.pass) * 2 + k.bf16 * 4 + k.bias + k.winograd * 8;
    for (int64_t v : {k.nb, k.C, k.H, k.W, k.O, k.kH, k.kW, k.sH, k.sW, k.pH, k.pW, k.dH, k.dW,
                      k.Ho, k.Wo, k.ldO})
      h = h * 1000003u ^ size_t(v);
    return h;
  }
};
// Whether the automatic kernel asks for oneDNN's float32 Winograd F(4, 3) (see the header): in
// float32 precision from kWinogradMinPixels output positions, in bf16 from kBf16WinogradMinPixels
// where the bf16 kernels are AVX512_BF16's (measured there; AMX's were not measured: direct).
bool winograd_suits(const ConvGeom& g) {
  static const bool amx = cpu_features().amx_bf16;
  const int64_t min_pixels = matmul_precision() == MatmulPrecision::float32 ? kWinogradMinPixels
                             : amx                                          ? INT64_MAX
                                   : kBf16WinogradMinPixels;
  return conv_kernel() == ConvKernel::automatic && g.kH == 3 && g.kW == 3 && g.sH == 1 &&
         g.sW == 1 && g.dH == 1 && g.dW == 1 && g.groups == 1 && g.C >= kWinogradMinChannels &&
         g.O >= kWinogradMinChannels && g.Ho * g.Wo >= min_pixels;
}

// The key of pass over chunks of nb images. bf16 operands in bf16 precision, but where
// winograd_suits: that kernel is float32 (oneDNN has no bf16 Winograd), more precise than asked.
ConvKey key_of(const ConvGeom& g, ConvPass pass, int64_t nb, bool bias) {
  const bool winograd = winograd_suits(g);
  return {pass,
          nb,
          g.C,
          g.H,
          g.W,
          g.O,
          g.kH,
          g.kW,
          g.sH,
          g.sW,
          g.pH,
          g.pW,
          g.dH,
          g.dW,
          g.Ho,
          g.Wo,
          matmul_precision() == MatmulPrecision::bf16 && !winograd,
          bias,
          winograd};
}

// A reorder from one layout (and type) of a tensor to another, optionally adding into the target.
struct Reorder {
  memory::desc from, to;
  dnnl::reorder prim;
  void run(dnnl::stream& s, const void* src, void* dst) const {
    memory a(from, conv_engine(), const_cast<void*>(src)), b(to, conv_engine(), dst);
    prim.execute(s, a, b);
  }
};
Reorder make_reorder(const memory::desc& from, const memory::desc& to, bool add = false) {
  dnnl::primitive_attr attr;
  if (add) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  return {
      from, to,
      dnnl::reorder(dnnl::reorder::primitive_desc(conv_engine(), from, conv_engine(), to, attr))};
}

// A pass's primitive and its reorders. in[0] feeds the source (x, or dy for the input gradient),
// in[1] dy for the weight gradient; weights: w into the primitive's layout (forward and input
// gradient); out: the primitive's output back to the user's layout.
struct ConvPrimitive {
  dnnl::primitive conv;
  std::vector<Reorder> in;
  Reorder weights, out;
  memory::desc scratch;
  std::string impl;
};

memory::desc user_desc(memory::dims d) {
  return memory::desc(d, dt::f32, d.size() == 4 ? tag::nchw : tag::x);
}

// Makes the primitive for k with algorithm alg; throws dnnl::error where oneDNN has none.
ConvPrimitive make_conv_primitive(const ConvKey& k, dnnl::algorithm alg) {
  OneOmpThread one;  // sized for one thread, as it will run
  const dt in = k.bf16 ? dt::bf16 : dt::f32;
  const memory::dims xs{k.nb, k.C, k.H, k.W}, ws{k.O, k.C, k.kH, k.kW}, ys{k.nb, k.O, k.Ho, k.Wo};
  const memory::dims strides{k.sH, k.sW}, dilation{k.dH - 1, k.dW - 1}, pad_l{k.pH, k.pW};
  // The right/bottom padding that makes the output Ho × Wo (it differs from pH for
  // conv_transpose2d's output_padding, and may be negative).
  const memory::dims pad_r{(k.Ho - 1) * k.sH + (k.kH - 1) * k.dH + 1 - k.H - k.pH,
                           (k.Wo - 1) * k.sW + (k.kW - 1) * k.dW + 1 - k.W - k.pW};
  auto any = [](memory::dims d, dt t) { return memory::desc(d, t, tag::any); };
  const memory::desc bias_desc = k.bias ? user_desc({k.O}) : memory::desc();
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::convolution_forward::primitive_desc fwd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, alg, any(xs, in),
                                      any(ws, in), bias_desc, any(ys, dt::f32), strides, dilation,
                                      pad_l, pad_r),
      attr, conv_engine());
  ConvPrimitive p;
  if (k.pass == ConvPass::forward) {
    p.conv = dnnl::convolution_forward(fwd);
    p.in = {make_reorder(user_desc(xs), fwd.src_desc())};
    p.weights = make_reorder(user_desc(ws), fwd.weights_desc());
    p.out = make_reorder(fwd.dst_desc(), user_desc(ys));
    p.scratch = fwd.scratchpad_desc();
    p.impl = fwd.impl_info_str();
  } else if (k.pass == ConvPass::backward_input) {
    dnnl::convolution_backward_data::primitive_desc pd(
        dnnl::convolution_backward_data::desc(alg, any(xs, dt::f32), any(ws, in), any(ys, in),
                                              strides, dilation, pad_l, pad_r),
        attr, conv_engine(), fwd);
    p.conv = dnnl::convolution_backward_data(pd);
    p.in = {make_reorder(user_desc(ys), pd.diff_dst_desc())};
    p.weights = make_reorder(user_desc(ws), pd.weights_desc());
    p.out = make_reorder(pd.diff_src_desc(), user_desc(xs), /*add=*/true);
    p.scratch = pd.scratchpad_desc();
    p.impl = pd.impl_info_str();
  } else {
    // dy's user layout: NCHW, or for a block of O of dy's ldO channels that block's strided view
    const memory::desc dy_user =
        k.ldO == 0
            ? user_desc(ys)
            : memory::desc(ys, dt::f32, memory::dims{k.ldO * k.Ho * k.Wo, k.Ho * k.Wo, k.Wo, 1});
    dnnl::convolution_backward_weights::primitive_desc pd(
        dnnl::convolution_backward_weights::desc(alg, any(xs, in), any(ws, dt::f32), any(ys, in),
                                                 strides, dilation, pad_l, pad_r),
        attr, conv_engine(), fwd);
    p.conv = dnnl::convolution_backward_weights(pd);
    p.in = {make_reorder(user_desc(xs), pd.src_desc()), make_reorder(dy_user, pd.diff_dst_desc())};
    p.out = make_reorder(pd.diff_weights_desc(), user_desc(ws), /*add=*/k.ldO != 0);
    p.scratch = pd.scratchpad_desc();
    p.impl = pd.impl_info_str();
  }
  return p;
}

// The primitive for k: Winograd where k asks for it and oneDNN has it for the shape, else direct.
ConvPrimitive make_conv_primitive(const ConvKey& k) {
  if (k.winograd) try {
      return make_conv_primitive(k, dnnl::algorithm::convolution_winograd);
    } catch (const dnnl::error&) {
    }
  return make_conv_primitive(k, dnnl::algorithm::convolution_direct);
}

// A buffer on a 64-byte boundary (oneDNN's Winograd kernels load their scratchpad with aligned
// vector moves; std::vector<char> gives 16 bytes), grown to the largest use and kept.
struct AlignedBuffer {
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> data;
  size_t bytes = 0;
};

// This thread's stream, primitives and buffers (grown to the largest use and kept).
struct ConvThreadState {
  dnnl::stream stream{conv_engine()};
  std::unordered_map<ConvKey, ConvPrimitive, ConvKeyHash> primitives;
  AlignedBuffer src, dst, dst_other, scratch, weights, weights_local, src_shared;
};
ConvThreadState& conv_thread_state() {
  thread_local ConvThreadState state;
  return state;
}
void* grown(AlignedBuffer& buf, size_t bytes) {
  if (buf.bytes < bytes) {
    buf.data.reset(static_cast<char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
    if (!buf.data) throw std::bad_alloc();
    buf.bytes = bytes;
  }
  return buf.data.get();
}

const ConvPrimitive& conv_primitive(const ConvKey& k) {
  auto& cache = conv_thread_state().primitives;
  auto it = cache.find(k);
  if (it == cache.end()) it = cache.emplace(k, make_conv_primitive(k)).first;
  return it->second;
}

// The implementation name for k, "" where oneDNN has no primitive; remembered per thread.
const std::string& impl_of(const ConvKey& k) {
  thread_local std::unordered_map<ConvKey, std::string, ConvKeyHash> names;
  auto it = names.find(k);
  if (it != names.end()) return it->second;
  std::string name;
  try {
    name = conv_primitive(k).impl;
  } catch (const dnnl::error&) {
  }
  return names.emplace(k, name).first->second;
}

// Images per chunk: the weight gradient's fixed conv_weight_grad_chunk; the other passes spread the
// batch over the threads, at most kConvBatchChunk images a chunk.
int64_t chunk_images(const ConvGeom& g, ConvPass pass) {
  if (pass == ConvPass::backward_weight) return conv_weight_grad_chunk(g.Ho, g.Wo);
  const int64_t threads = conv_runs_parallel(g) ? omp_get_max_threads() : 1;
  return std::clamp<int64_t>((g.N + threads - 1) / threads, 1, kConvBatchChunk);
}

// Runs body(n0, nb, primitive, state) for every chunk [n0, n0 + nb) of the batch, chunks over the
// threads; each chunk's primitive is made on (and for) the thread running it.
template <class F>
void for_each_chunk(const ConvGeom& g, ConvPass pass, bool bias, const F& body) {
  const int64_t nb = chunk_images(g, pass), chunks = (g.N + nb - 1) / nb;
  parallel_for(chunks, conv_runs_parallel(g), [&](int64_t c) {
    OneOmpThread one;
    const int64_t n0 = c * nb, n = std::min(nb, g.N - n0);
    ConvThreadState& state = conv_thread_state();
    body(c, n0, conv_primitive(key_of(g, pass, n, bias)), state);
  });
}

// w [O, C, kH, kW] in the layout the primitive for chunks of nb images reads, reordered by the
// calling thread into its buffer (the chunks share it; a chunk whose primitive wants another
// layout reorders its own copy).
struct SharedWeights {
  memory::desc desc;
  const void* data = nullptr;
};
SharedWeights reordered_weights(const ConvGeom& g, ConvPass pass, bool bias, const float* w) {
  OneOmpThread one;
  const ConvPrimitive& p =
      conv_primitive(key_of(g, pass, std::min(g.N, chunk_images(g, pass)), bias));
  ConvThreadState& state = conv_thread_state();
  void* buf = grown(state.weights, p.weights.to.get_size());
  p.weights.run(state.stream, w, buf);
  return {p.weights.to, buf};
}
const void* chunk_weights(const ConvPrimitive& p, const SharedWeights& shared, const float* w,
                          ConvThreadState& state) {
  if (p.weights.to == shared.desc) return shared.data;
  void* buf = grown(state.weights_local, p.weights.to.get_size());
  p.weights.run(state.stream, w, buf);
  return buf;
}

// Runs p with its arguments at these addresses (layouts: p's own).
void execute(const ConvPrimitive& p, ConvThreadState& state,
             std::initializer_list<std::pair<int, std::pair<memory::desc, const void*>>> args) {
  std::unordered_map<int, memory> m;
  for (const auto& [arg, at] : args)
    m.emplace(arg, memory(at.first, conv_engine(), const_cast<void*>(at.second)));
  m.emplace(DNNL_ARG_SCRATCHPAD,
            memory(p.scratch, conv_engine(), grown(state.scratch, p.scratch.get_size())));
  p.conv.execute(state.stream, m);
}
}  // namespace

void onednn_conv2d_forward(float* y, const float* x, const float* w, const float* bias,
                           const ConvGeom& g) {
  const bool has_bias = bias != nullptr;
  const SharedWeights shared = reordered_weights(g, ConvPass::forward, has_bias, w);
  const int64_t x_image = g.C * g.H * g.W, y_image = g.O * g.Ho * g.Wo;
  for_each_chunk(g, ConvPass::forward, has_bias,
                 [&](int64_t, int64_t n0, const ConvPrimitive& p, ConvThreadState& state) {
                   void* src = grown(state.src, p.in[0].to.get_size());
                   void* dst = grown(state.dst, p.out.from.get_size());
                   p.in[0].run(state.stream, x + n0 * x_image, src);
                   const void* wts = chunk_weights(p, shared, w, state);
                   if (has_bias)
                     execute(p, state,
                             {{DNNL_ARG_SRC, {p.in[0].to, src}},
                              {DNNL_ARG_WEIGHTS, {p.weights.to, wts}},
                              {DNNL_ARG_BIAS, {user_desc({g.O}), bias}},
                              {DNNL_ARG_DST, {p.out.from, dst}}});
                   else
                     execute(p, state,
                             {{DNNL_ARG_SRC, {p.in[0].to, src}},
                              {DNNL_ARG_WEIGHTS, {p.weights.to, wts}},
                              {DNNL_ARG_DST, {p.out.from, dst}}});
                   p.out.run(state.stream, dst, y + n0 * y_image);
                 });
}

void onednn_conv2d_backward_input(float* dx, const float* dy, const float* w, const ConvGeom& g) {
  const SharedWeights shared = reordered_weights(g, ConvPass::backward_input, false, w);
  const int64_t x_image = g.C * g.H * g.W, y_image = g.O * g.Ho * g.Wo;
  for_each_chunk(g, ConvPass::backward_input, false,
                 [&](int64_t, int64_t n0, const ConvPrimitive& p, ConvThreadState& state) {
                   void* ddst = grown(state.src, p.in[0].to.get_size());
                   void* dsrc = grown(state.dst, p.out.from.get_size());
                   p.in[0].run(state.stream, dy + n0 * y_image, ddst);
                   execute(p, state,
                           {{DNNL_ARG_DIFF_DST, {p.in[0].to, ddst}},
                            {DNNL_ARG_WEIGHTS, {p.weights.to, chunk_weights(p, shared, w, state)}},
                            {DNNL_ARG_DIFF_SRC, {p.out.from, dsrc}}});
                   p.out.run(state.stream, dsrc, dx + n0 * x_image);  // adds
                 });
}

namespace {
// One chunk's input gradient, added into dx (images [n0, n0 + nb)): dy_chunk is dy already in
// pw's layout (the weight gradient's), reordered again only when the input gradient's primitive
// wants another.
void chunk_input_grad(float* dx, const float* dy, const float* w, const void* dy_chunk,
                      const ConvPrimitive& pw, const SharedWeights& shared, const ConvGeom& g,
                      int64_t n0, int64_t nb, ConvThreadState& state) {
  const ConvPrimitive& pd = conv_primitive(key_of(g, ConvPass::backward_input, nb, false));
  const void* ddst = dy_chunk;
  if (!(pd.in[0].to == pw.in[1].to)) {
    void* other = grown(state.dst_other, pd.in[0].to.get_size());
    pd.in[0].run(state.stream, dy + n0 * g.O * g.Ho * g.Wo, other);
    ddst = other;
  }
  void* dsrc = grown(state.src, pd.out.from.get_size());
  execute(pd, state,
          {{DNNL_ARG_DIFF_DST, {pd.in[0].to, ddst}},
           {DNNL_ARG_WEIGHTS, {pd.weights.to, chunk_weights(pd, shared, w, state)}},
           {DNNL_ARG_DIFF_SRC, {pd.out.from, dsrc}}});
  pd.out.run(state.stream, dsrc, dx + n0 * g.C * g.H * g.W);  // adds
}
}  // namespace

// Over the weight gradient's chunks: dy reordered once per chunk; with dx, the chunk's input
// gradient first (chunk_input_grad); then the chunk's weight gradient into partial [chunks,
// O·C·kH·kW] by one primitive on one thread; then the chunks in order into dw.
void onednn_conv2d_backward(float* dx, float* dw, const float* x, const float* dy, const float* w,
                            const ConvGeom& g) {
  const SharedWeights shared =
      dx ? reordered_weights(g, ConvPass::backward_input, false, w) : SharedWeights{};
  const int64_t x_image = g.C * g.H * g.W, y_image = g.O * g.Ho * g.Wo;
  const int64_t WK = g.O * g.C * g.kH * g.kW;
  const int64_t chunk = conv_weight_grad_chunk(g.Ho, g.Wo), chunks = (g.N + chunk - 1) / chunk;
  float* partial = weight_grad_partials<float>(chunks * WK);
  for_each_chunk(g, ConvPass::backward_weight, false,
                 [&](int64_t c, int64_t n0, const ConvPrimitive& pw, ConvThreadState& state) {
                   void* ddst = grown(state.dst, pw.in[1].to.get_size());
                   pw.in[1].run(state.stream, dy + n0 * y_image, ddst);
                   if (dx)
                     chunk_input_grad(dx, dy, w, ddst, pw, shared, g, n0, std::min(chunk, g.N - n0),
                                      state);
                   void* src = grown(state.src, pw.in[0].to.get_size());
                   void* dwei = grown(state.weights_local, pw.out.from.get_size());
                   pw.in[0].run(state.stream, x + n0 * x_image, src);
                   execute(pw, state,
                           {{DNNL_ARG_SRC, {pw.in[0].to, src}},
                            {DNNL_ARG_DIFF_DST, {pw.in[1].to, ddst}},
                            {DNNL_ARG_DIFF_WEIGHTS, {pw.out.from, dwei}}});
                   pw.out.run(state.stream, dwei, partial + c * WK);
                 });
  add_weight_grad_partials(dw, partial, chunks, WK);
}

void onednn_conv2d_backward_weight(float* dw, const float* x, const float* dy, const ConvGeom& g) {
  onednn_conv2d_backward(nullptr, dw, x, dy, nullptr, g);
}

namespace {
// The output channels per block of the whole-batch weight gradient: a quarter of O in multiples
// of 16 (so four blocks keep 1, 2 or 4 threads busy), all of O where that does not divide it.
int64_t weight_grad_out_block(const ConvGeom& g) {
  const int64_t block = std::max<int64_t>(16, (g.O / 4 + 15) / 16 * 16);
  return g.O % block == 0 ? block : g.O;
}
ConvKey whole_batch_key(const ConvGeom& g) {
  ConvKey k = key_of(g, ConvPass::backward_weight, g.N, false);
  k.ldO = g.O;
  k.O = weight_grad_out_block(g);
  return k;
}
}  // namespace

bool conv_onednn_weight_grad_whole_batch(const ConvGeom& g) {
  return conv_kernel() == ConvKernel::automatic && matmul_precision() == MatmulPrecision::bf16 &&
         g.groups == 1 && g.sH == 1 && g.sW == 1 && g.N > 1 &&
         g.Ho * g.Wo <= kConvBatchedMaxPixels && conv_onednn_runs(g, ConvPass::backward_weight) &&
         impl_of(whole_batch_key(g)).rfind("jit", 0) == 0;
}

// x converted once by the calling thread (the blocks share it); then per block of output
// channels, on one thread: its dy channels converted, the primitive over the whole batch, its
// rows of dw added into by the reorder back.
void onednn_conv2d_backward_weight_whole_batch(float* dw, const float* x, const float* dy,
                                               const ConvGeom& g) {
  const ConvKey k = whole_batch_key(g);
  const int64_t blocks = g.O / k.O, HoWo = g.Ho * g.Wo, K = g.C * g.kH * g.kW;
  const void* src = nullptr;
  {
    OneOmpThread one;
    const ConvPrimitive& p = conv_primitive(k);
    ConvThreadState& state = conv_thread_state();
    void* buf = grown(state.src_shared, p.in[0].to.get_size());
    p.in[0].run(state.stream, x, buf);
    src = buf;
  }
  parallel_for(blocks, conv_runs_parallel(g), [&](int64_t b) {
    OneOmpThread one;
    const ConvPrimitive& p = conv_primitive(k);
    ConvThreadState& state = conv_thread_state();
    void* ddst = grown(state.dst, p.in[1].to.get_size());
    p.in[1].run(state.stream, dy + b * k.O * HoWo, ddst);
    void* dwei = grown(state.weights_local, p.out.from.get_size());
    execute(p, state,
            {{DNNL_ARG_SRC, {p.in[0].to, src}},
             {DNNL_ARG_DIFF_DST, {p.in[1].to, ddst}},
             {DNNL_ARG_DIFF_WEIGHTS, {p.out.from, dwei}}});
    p.out.run(state.stream, dwei, dw + b * k.O * K);  // adds
  });
}

void set_conv_kernel(ConvKernel k) { g_conv_kernel.store(k, std::memory_order_relaxed); }
ConvKernel conv_kernel() { return g_conv_kernel.load(std::memory_order_relaxed); }

std::string conv_onednn_impl(const ConvGeom& g, ConvPass pass) {
  return impl_of(key_of(g, pass, chunk_images(g, pass), pass == ConvPass::forward));
}

bool conv_onednn_runs(const ConvGeom& g, ConvPass pass) {
  const ConvKernel k = conv_kernel();
  if (k == ConvKernel::im2col || g.groups != 1 || g.N == 0) return false;
  if (k == ConvKernel::automatic && pass == ConvPass::backward_input &&
      g.C < kOnednnMinInputGradChannels)
    return false;
  const std::string& impl = impl_of(key_of(g, pass, chunk_images(g, pass), false));
  return impl.rfind("jit", 0) == 0 && impl.find("gemm") == std::string::npos;
}

}  // namespace dg
