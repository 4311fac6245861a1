// Recurrent layers and cells (see recurrent.h): torch.nn.RNN/LSTM/GRU and their cells, built from
// linear, the cell ops of autograd/ops_recurrent.cpp (or their plain twins), stack, cat and
// dropout.
#include "nn/recurrent.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "autograd/op_trace.h"
#include "nn/init.h"

namespace dg {

namespace {
int64_t gate_count(RecurrentKind kind) {
  return kind == RecurrentKind::lstm ? 4 : kind == RecurrentKind::gru ? 3 : 1;
}
const char* kind_name(RecurrentKind kind, bool cell) {
  switch (kind) {
    case RecurrentKind::lstm:
      return cell ? "LSTMCell" : "LSTM";
    case RecurrentKind::gru:
      return cell ? "GRUCell" : "GRU";
    default:
      return cell ? "RNNCell" : "RNN";
  }
}
// torch's reset_parameters of every recurrent module and cell: each parameter, in registration
// order, U(−1/√H, 1/√H). Skipped under init::SkipGuard.
void init_uniform(const Module& m, int64_t hidden_size) {
  if (init::skipping()) return;
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  for (const NamedTensor& p : m.named_parameters()) init::uniform_(p.second, -bound, bound);
}
void check_sizes(const char* name, int64_t input_size, int64_t hidden_size) {
  if (input_size < 1 || hidden_size < 1)
    throw std::invalid_argument(
        fmt::format("{}: input_size and hidden_size must be >= 1, got {} and {}", name, input_size,
                    hidden_size));
}
// A state argument: undefined (zeros), or `shape` in the module's dtype.
void check_state(const char* name, const char* what, const Tensor& s, const Shape& shape,
                 DType dtype) {
  if (!s.defined()) return;
  check_arg(s.shape() == shape && s.dtype() == dtype, name, s,
            fmt::format("{} {} of {}", what, shape_str(shape), dtype_name(dtype)));
}
// One layer (its directions) as one traced op, the ONNX exporter's RNN, GRU or LSTM node, which
// takes W_ih as an input (the sequence and cell ops see only the projections). In: x [T, N, in],
// then per direction weight_ih, weight_hh, bias_ih, bias_hh, h0, c0 (undefined: not given); out:
// y [T, N, D·H], then per direction h_n, c_n.
void trace_layer(const Recurrent& m, int64_t layer, const Tensor& x, const Tensor& y,
                 const std::vector<Tensor>& h0, const std::vector<Tensor>& c0,
                 const std::vector<Tensor>& h_n, const std::vector<Tensor>& c_n) {
  const int64_t D = m.options.bidirectional ? 2 : 1;
  std::vector<Tensor> in{x}, out{y};
  for (int64_t d = 0, i = layer * D; d < D; ++d, ++i) {
    in.insert(in.end(), {m.weight_ih[i], m.weight_hh[i], m.bias_ih[i], m.bias_hh[i], h0[d], c0[d]});
    out.insert(out.end(), {h_n[i], c_n.empty() ? Tensor() : c_n[i]});
  }
  const char* kinds[] = {"rnn_tanh", "rnn_relu", "lstm", "gru"};
  trace_op("recurrent_layer", in, out, {{"kind", kinds[static_cast<int>(m.kind)]}});
}

// Step t's masks [N, 1] bool for sequences of these lengths: valid (t < length) and ended (the
// opposite); both undefined when every sequence is valid at t (no lengths, or all long enough).
struct StepMasks {
  Tensor valid, ended;
};
StepMasks step_masks(const std::vector<int64_t>& lengths, int64_t t) {
  std::vector<int64_t> valid(lengths.size()), ended(lengths.size());
  bool any_ended = false;
  for (size_t n = 0; n < lengths.size(); ++n) {
    valid[n] = t < lengths[n];
    ended[n] = !valid[n];
    any_ended |= ended[n] != 0;
  }
  if (!any_ended) return {};
  const Shape shape{static_cast<int64_t>(lengths.size()), 1};
  return {Tensor::from_ids(valid, shape, DType::b8), Tensor::from_ids(ended, shape, DType::b8)};
}
std::vector<int64_t> as_int64s(const Tensor& t) {
  std::vector<int64_t> out;
  for (double v : t.to_vector()) out.push_back(static_cast<int64_t>(v));
  return out;
}
Tensor ids_tensor(const std::vector<int64_t>& ids) {
  return Tensor::from_ids(ids, {static_cast<int64_t>(ids.size())});
}
// Batch positions, longest first; ties keep their batch order (a stable sort, as torch's CPU sort
// of the lengths).
std::vector<int64_t> order_by_length(const std::vector<int64_t>& lengths) {
  std::vector<int64_t> order(lengths.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return lengths[a] > lengths[b]; });
  return order;
}
// Packs x [T, B, *] ([B, T, *] with batch_first) of these lengths, its batch in `order` (longest
// first): data rows are index_select'ed from x viewed as [T·B, *].
PackedSequence pack_ordered(const Tensor& input, const std::vector<int64_t>& lengths,
                            bool batch_first, const std::vector<int64_t>& order, bool sorted) {
  const Tensor x = batch_first ? transpose(input, 0, 1) : input;  // [T, B, *]
  const int64_t T = x.size(0), B = x.size(1);
  std::vector<int64_t> rows, batch_sizes;
  for (int64_t t = 0; t < T && lengths[order[0]] > t; ++t) {
    int64_t count = 0;
    for (int64_t i = 0; i < B && lengths[order[i]] > t; ++i, ++count)
      rows.push_back(t * B + order[i]);
    batch_sizes.push_back(count);
  }
  Shape flat_shape = x.shape();
  flat_shape.erase(flat_shape.begin());
  flat_shape[0] = T * B;
  PackedSequence out;
  out.data = index_select(reshape(x, flat_shape), 0, ids_tensor(rows));
  out.batch_sizes = ids_tensor(batch_sizes);
  if (!sorted) {
    std::vector<int64_t> inverse(order.size());
    for (size_t i = 0; i < order.size(); ++i) inverse[order[i]] = static_cast<int64_t>(i);
    out.sorted_indices = ids_tensor(order);
    out.unsorted_indices = ids_tensor(inverse);
  }
  return out;
}
// A recurrent output [T, B, *] packed as `like` was (its batch order and sortedness).
PackedSequence pack_in_order(const Tensor& output, const std::vector<int64_t>& lengths,
                             bool batch_first, const PackedSequence& like) {
  const bool sorted = !like.sorted_indices.defined();
  const std::vector<int64_t> order =
      sorted ? order_by_length(lengths) : as_int64s(like.sorted_indices);
  return pack_ordered(output, lengths, batch_first, order, sorted);
}
}  // namespace

// ---- packed sequences (torch.nn.utils.rnn) ------------------------------------------------------
PackedSequence pack_padded_sequence(const Tensor& input, const std::vector<int64_t>& lengths,
                                    bool batch_first, bool enforce_sorted) {
  const char* op = "pack_padded_sequence";
  check_arg(input.defined() && input.dim() >= 2, op, input,
            batch_first ? "an input [B, T, *]" : "an input [T, B, *]");
  const int64_t T = input.size(batch_first ? 1 : 0), B = input.size(batch_first ? 0 : 1);
  if (static_cast<int64_t>(lengths.size()) != B)
    throw std::invalid_argument(fmt::format(
        "{}: expected len(lengths) to be equal to batch_size, but got {} (batch_size={})", op,
        lengths.size(), B));
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] <= 0)
      throw std::invalid_argument(
          fmt::format("{}: length of all samples has to be greater than 0, but lengths[{}] = {}",
                      op, i, lengths[i]));
    if (lengths[i] > T)
      throw std::invalid_argument(
          fmt::format("{}: lengths[{}] = {} is longer than the input's {} time steps {}", op, i,
                      lengths[i], T, input.describe()));
    if (enforce_sorted && i > 0 && lengths[i] > lengths[i - 1])
      throw std::invalid_argument(fmt::format(
          "{}: `lengths` array must be sorted in decreasing order when `enforce_sorted` is True "
          "(lengths[{}] = {} > lengths[{}] = {}); pass enforce_sorted = false to sort them",
          op, i, lengths[i], i - 1, lengths[i - 1]));
  }
  return pack_ordered(input, lengths, batch_first, order_by_length(lengths), enforce_sorted);
}

PackedSequence pack_padded_sequence(const Tensor& input, const Tensor& lengths, bool batch_first,
                                    bool enforce_sorted) {
  check_arg(lengths.defined() && lengths.dim() == 1 &&
                (lengths.dtype() == DType::i64 || lengths.dtype() == DType::i32),
            "pack_padded_sequence", lengths, "lengths as a 1-D int64 or int32 tensor");
  return pack_padded_sequence(input, as_int64s(lengths), batch_first, enforce_sorted);
}

PaddedSequence pad_packed_sequence(const PackedSequence& sequence, bool batch_first,
                                   double padding_value, std::optional<int64_t> total_length) {
  const char* op = "pad_packed_sequence";
  const Tensor& data = sequence.data;
  check_arg(data.defined() && data.dim() >= 1, op, data, "packed data [sum(lengths), *]");
  check_arg(sequence.batch_sizes.defined() && sequence.batch_sizes.dim() == 1 &&
                sequence.batch_sizes.dtype() == DType::i64 && sequence.batch_sizes.numel() > 0,
            op, sequence.batch_sizes, "batch_sizes as a non-empty 1-D int64 tensor");
  const std::vector<int64_t> sizes = as_int64s(sequence.batch_sizes);
  const int64_t T = static_cast<int64_t>(sizes.size()), B = sizes[0];
  int64_t total = 0;
  for (int64_t t = 0; t < T; ++t) {
    if (sizes[t] < 1 || (t > 0 && sizes[t] > sizes[t - 1]))
      throw std::invalid_argument(fmt::format(
          "{}: batch_sizes must be positive and non-increasing, got {}", op, shape_str(sizes)));
    total += sizes[t];
  }
  check_arg(data.size(0) == total, op, data,
            fmt::format("packed data with sum(batch_sizes) = {} rows", total));
  const bool sorted = !sequence.sorted_indices.defined();
  std::vector<int64_t> rank(B);  // each batch position's place in the packed (sorted) order
  for (int64_t b = 0; b < B; ++b) rank[b] = b;
  if (!sorted) {
    check_arg(sequence.unsorted_indices.defined() && sequence.unsorted_indices.numel() == B, op,
              sequence.unsorted_indices, fmt::format("unsorted_indices [{}]", B));
    rank = as_int64s(sequence.unsorted_indices);
  }
  const int64_t steps = total_length.value_or(T);
  if (steps < T)
    throw std::invalid_argument(fmt::format(
        "{}: expected total_length to be at least the length of the longest sequence in input, "
        "but got total_length={} and max sequence length being {}",
        op, steps, T));
  // Padded position (t, b) reads packed row offset[t] + rank[b], or the padding row `total`.
  std::vector<int64_t> rows, lengths(B, 0);
  for (int64_t t = 0, offset = 0; t < steps; offset += t < T ? sizes[t] : 0, ++t)
    for (int64_t b = 0; b < B; ++b) {
      const bool valid = t < T && rank[b] < sizes[t];
      rows.push_back(valid ? offset + rank[b] : total);
      lengths[b] += valid;
    }
  Shape row_shape = data.shape();
  row_shape[0] = 1;
  const Tensor table = cat({data, Tensor::full(row_shape, padding_value, data.dtype())}, 0);
  Shape padded_shape = data.shape();
  padded_shape[0] = B;
  padded_shape.insert(padded_shape.begin(), steps);
  Tensor padded = reshape(index_select(table, 0, ids_tensor(rows)), padded_shape);
  return {batch_first ? transpose(padded, 0, 1) : padded, ids_tensor(lengths)};
}

Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first, double padding_value) {
  const char* op = "pad_sequence";
  if (sequences.empty())
    throw std::invalid_argument(fmt::format("{}: received an empty list of sequences", op));
  int64_t T = 0;
  for (const Tensor& s : sequences) {
    check_arg(s.defined() && s.dim() >= 1, op, s, "sequences [L, *] of at least one axis");
    Shape trailing = s.shape(), first = sequences[0].shape();
    trailing.erase(trailing.begin());
    first.erase(first.begin());
    check_arg(trailing == first && s.dtype() == sequences[0].dtype(), op, s,
              fmt::format("the trailing shape {} and dtype {} of the first sequence",
                          shape_str(first), dtype_name(sequences[0].dtype())));
    T = std::max(T, s.size(0));
  }
  std::vector<Tensor> padded;
  for (const Tensor& s : sequences) {
    if (s.size(0) == T) {
      padded.push_back(s);
      continue;
    }
    Shape pad_shape = s.shape();
    pad_shape[0] = T - s.size(0);
    padded.push_back(cat({s, Tensor::full(pad_shape, padding_value, s.dtype())}, 0));
  }
  return stack(padded, batch_first ? 0 : 1);
}

PackedSequence pack_sequence(const std::vector<Tensor>& sequences, bool enforce_sorted) {
  std::vector<int64_t> lengths;
  for (const Tensor& s : sequences) lengths.push_back(s.defined() && s.dim() >= 1 ? s.size(0) : 0);
  return pack_padded_sequence(pad_sequence(sequences), lengths, false, enforce_sorted);
}

HiddenAndCell recurrent_step(RecurrentKind kind, GateMath math, const Tensor& gates_x,
                             const Tensor& gates_h, const Tensor& h, const Tensor& c) {
  const bool fused = math != GateMath::composed;
  switch (kind) {
    case RecurrentKind::lstm:
      return fused ? lstm_cell(gates_x, gates_h, c) : plain_lstm_cell(gates_x, gates_h, c);
    case RecurrentKind::gru:
      return {fused ? gru_cell(gates_x, gates_h, h) : plain_gru_cell(gates_x, gates_h, h), {}};
    case RecurrentKind::rnn_tanh:
      return {tanh(add(gates_x, gates_h)), {}};
    case RecurrentKind::rnn_relu:
      return {relu(add(gates_x, gates_h)), {}};
  }
  throw std::logic_error("recurrent_step: unknown kind");
}

// ---- RNN, LSTM, GRU ---------------------------------------------------------------------------
Recurrent::Recurrent(RecurrentKind kind_, const RecurrentOptions& options_, DType dtype,
                     TorchGenerator* dropout_generator)
    : Module(dtype), kind(kind_), options(options_), dropout_generator_(dropout_generator) {
  check_sizes(name(), options.input_size, options.hidden_size);
  if (options.num_layers < 1)
    throw std::invalid_argument(
        fmt::format("{}: num_layers must be >= 1, got {}", name(), options.num_layers));
  if (!(options.dropout >= 0.0 && options.dropout <= 1.0))
    throw std::invalid_argument(
        fmt::format("{}: dropout must be in [0, 1], got {}", name(), options.dropout));
  const int64_t H = options.hidden_size, G = gate_count(kind) * H;
  for (int64_t l = 0; l < options.num_layers; ++l)
    for (int64_t d = 0; d < directions(); ++d) {  // torch's names: weight_ih_l1_reverse
      const std::string suffix = fmt::format("_l{}{}", l, d ? "_reverse" : "");
      const int64_t in = l == 0 ? options.input_size : H * directions();
      weight_ih.push_back(register_parameter("weight_ih" + suffix, Tensor::zeros({G, in}, dtype)));
      weight_hh.push_back(register_parameter("weight_hh" + suffix, Tensor::zeros({G, H}, dtype)));
      bias_ih.push_back(options.bias
                            ? register_parameter("bias_ih" + suffix, Tensor::zeros({G}, dtype))
                            : Tensor());
      bias_hh.push_back(options.bias
                            ? register_parameter("bias_hh" + suffix, Tensor::zeros({G}, dtype))
                            : Tensor());
    }
  init_uniform(*this, H);
}

const char* Recurrent::name() const { return kind_name(kind, false); }

RecurrentOutput Recurrent::forward(const Tensor& input, const Tensor& h0, const Tensor& c0) const {
  RecurrentOutput result;  // the hooks see the output sequence; the states come from the body
  result.output = hooked_list(
      [&](const std::vector<Tensor>& in) {
        result = run(in[0], in[1], in[2]);
        return result.output;
      },
      {input, h0, c0});
  return result;
}

PackedRecurrentOutput Recurrent::forward(const PackedSequence& input, const Tensor& h0,
                                         const Tensor& c0) const {
  PackedRecurrentOutput result;  // the hooks see the packed data; the states come from the body
  result.output.data = hooked_list(
      [&](const std::vector<Tensor>& in) {
        PackedSequence packed = input;
        packed.data = in[0];
        check_arg(packed.data.defined() && packed.data.dim() == 2, name(), packed.data,
                  "a PackedSequence whose data is [sum(lengths), input_size]");
        const PaddedSequence padded = pad_packed_sequence(packed, options.batch_first);
        const std::vector<int64_t> lengths = as_int64s(padded.lengths);
        const RecurrentOutput r = run(padded.padded, in[1], in[2], lengths);
        result.output = pack_in_order(r.output, lengths, options.batch_first, packed);
        result.h_n = r.h_n;
        result.c_n = r.c_n;
        return result.output.data;
      },
      {input.data, h0, c0});
  return result;
}

RecurrentOutput Recurrent::run(const Tensor& input, const Tensor& h0, const Tensor& c0,
                               const std::vector<int64_t>& lengths) const {
  const char* op = name();
  const int64_t L = options.num_layers, D = directions(), H = options.hidden_size;
  check_arg(input.defined() && (input.dim() == 2 || input.dim() == 3), op, input,
            options.batch_first ? "an input [N, T, input_size] or [T, input_size] (unbatched)"
                                : "an input [T, N, input_size] or [T, input_size] (unbatched)");
  check_arg(input.dtype() == dtype(), op, input,
            fmt::format("an input of the module's dtype {}", dtype_name(dtype())));
  check_arg(input.size(-1) == options.input_size, op, input,
            fmt::format("an input whose last axis is input_size = {}", options.input_size));
  const bool batched = input.dim() == 3;
  // x [T, N, in], time first, as the steps read it (torch's unbatched input is [T, in] whatever
  // batch_first says)
  Tensor x = !batched ? unsqueeze(input, 1) : options.batch_first ? transpose(input, 0, 1) : input;
  const int64_t T = x.size(0), N = x.size(1);
  check_arg(T >= 1, op, input, "an input with at least one time step");
  const Shape state_shape = batched ? Shape{L * D, N, H} : Shape{L * D, H};
  check_state(op, "h0", h0, state_shape, dtype());
  if (kind == RecurrentKind::lstm)
    check_state(op, "c0", c0, state_shape, dtype());
  else
    check_arg(!c0.defined(), op, c0, "no c0 (only an LSTM has a cell state)");
  auto initial = [&](const Tensor& s, int64_t index) {  // [N, H] of layer·D + direction
    if (!s.defined()) return Tensor::zeros({N, H}, dtype());
    return reshape(slice(s, 0, index, index + 1), {N, H});
  };
  const bool lstm = kind == RecurrentKind::lstm;
  const bool sequence_op =
      gate_math == GateMath::fused && lengths.empty() && (lstm || kind == RecurrentKind::gru);
  std::vector<Tensor> h_n, c_n;
  for (int64_t l = 0; l < L; ++l) {
    const Tensor layer_input = x;
    std::vector<Tensor> outputs, h_init, c_init;
    for (int64_t d = 0; d < D; ++d) {
      h_init.push_back(initial(h0, l * D + d));
      c_init.push_back(lstm ? initial(c0, l * D + d) : Tensor());
    }
    const std::vector<RecurrentOutput> layer =
        sequence_op ? run_sequence(x, l, h_init, c_init) : std::vector<RecurrentOutput>();
    for (int64_t d = 0; d < D; ++d) {
      const RecurrentOutput r =
          sequence_op ? layer[d]
                      : run_direction(x, l * D + d, d == 1, h_init[d], c_init[d], lengths);
      outputs.push_back(r.output);
      h_n.push_back(r.h_n);
      if (r.c_n.defined()) c_n.push_back(r.c_n);
    }
    x = D == 2 ? cat(outputs, 2) : outputs[0];  // [T, N, D·H]
    if (tracing() && lengths.empty())           // the states given, or undefined
      trace_layer(*this, l, layer_input, x, h0.defined() ? h_init : std::vector<Tensor>(D),
                  c0.defined() ? c_init : std::vector<Tensor>(D), h_n, c_n);
    if (l + 1 < L && options.dropout > 0 && is_training())
      x = dropout(x, options.dropout, true,
                  dropout_generator_ ? *dropout_generator_ : default_generator());
  }
  RecurrentOutput result{x, stack(h_n, 0), c_n.empty() ? Tensor() : stack(c_n, 0)};
  if (!batched) {
    result.output = squeeze(result.output, 1);
    result.h_n = squeeze(result.h_n, 1);
    if (result.c_n.defined()) result.c_n = squeeze(result.c_n, 1);
  } else if (options.batch_first) {
    result.output = transpose(result.output, 0, 1);
  }
  return result;
}

Tensor Recurrent::input_projection(const Tensor& x, int64_t index) const {
  const bool fold_bias = kind != RecurrentKind::gru && options.bias;
  const Tensor input_bias = fold_bias ? add(bias_ih[index], bias_hh[index]) : bias_ih[index];
  return linear(reshape(x, {x.size(0) * x.size(1), x.size(2)}), weight_ih[index], input_bias);
}

// The directions of layer `layer` in one op, so that a bidirectional layer's two recurrences run
// one per thread.
std::vector<RecurrentOutput> Recurrent::run_sequence(const Tensor& x, int64_t layer,
                                                     const std::vector<Tensor>& h,
                                                     const std::vector<Tensor>& c) const {
  const int64_t D = directions();
  const bool lstm = kind == RecurrentKind::lstm;
  std::vector<SequenceDirection> dirs;
  for (int64_t d = 0; d < D; ++d) {
    const int64_t index = layer * D + d;
    dirs.push_back({input_projection(x, index), weight_hh[index], lstm ? Tensor() : bias_hh[index],
                    h[d], c[d], d == 1});
  }
  std::vector<RecurrentOutput> out;
  for (const SequenceResult& r : lstm ? lstm_sequence(dirs) : gru_sequence(dirs))
    out.push_back({r.output, r.h_n, r.c_n});
  return out;
}

// All T steps' input projections are one GEMM, [T·N, in] · W_ihᵀ -> [T·N, G·H]; step t reads its
// N rows (a view) and adds h · W_hhᵀ. For RNN and LSTM the two biases are summed once and added
// to the input projection (the same sum torch adds at each step); a GRU keeps b_hh inside r·(..).
// With lengths, a step where some sequence has ended keeps that sequence's states (where) and
// gives it a zero output (masked_fill), so its reverse direction starts at its last valid step with
// the initial state, as torch's packed sequences do.
RecurrentOutput Recurrent::run_direction(const Tensor& x, int64_t index, bool reverse,
                                         const Tensor& h0, const Tensor& c0,
                                         const std::vector<int64_t>& lengths) const {
  const int64_t T = x.size(0), N = x.size(1);
  const bool fold_bias = kind != RecurrentKind::gru && options.bias;
  const Tensor gates_x = input_projection(x, index);
  const Tensor hidden_bias = fold_bias ? Tensor() : bias_hh[index];
  Tensor h = h0, c = c0;
  std::vector<Tensor> outputs(T);
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = reverse ? T - 1 - s : s;
    const HiddenAndCell next =
        recurrent_step(kind, gate_math, slice(gates_x, 0, t * N, (t + 1) * N),
                       linear(h, weight_hh[index], hidden_bias), h, c);
    const StepMasks masks = step_masks(lengths, t);
    if (!masks.valid.defined()) {
      h = next.h, c = next.c;
      outputs[t] = h;
      continue;
    }
    h = where(masks.valid, next.h, h);
    if (c.defined()) c = where(masks.valid, next.c, c);
    outputs[t] = masked_fill(next.h, masks.ended, 0.0);
  }
  return {stack(outputs, 0), h, c};
}

// ---- cells ------------------------------------------------------------------------------------
RecurrentCell::RecurrentCell(RecurrentKind kind_, int64_t input_size_, int64_t hidden_size_,
                             bool bias, DType dtype)
    : Module(dtype), kind(kind_), input_size(input_size_), hidden_size(hidden_size_) {
  check_sizes(name(), input_size, hidden_size);
  const int64_t G = gate_count(kind) * hidden_size;
  weight_ih = register_parameter("weight_ih", Tensor::zeros({G, input_size}, dtype));
  weight_hh = register_parameter("weight_hh", Tensor::zeros({G, hidden_size}, dtype));
  if (bias) {
    bias_ih = register_parameter("bias_ih", Tensor::zeros({G}, dtype));
    bias_hh = register_parameter("bias_hh", Tensor::zeros({G}, dtype));
  }
  init_uniform(*this, hidden_size);
}

const char* RecurrentCell::name() const { return kind_name(kind, true); }

RecurrentOutput RecurrentCell::forward(const Tensor& x, const Tensor& h, const Tensor& c) const {
  RecurrentOutput result;  // the hooks see h' (the primary output); c' comes from the body
  result.output = hooked_list(
      [&](const std::vector<Tensor>& in) {
        const char* op = name();
        const Tensor& input = in[0];
        check_arg(input.defined() && (input.dim() == 1 || input.dim() == 2), op, input,
                  "an input [N, input_size] or [input_size] (unbatched)");
        check_arg(input.dtype() == dtype() && input.size(-1) == input_size, op, input,
                  fmt::format("an input [.., {}] of {}", input_size, dtype_name(dtype())));
        const bool batched = input.dim() == 2;
        const int64_t N = batched ? input.size(0) : 1;
        const Shape state_shape = batched ? Shape{N, hidden_size} : Shape{hidden_size};
        check_state(op, "h", in[1], state_shape, dtype());
        if (kind == RecurrentKind::lstm)
          check_state(op, "c", in[2], state_shape, dtype());
        else
          check_arg(!in[2].defined(), op, in[2], "no c (only an LSTMCell has a cell state)");
        auto state = [&](const Tensor& s) {
          if (!s.defined()) return Tensor::zeros({N, hidden_size}, dtype());
          return batched ? s : unsqueeze(s, 0);
        };
        const Tensor x2 = batched ? input : unsqueeze(input, 0), h2 = state(in[1]);
        const HiddenAndCell next = recurrent_step(
            kind, gate_math, linear(x2, weight_ih, bias_ih), linear(h2, weight_hh, bias_hh), h2,
            kind == RecurrentKind::lstm ? state(in[2]) : Tensor());
        result.h_n = batched ? next.h : squeeze(next.h, 0);
        if (next.c.defined()) result.c_n = batched ? next.c : squeeze(next.c, 0);
        return result.h_n;
      },
      {x, h, c});
  return result;
}

// ---- torch's repr texts ------------------------------------------------------------------------
std::string Recurrent::type_name() const { return name(); }
std::string Recurrent::extra_repr() const {  // torch's RNNBase.extra_repr (no nonlinearity)
  std::string s = fmt::format("{}, {}", options.input_size, options.hidden_size);
  if (options.num_layers != 1) s += fmt::format(", num_layers={}", options.num_layers);
  if (!options.bias) s += ", bias=False";
  if (options.batch_first) s += ", batch_first=True";
  if (options.dropout != 0) s += ", dropout=" + repr_float(options.dropout);
  if (options.bidirectional) s += ", bidirectional=True";
  return s;
}
std::string RecurrentCell::type_name() const { return name(); }
std::string RecurrentCell::extra_repr() const {  // torch's RNNCellBase.extra_repr
  std::string s = fmt::format("{}, {}", input_size, hidden_size);
  if (!weight_ih.defined() || !bias_ih.defined()) s += ", bias=False";
  if (kind == RecurrentKind::rnn_relu) s += ", nonlinearity=relu";
  return s;
}

}  // namespace dg
