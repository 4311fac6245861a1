// Recurrent layers as torch.nn's: RNN (tanh or relu), LSTM and GRU over a sequence (stacked
// layers, bidirectional, dropout between layers, batch_first, unbatched 2-D input), and the
// one-step cells RNNCell, LSTMCell, GRUCell. Parameter names, shapes, gate order (LSTM i, f, g, o;
// GRU r, z, n) and initialisation (every tensor U(−1/√H, 1/√H), in registration order) are
// torch's, so a torch state dict loads unrenamed. Variable-length batches go in as a
// PackedSequence (torch.nn.utils.rnn's pack_padded_sequence / pad_packed_sequence, below). Refuses:
// proj_size (LSTM projections) and inputs or states whose shapes do not fit, naming the module.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "autograd/ops.h"
#include "nn/module.h"
#include "tensor/rng.h"

namespace dg {

// torch.nn.RNN/LSTM/GRU's constructor arguments (proj_size is not supported).
struct RecurrentOptions {
  int64_t input_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;  // input and output [N, T, ..] instead of [T, N, ..]
  double dropout = 0.0;      // on every layer's output but the last, in training mode only
  bool bidirectional = false;
};

// What a recurrent layer returns: the output sequence and the final states, in torch's shapes.
struct RecurrentOutput {
  Tensor output;  // [T, N, D·H] ([N, T, D·H] with batch_first; [T, D·H] unbatched), D = 1 or 2
  Tensor h_n;  // [num_layers·D, N, H] ([num_layers·D, H] unbatched); layer l direction d at l·D+d
  Tensor c_n;  // LSTM only, as h_n
};

// torch.nn.utils.rnn.PackedSequence: the valid steps of a batch of sequences of different
// lengths, time step by time step. data [sum(lengths), *] holds step 0 of every sequence (longest
// first), then step 1 of those at least 2 long, ...; batch_sizes [T] int64 counts the sequences at
// each step. sorted_indices [B] int64 (the batch position of the longest, the next, ...) and
// unsorted_indices (its inverse) are undefined when the batch came sorted (enforce_sorted).
struct PackedSequence {
  Tensor data, batch_sizes, sorted_indices, unsorted_indices;
};
// torch.nn.utils.rnn.pack_padded_sequence: input [T, B, *] ([B, T, *] with batch_first), lengths
// [B] (each in [1, T]; decreasing unless enforce_sorted is false). Recorded: the gradient of data
// flows back to input's valid steps (its padding gets zeros).
PackedSequence pack_padded_sequence(const Tensor& input, const std::vector<int64_t>& lengths,
                                    bool batch_first = false, bool enforce_sorted = true);
// The same with lengths as an int64 or int32 tensor [B] (torch takes either).
PackedSequence pack_padded_sequence(const Tensor& input, const Tensor& lengths,
                                    bool batch_first = false, bool enforce_sorted = true);
// torch.nn.utils.rnn.pad_packed_sequence: the padded batch [T, B, *] ([B, T, *] with batch_first)
// in the original batch order, T = the longest length or total_length (>= it), steps past a
// sequence's end set to padding_value; and the lengths [B] int64. Recorded.
struct PaddedSequence {
  Tensor padded, lengths;
};
PaddedSequence pad_packed_sequence(const PackedSequence& sequence, bool batch_first = false,
                                   double padding_value = 0.0,
                                   std::optional<int64_t> total_length = std::nullopt);
// torch.nn.utils.rnn.pad_sequence: sequences [L_i, *] (the same trailing shape and dtype) stacked
// into [T, B, *] ([B, T, *] with batch_first), T = the longest, padded with padding_value.
// Recorded.
Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first = false,
                    double padding_value = 0.0);
// torch.nn.utils.rnn.pack_sequence: pack_padded_sequence(pad_sequence(sequences), their lengths,
// false, enforce_sorted).
PackedSequence pack_sequence(const std::vector<Tensor>& sequences, bool enforce_sorted = true);
// A recurrent layer's result on a PackedSequence: the output packed as the input was, and the
// final states (of each sequence's last valid step; the reverse direction starts at it) in the
// original batch order, as torch's.
struct PackedRecurrentOutput {
  PackedSequence output;
  Tensor h_n, c_n;
};

// The step function of each kind; relu and tanh are torch.nn.RNN's nonlinearity argument.
enum class RecurrentKind { rnn_tanh, rnn_relu, lstm, gru };

// How a step's gate math runs: the fused ops (lstm_cell, gru_cell in autograd/ops.h, one kernel
// each way) or their plain twins, composed of sigmoid, tanh, mul, add and slice (the version to
// read first, and the one create_graph differentiates twice). Both give the same values. For an
// LSTM or GRU layer, fused runs each layer's whole recurrence as one op (lstm_sequence,
// gru_sequence: no recorded op per step, W_hh's gradient one GEMM) unless the batch is packed;
// per_step runs the fused cell ops step by step, each recorded (the sequence op's reference).
enum class GateMath { fused, per_step, composed };

// The stacked, optionally bidirectional recurrence. The input projections of all time steps are
// one GEMM per layer and direction (x [T·N, in] · W_ihᵀ, and in backward one GEMM each for dW_ih
// and dx); each step then runs h · W_hhᵀ and the gate math (for LSTM and GRU in one op per layer:
// GateMath above). Use it through RNN, LSTM or GRU below.
DG_OTHER_FORWARD_BEGIN
class Recurrent : public Module {
 public:
  Recurrent(RecurrentKind kind, const RecurrentOptions& options, DType dtype = get_default_dtype(),
            TorchGenerator* dropout_generator = nullptr);
  // input [T, N, in] ([N, T, in] with batch_first) or [T, in] unbatched; h0 (and c0 for LSTM)
  // [num_layers·D, N, H] ([num_layers·D, H] unbatched) or undefined for zeros. The forward hooks
  // see {input, h0, c0} and the output sequence (the primary output; the states are not hooked).
  RecurrentOutput forward(const Tensor& input, const Tensor& h0 = Tensor(),
                          const Tensor& c0 = Tensor()) const;
  // rnn(input, h0, c0), as torch's rnn(input, hx): the forward above.
  RecurrentOutput operator()(const Tensor& input, const Tensor& h0 = Tensor(),
                             const Tensor& c0 = Tensor()) const {
    return forward(input, h0, c0);
  }
  // Variable-length sequences (torch's forward on a PackedSequence): each sequence runs over its
  // own valid steps only (forward direction from step 0, reverse direction from its last valid
  // step), so padding never reaches the outputs or the states. h0, c0 [num_layers·D, B, H] in
  // the original batch order. Forward hooks see {data, h0, c0} and the packed output's data.
  PackedRecurrentOutput forward(const PackedSequence& input, const Tensor& h0 = Tensor(),
                                const Tensor& c0 = Tensor()) const;
  PackedRecurrentOutput operator()(const PackedSequence& input, const Tensor& h0 = Tensor(),
                                   const Tensor& c0 = Tensor()) const {
    return forward(input, h0, c0);
  }

  std::string type_name() const override;   // RNN, LSTM or GRU
  std::string extra_repr() const override;  // torch's text

  RecurrentKind kind;
  RecurrentOptions options;
  GateMath gate_math = GateMath::fused;
  // Per layer and direction (index l·D + d): weight_ih [G·H, in], weight_hh [G·H, H], and the
  // biases [G·H] (undefined without bias), G = 1 (RNN), 4 (LSTM), 3 (GRU).
  std::vector<Tensor> weight_ih, weight_hh, bias_ih, bias_hh;

 private:
  const char* name() const;
  int64_t directions() const { return options.bidirectional ? 2 : 1; }
  // `lengths` (per batch element, in its order) empty: every sequence is T long.
  RecurrentOutput run(const Tensor& input, const Tensor& h0, const Tensor& c0,
                      const std::vector<int64_t>& lengths = {}) const;
  // One layer in one direction over x [T, N, in]: the outputs [T, N, H] and the final h (and c).
  // With lengths, step t of sequence n runs only when t < lengths[n] (else its states are kept
  // and its output is zero).
  RecurrentOutput run_direction(const Tensor& x, int64_t index, bool reverse, const Tensor& h,
                                const Tensor& c, const std::vector<int64_t>& lengths) const;
  // One LSTM or GRU layer's directions as one lstm_sequence / gru_sequence op: outputs [T, N, H]
  // and final states per direction.
  std::vector<RecurrentOutput> run_sequence(const Tensor& x, int64_t layer,
                                            const std::vector<Tensor>& h,
                                            const std::vector<Tensor>& c) const;
  // The input projections x [T·N, in] · W_ihᵀ + bias of layer·D + d (for RNN and LSTM the bias is
  // b_ih + b_hh, folded once).
  Tensor input_projection(const Tensor& x, int64_t index) const;
  TorchGenerator* dropout_generator_;
};
DG_OTHER_FORWARD_END

class RNN : public Recurrent {
 public:
  enum class Nonlinearity { tanh, relu };
  explicit RNN(const RecurrentOptions& options, Nonlinearity nonlinearity = Nonlinearity::tanh,
               DType dtype = get_default_dtype(), TorchGenerator* dropout_generator = nullptr)
      : Recurrent(
            nonlinearity == Nonlinearity::tanh ? RecurrentKind::rnn_tanh : RecurrentKind::rnn_relu,
            options, dtype, dropout_generator) {}
};
class LSTM : public Recurrent {
 public:
  explicit LSTM(const RecurrentOptions& options, DType dtype = get_default_dtype(),
                TorchGenerator* dropout_generator = nullptr)
      : Recurrent(RecurrentKind::lstm, options, dtype, dropout_generator) {}
};
class GRU : public Recurrent {
 public:
  explicit GRU(const RecurrentOptions& options, DType dtype = get_default_dtype(),
               TorchGenerator* dropout_generator = nullptr)
      : Recurrent(RecurrentKind::gru, options, dtype, dropout_generator) {}
};

// One time step, as torch.nn.RNNCell/LSTMCell/GRUCell: parameters weight_ih [G·H, in],
// weight_hh [G·H, H], bias_ih, bias_hh [G·H] (torch's names and init).
DG_OTHER_FORWARD_BEGIN
class RecurrentCell : public Module {
 public:
  RecurrentCell(RecurrentKind kind, int64_t input_size, int64_t hidden_size, bool bias = true,
                DType dtype = get_default_dtype());
  // x [N, in] or [in]; h (and c for LSTM) [N, H] or [H], undefined for zeros. Returns h' (and c'
  // for LSTM in c_n; output is h' too). The hooks see {x, h, c} and h'.
  RecurrentOutput forward(const Tensor& x, const Tensor& h = Tensor(),
                          const Tensor& c = Tensor()) const;
  RecurrentOutput operator()(const Tensor& x, const Tensor& h = Tensor(),
                             const Tensor& c = Tensor()) const {
    return forward(x, h, c);
  }
  std::string type_name() const override;   // RNNCell, LSTMCell or GRUCell
  std::string extra_repr() const override;  // torch's text
  RecurrentKind kind;
  int64_t input_size, hidden_size;
  GateMath gate_math = GateMath::fused;
  Tensor weight_ih, weight_hh, bias_ih, bias_hh;

 private:
  const char* name() const;
};
DG_OTHER_FORWARD_END

class RNNCell : public RecurrentCell {
 public:
  RNNCell(int64_t input_size, int64_t hidden_size, bool bias = true,
          RNN::Nonlinearity nonlinearity = RNN::Nonlinearity::tanh,
          DType dtype = get_default_dtype())
      : RecurrentCell(nonlinearity == RNN::Nonlinearity::tanh ? RecurrentKind::rnn_tanh
                                                              : RecurrentKind::rnn_relu,
                      input_size, hidden_size, bias, dtype) {}
};
class LSTMCell : public RecurrentCell {
 public:
  LSTMCell(int64_t input_size, int64_t hidden_size, bool bias = true,
           DType dtype = get_default_dtype())
      : RecurrentCell(RecurrentKind::lstm, input_size, hidden_size, bias, dtype) {}
};
class GRUCell : public RecurrentCell {
 public:
  GRUCell(int64_t input_size, int64_t hidden_size, bool bias = true,
          DType dtype = get_default_dtype())
      : RecurrentCell(RecurrentKind::gru, input_size, hidden_size, bias, dtype) {}
};

// One step's gate math from the projections gx = x·W_ihᵀ + b_ih and gh = h·W_hhᵀ + b_hh [N, G·H]
// and the previous state(s) [N, H]: the new h (and c for LSTM), with the fused op or its plain
// twin. The building block of both modules above, public for custom recurrences.
// (For RNN and LSTM the hidden bias may be folded into gates_x: only the sum is read.)
HiddenAndCell recurrent_step(RecurrentKind kind, GateMath math, const Tensor& gates_x,
                             const Tensor& gates_h, const Tensor& h, const Tensor& c);

}  // namespace dg
