#!/usr/bin/env python3
"""Prints the PyTorch golden values embedded in tests/test_optim_rmsprop_adagrad.cpp and
tests/test_lr_schedules.cpp.

Offline only: nothing in the build or the tests runs this script or needs PyTorch; it is kept so
the values can be regenerated and audited (python3 tools/torch_goldens_optim.py, PyTorch 1.13,
float64). It does not write any file: paste its output into the test.
Optimisers: w = W0 [2, 2] and b = B0 [3] as leaf tensors in two parameter groups, three steps with
w.grad = GW[t], b.grad = GB[t] before each opt.step() (foreach=False), then w and b flattened.
Schedules: the rate of each of two groups after every step, from a fresh SGD(lr=1.0).
"""
import torch

torch.set_default_dtype(torch.float64)

W0 = [0.5, -1.0, 2.0, 0.25]
B0 = [0.1, -0.2, 0.3]
GW = [[0.3, -0.1, 0.05, 1.0], [-0.2, 0.6, 0.1, 0.0], [0.4, -0.7, 0.25, -0.5]]
GB = [[-0.4, 0.2, 0.7], [0.3, -0.5, 0.2], [-0.1, 0.9, -0.3]]


def emit(name, values):
    print(f"const std::vector<double> {name}{{{', '.join(repr(float(v)) for v in values)}}};")


def three_steps(name, make, w_group, b_group):
    w = torch.tensor(W0).reshape(2, 2).requires_grad_(True)
    b = torch.tensor(B0).requires_grad_(True)
    opt = make([dict(params=[w], **w_group), dict(params=[b], **b_group)])
    for t in range(3):
        w.grad = torch.tensor(GW[t]).reshape(2, 2)
        b.grad = torch.tensor(GB[t])
        opt.step()
    emit(name, w.detach().flatten().tolist() + b.detach().tolist())


def optimisers():
    rms = lambda **kw: lambda groups: torch.optim.RMSprop(groups, foreach=False, **kw)
    three_steps("kTorchRmspropPlain", rms(lr=0.01), {}, dict(lr=0.005))
    three_steps("kTorchRmspropMomentum", rms(lr=0.01, alpha=0.9, eps=1e-6, weight_decay=0.1,
                                             momentum=0.8), {}, dict(weight_decay=0.0))
    three_steps("kTorchRmspropCentered", rms(lr=0.01, centered=True), {}, dict(lr=0.02))
    three_steps("kTorchRmspropCenteredMomentum", rms(lr=0.01, alpha=0.95, centered=True,
                                                     momentum=0.5, weight_decay=0.05),
                dict(weight_decay=0.0), {})
    ada = lambda **kw: lambda groups: torch.optim.Adagrad(groups, foreach=False, **kw)
    three_steps("kTorchAdagradPlain", ada(lr=0.1), {}, dict(lr=0.05))
    three_steps("kTorchAdagradAll", ada(lr=0.1, lr_decay=0.5, weight_decay=0.1,
                                        initial_accumulator_value=0.2, eps=1e-6),
                {}, dict(weight_decay=0.0))


def two_groups():
    return torch.optim.SGD([dict(params=[torch.zeros(1, requires_grad=True)]),
                            dict(params=[torch.zeros(1, requires_grad=True)])], lr=1.0)


def one_cycle(name, steps, **kw):
    opt = two_groups()
    s = torch.optim.lr_scheduler.OneCycleLR(opt, cycle_momentum=False, **kw)
    rates = []
    for _ in range(steps + 1):
        rates += [g["lr"] for g in opt.param_groups]
        opt.step()
        if len(rates) < 2 * (steps + 1):
            s.step()
    try:
        s.step()
        print(f"// {name}: no error past the last step")
    except ValueError as e:
        print(f"// {name}: {e}")
    emit(name, rates)


def plateau(name, metrics, min_lr, **kw):
    opt = two_groups()
    opt.param_groups[1]["lr"] = 0.5
    s = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, min_lr=min_lr, **kw)
    rates, bad, cool = [], [], []
    for m in metrics:
        s.step(m)
        rates += [g["lr"] for g in opt.param_groups]
        bad.append(s.num_bad_epochs)
        cool.append(s.cooldown_counter)
    emit(name, rates)
    print(f"const std::vector<int> {name}Bad{{{', '.join(map(str, bad))}}};")
    print(f"const std::vector<int> {name}Cooldown{{{', '.join(map(str, cool))}}};")


def schedules():
    one_cycle("kTorchOneCycleCos", 10, max_lr=[0.1, 0.5], total_steps=10)
    one_cycle("kTorchOneCycleLinear", 10, max_lr=[0.1, 0.5], total_steps=10,
              anneal_strategy="linear")
    one_cycle("kTorchOneCycleThreePhase", 10, max_lr=[0.1, 0.5], total_steps=10, three_phase=True)
    one_cycle("kTorchOneCycleEpochs", 12, max_lr=0.2, epochs=3, steps_per_epoch=4, pct_start=0.25,
              anneal_strategy="linear", div_factor=10.0, final_div_factor=100.0,
              three_phase=True)
    falling = [1.0, 0.9, 0.95, 0.9, 0.91, 0.89, 0.8999, 0.85, 0.86, 0.87, 0.88, 0.7, 0.71, 0.72,
               0.73, 0.74, 0.75, 0.76, 0.77, 0.78]
    rising = [0.1, 0.2, 0.19, 0.2, 0.2001, 0.25, 0.24, 0.23, 0.3, 0.3, 0.3, 0.3, 0.31, 0.29,
              0.28, 0.27, 0.26, 0.4, 0.39, 0.38]
    plateau("kTorchPlateauMinRel", falling, [0.0, 0.0], patience=2)
    plateau("kTorchPlateauMinAbs", falling, [0.0, 0.0], patience=1, threshold=0.05,
            threshold_mode="abs", cooldown=2)
    plateau("kTorchPlateauMaxRel", rising, [0.0, 0.0], mode="max", patience=2, factor=0.5)
    plateau("kTorchPlateauMaxAbsMinLr", rising, [0.05, 0.1], mode="max", patience=0,
            threshold=0.02, threshold_mode="abs", cooldown=1, factor=0.3, eps=0.01)


if __name__ == "__main__":
    optimisers()
    schedules()
