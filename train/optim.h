// Optimisers, gradient clipping and learning-rate schedules, as in torch.optim: one header for
// all of train/optim/, which holds a file per job:
//   optim/optimizer.h  Optimizer, FlatOptimizer (what the Trainer drives), ElementwiseOptimizer
//                      (what a new optimiser derives from: state names and one update of a span),
//                      ParamGroup, weight_decay_groups
//   optim/sgd.h        SGD (momentum, dampening, Nesterov) and its update, sgd_update
//   optim/adam.h       Adam and AdamW (one kernel), adam_step_scales
//   optim/rmsprop.h    RMSprop (momentum, centered)
//   optim/adagrad.h    Adagrad
//   optim/clip.h       clip_grad_norm and its parts for gradients over processes
//   optim/schedule.h   Schedule and the LrScheduler objects (StepLR ... ReduceLROnPlateau)
// Each optimiser runs over any list of tensors or parameter groups (each with its own rate and
// weight decay) and over a module's flat buffers (nn/module.h), the fast path the trainer uses:
// one pass over contiguous memory. Optimisers do not compute gradients or own the model; a
// schedule sets an optimiser's rates, nothing else.
#pragma once

#include "train/optim/adagrad.h"
#include "train/optim/adam.h"
#include "train/optim/clip.h"
#include "train/optim/optimizer.h"
#include "train/optim/rmsprop.h"
#include "train/optim/schedule.h"
#include "train/optim/sgd.h"
