# Prints the golden values of chapter 10's checks (tools/learn/checks/ch10.cpp), computed offline:
#  1. the reference AttnRes route on fixed tensors with PyTorch 1.13: α = softmax(z·Wᵀ) over the
#     sources (the last axis) and h = Σ_j α_j S_j, for z [1, 2, 4], W [3, 4], three sources
#     [1, 2, 4]; inputs x[i] = sin(0.37·i + offset) in row-major order, as the checks build them;
#  2. the paired statistics of five fixed seed pairs with mpmath (scipy is not installed): the
#     mean difference, the sample standard deviation, the 95% t interval (Student's t quantile at
#     0.975 with n − 1 degrees of freedom), the t statistic, its two-sided p and the exact sign
#     test's p;
#  3. the paper AttnRes mixture on the same sources with PyTorch 1.13: α = softmax_j(w·RMSNorm(S_j))
#     (a gain-free RMSNorm written out: torch 1.13 has no nn.RMSNorm) and h = Σ_j α_j S_j.
# It prints nothing else and changes no file. Run: python3 tools/learn/goldens_ch10.py
import math

import mpmath
import torch

torch.set_default_dtype(torch.float64)


def filled(shape, offset):
    n = math.prod(shape)
    return torch.tensor([math.sin(0.37 * i + offset) for i in range(n)]).reshape(shape)


z = filled((1, 2, 4), 0.0)
W = filled((3, 4), 0.5)
sources = [filled((1, 2, 4), 1.0 + j) for j in range(3)]
alpha = torch.softmax(z @ W.T, dim=-1)
h = sum(alpha[..., j : j + 1] * sources[j] for j in range(3))
print("// route: alpha [1,2,3]")
print(", ".join(f"{x:.15g}" for x in alpha.flatten().tolist()))
print("// route: h [1,2,4]")
print(", ".join(f"{x:.15g}" for x in h.flatten().tolist()))

mpmath.mp.dps = 40
baseline = [5.7570, 5.7712, 5.7498, 5.7655, 5.7601]
method = [5.7431, 5.7650, 5.7502, 5.7519, 5.7488]
d = [mpmath.mpf(m) - mpmath.mpf(b) for b, m in zip(baseline, method)]
n = len(d)
mean = sum(d) / n
std = mpmath.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
se = std / mpmath.sqrt(n)
dof = n - 1


def t_cdf(t):
    x = dof / (dof + t * t)
    tail = mpmath.betainc(dof / mpmath.mpf(2), mpmath.mpf(1) / 2, 0, x, regularized=True) / 2
    return 1 - tail if t >= 0 else tail


tq = mpmath.findroot(lambda t: t_cdf(t) - mpmath.mpf("0.975"), 2.7)
t_stat = mean / se
p_t = 2 * (1 - t_cdf(abs(t_stat)))
wins = sum(1 for x in d if x < 0)
ties = sum(1 for x in d if x == 0)
m = n - ties
k = min(wins, m - wins)
p_sign = min(1, 2 * sum(math.comb(m, i) for i in range(k + 1)) / 2**m)
print("// paired: t quantile, mean, std, ci low, ci high, t, p(t), wins, p(sign)")
for x in [tq, mean, std, mean - tq * se, mean + tq * se, t_stat, p_t, wins, p_sign]:
    print(mpmath.nstr(mpmath.mpf(x), 17))

# 3. the paper AttnRes mixture: α = softmax_j(w · RMSNorm(S_j)) with a gain-free RMSNorm (eps
#    1e-6) over the same three sources and w [1, 4] (offset 2.5), h = Σ_j α_j S_j.
w = filled((1, 4), 2.5)
keys = [s / torch.sqrt((s * s).mean(-1, keepdim=True) + 1e-6) for s in sources]
alpha = torch.softmax(torch.cat([k @ w.T for k in keys], -1), -1)
h = sum(alpha[..., j : j + 1] * sources[j] for j in range(3))
print("// pseudo-query mix: alpha [1,2,3]")
print(", ".join(f"{x:.15g}" for x in alpha.flatten().tolist()))
print("// pseudo-query mix: h [1,2,4]")
print(", ".join(f"{x:.15g}" for x in h.flatten().tolist()))
