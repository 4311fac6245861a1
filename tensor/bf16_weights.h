// bf16 copies of weights: a float32 storage that bf16 GEMMs read many times between writes (the
// parameters' flat buffer) keeps a bf16 copy beside it, so a GEMM's weight operand is rounded
// once per write instead of on every call (forward, and backward's dX = dY·W, read it again).
//
// keep_bf16_copy(t) registers t's storage (the whole storage: a parameter that is a view of a flat
// buffer registers the buffer). From then on dg::gemm in bf16 precision (tensor/kernels_matmul.h)
// looks up each float32 operand: one that lies inside a kept storage is read from the copy at the
// same offset, with the same leading dimension, instead of being rounded. The copy is current
// when it was rounded at the storage's present version (tensor.h: every in-place write through
// mutable_data, fill or copy_from adds one); a stale copy is rounded whole, over the threads, by
// the first GEMM that needs it. The optimiser can write it in the same pass as its update
// (bf16_copy_to_write, then bf16_copy_written), so the next step finds it current.
//
// Bits: a copy holds exactly what rounding the operand on the call would give (dg::to_bf16), so
// results are the same with or without copies. Refuses: a raw write through data<T>() is not seen
// (as with autograd's version check), so code that writes weights raw must go through
// mutable_data. Only dg::gemm and dg::gemm_batched look copies up; gemm_one_thread (attention's
// per-head products, which read activations) does not. A copy costs 2 bytes per element, held
// until drop_bf16_copy or the storage's end.
#pragma once
#include <cstdint>

#include "tensor/tensor.h"

namespace dg {

// Registers t's storage (t float32, defined) for a bf16 copy; a second call is a no-op. Throws
// std::invalid_argument naming t when it is not float32.
void keep_bf16_copy(const Tensor& t);
// Forgets t's storage's copy (its memory is freed). No-op when none is kept.
void drop_bf16_copy(const Tensor& t);
// Whether t's storage keeps a copy.
bool keeps_bf16_copy(const Tensor& t);

// The bf16 element matching p, for an operand spanning `elements` floats from p, when p lies in
// a kept storage; the copy is brought up to date first. nullptr when p is in no kept storage.
const uint16_t* bf16_copy_of(const float* p, int64_t elements);

// For an optimiser that rewrites all of t's storage in one pass: the copy's first element (the
// storage's element 0) when t's storage keeps a copy, else nullptr. The caller writes
// to_bf16(new value) for every element, then calls bf16_copy_written(t) to mark the copy current
// at the storage's version as it is then.
uint16_t* bf16_copy_to_write(const Tensor& t);
void bf16_copy_written(const Tensor& t);

// Bytes held by copies (for reports and tests), and how many times a copy was rounded whole.
int64_t bf16_copy_bytes();
int64_t bf16_copy_roundings();

}  // namespace dg
