// The fast kernels' gradient buffers (see grad_sink.h for the ownership rules they follow).
// accumulate_grad, the one way a new op writes a gradient, lives in tape.cpp.
#include "autograd/grad_sink.h"

namespace dg {

Tensor grad_of(const Tensor& t) {
  TensorImpl* impl = t.impl();
  if (!impl->grad.defined()) impl->grad = Tensor::zeros(impl->shape, impl->dtype);
  return impl->grad;
}

GradSink::GradSink(const Tensor& t, const std::vector<Tensor>& others) : input(t) {
  bool aliased = false;
  for (const Tensor& o : others) aliased = aliased || (o.same(t) && o.requires_grad());
  TensorImpl* impl = t.impl();
  if (!aliased && !impl->grad.defined()) {  // rule 1: a new buffer, the input's own, written
    impl->grad = Tensor::empty(impl->shape, impl->dtype);
    buffer = impl->grad;
    fresh = true;
  } else if (!aliased && impl->grad.is_contiguous()) {  // an existing gradient: added into
    buffer = impl->grad;
  } else {  // rules 2 and 3: aliased, or a strided gradient installed by set_grad
    buffer = Tensor::empty(t.shape(), t.dtype());
    direct = false;
    fresh = true;
  }
}

void GradSink::zero_if_fresh() {
  if (fresh) buffer.fill(0.0);
  fresh = false;
}

void GradSink::finish() const {
  if (!direct) accumulate_grad(input, buffer);
}

}  // namespace dg
