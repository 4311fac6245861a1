#!/usr/bin/python3
"""Models exported by torch.onnx.export (torch 1.13) for depthgrad's ONNX importer, offline only.

Writes tests/data/onnx/<name>.onnx (a few KB each) for an MLP, a CNN with BatchNorm2d, a 2-layer
LSTM, a bidirectional GRU and a TransformerEncoder classifier (opset 13, where torch writes layer
norm as ReduceMean/Sub/Pow/Sqrt/Div, and opset 17, where it writes LayerNormalization), each with
a dynamic batch axis, and tests/onnx_goldens.h: for each file an input at the traced batch size
and at another one, and torch's output for each (float32; the transformer's input is int64 token
ids, stored as floats). Every parameter and running statistic is set from a seeded draw, so no two
initializers are equal (torch's exporter merges equal ones into one).

The CNN is exported with training=TrainingMode.PRESERVE on a model in eval mode: torch's default
(EVAL) folds the batch norm into the convolution, and the test wants a BatchNormalization node.

Not needed to build or test depthgrad: run it by hand with Debian's python3-torch,
    /usr/bin/python3 tools/torch_goldens_onnx.py
from the repository's root. It checks nothing; it only writes.
"""
import io
import os
import warnings

import torch
import torch.nn as nn

warnings.filterwarnings("ignore")
OUT = "tests/data/onnx"


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(6, 12), nn.Linear(12, 12), nn.Linear(12, 3)

    def forward(self, x):
        return self.fc3(torch.tanh(self.fc2(torch.relu(self.fc1(x)))))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        return self.fc(torch.flatten(x, 1))


class Lstm(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(5, 6, num_layers=2, batch_first=True)
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y[:, -1])


class Gru(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(5, 6, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(12, 3)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y[:, -1])


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(11, 8)
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True,
                                           activation="gelu")
        self.enc = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.head = nn.Linear(8, 3)

    def forward(self, ids):
        return self.head(self.enc(self.emb(ids)).mean(1))


class ZooConv(nn.Module):
    """Convolutions and pools beyond the CNN's: transposed, grouped and 1-d ones, average and global
    pools, GroupNorm and InstanceNorm (InstanceNormalization), ceil mode, Elu, Softplus..."""
    def __init__(s):
        super().__init__()
        s.up = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1)
        s.norm = nn.GroupNorm(1, 3)
        s.depthwise = nn.Conv2d(3, 3, 3, groups=3, padding=1)
        s.conv1 = nn.Conv1d(2, 3, 3, stride=2, padding=2, dilation=2)
        s.inorm = nn.InstanceNorm2d(3, affine=True)
    def forward(s, x):
        a = torch.nn.functional.leaky_relu(s.up(x), 0.1)
        b = s.norm(torch.nn.functional.avg_pool2d(a, 3, stride=2, padding=1, count_include_pad=False))
        c = s.inorm(s.depthwise(torch.sigmoid(b)))
        d = torch.flatten(torch.nn.functional.adaptive_avg_pool2d(c, 1), 1)
        m = torch.amax(c, dim=(2, 3))
        e = torch.nn.functional.softplus(s.conv1(torch.flatten(x, 2)))
        e = torch.nn.functional.max_pool1d(e, 2, ceil_mode=True).mean(-1)
        f = torch.nn.functional.elu(torch.nn.functional.avg_pool2d(x, 2).sum((2, 3)))
        return torch.log_softmax(torch.cat([d, m, e, f], 1), -1)
class ZooSeq(nn.Module):
    """Three inputs and three outputs: a bidirectional LSTM with initial states, LayerNorm over two
    axes, CumSum, flip (Slice with a negative step), Clip, Where, Split, Min, Max, a GRU, Range,
    Expand, Tile."""
    def __init__(s):
        super().__init__()
        s.rnn = nn.LSTM(5, 6, batch_first=True, bidirectional=True)
        s.norm = nn.LayerNorm([4, 12])
        s.gru = nn.GRU(12, 3, batch_first=True)
    def forward(s, x, h0, c0):
        y, (h, c) = s.rnn(x, (h0, c0))
        y = s.norm(y)
        y = torch.cumsum(y, 1).flip(1)
        y = torch.clamp(y, -0.5, 0.7) + torch.where(y > 0, y, 0.1 * y)
        a, b = torch.split(y, [5, 7], dim=2)
        z = torch.max(a[:, :, :5], b[:, :, 2:]) - torch.min(a, b[:, :, :5]).sigmoid()
        g, _ = s.gru(torch.cat([z, z[:, :, :2], a.abs()], 2))
        t = torch.arange(x.shape[1], dtype=torch.float32).unsqueeze(-1)
        out = g + t + torch.tanh(h[0]).sum(-1, keepdim=True).unsqueeze(1).expand(-1, 4, 3)
        return out, h, c.repeat(1, 1, 2)
def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.rand(p.shape, generator=g) - 0.5)
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(torch.rand(b.shape, generator=g) - 0.5)
            elif name.endswith("running_var"):
                b.copy_(torch.rand(b.shape, generator=g) + 0.5)
    return model.eval()


def literal(v):
    text = f"{v:.9g}"
    return text + (".0f" if text.lstrip("-").isdigit() else "f")


def floats(t):
    return ", ".join(literal(v) for v in t.reshape(-1).tolist())


def tensor_row(t):
    return f'{{{{{", ".join(map(str, t.shape))}}}, {{{floats(t.float())}}}}}'


def export(name, model, examples, opset, others, training=torch.onnx.TrainingMode.EVAL,
           inputs=("x",), outputs=("y",), dynamic=None):
    """examples and each of others: a tuple of the model's inputs."""
    f = io.BytesIO()
    dynamic = dynamic or {"x": {0: "batch"}, "y": {0: "batch"}}
    torch.onnx.export(model, examples, f, opset_version=opset, input_names=list(inputs),
                      output_names=list(outputs), dynamic_axes=dynamic, training=training)
    with open(os.path.join(OUT, name + ".onnx"), "wb") as out:
        out.write(f.getvalue())
    rows = []
    for args in [examples] + others:
        with torch.no_grad():
            ys = model(*args)
        ys = ys if isinstance(ys, tuple) else (ys,)
        rows.append(f'    {{"{name}",\n     {{{", ".join(tensor_row(x) for x in args)}}},\n'
                    f'     {{{", ".join(tensor_row(y) for y in ys)}}}}},')
    return rows


def main():
    os.makedirs(OUT, exist_ok=True)
    g = torch.Generator().manual_seed(3)
    rows = []
    rows += export("mlp", randomize(Mlp(), 1), (torch.randn(4, 6, generator=g),), 17,
                   [(torch.randn(7, 6, generator=g),)])
    rows += export("cnn", randomize(Cnn(), 2), (torch.randn(2, 1, 8, 8, generator=g),), 13,
                   [(torch.randn(3, 1, 8, 8, generator=g),)], torch.onnx.TrainingMode.PRESERVE)
    rows += export("lstm", randomize(Lstm(), 3), (torch.randn(2, 4, 5, generator=g),), 13,
                   [(torch.randn(5, 4, 5, generator=g),)])
    rows += export("gru", randomize(Gru(), 4), (torch.randn(2, 4, 5, generator=g),), 17,
                   [(torch.randn(3, 4, 5, generator=g),)])
    encoder = randomize(Encoder(), 5)
    ids = (torch.randint(0, 11, (2, 5), generator=g),)
    more = [(torch.randint(0, 11, (3, 5), generator=g),)]
    rows += export("encoder13", encoder, ids, 13, more)
    rows += export("encoder17", encoder, ids, 17, more)
    rows += export("zoo_conv", randomize(ZooConv(), 6), (torch.randn(2, 2, 6, 6, generator=g),), 17,
                   [(torch.randn(3, 2, 6, 6, generator=g),)])
    batch = {0: "batch"}
    states = {1: "batch"}
    seq = lambda n: (torch.randn(n, 4, 5, generator=g), torch.randn(2, n, 6, generator=g),
                     torch.randn(2, n, 6, generator=g))
    rows += export("zoo_seq", randomize(ZooSeq(), 7), seq(2), 17, [seq(3)],
                   inputs=("x", "h0", "c0"), outputs=("y", "h", "c"),
                   dynamic={"x": batch, "h0": states, "c0": states, "y": batch, "h": states,
                            "c": states})
    with open("tests/onnx_goldens.h", "w") as out:
        out.write("// GENERATED by tools/torch_goldens_onnx.py (torch 1.13); do not edit. For each model\n"
                  "// of tests/data/onnx/, inputs and torch's outputs (float32).\n"
                  "#pragma once\n#include <cstdint>\n#include <vector>\n\n"
                  "struct OnnxGoldenTensor {\n  std::vector<int64_t> shape;\n"
                  "  std::vector<float> values;\n};\n"
                  "struct OnnxGolden {\n  const char* model;\n"
                  "  std::vector<OnnxGoldenTensor> inputs, outputs;\n};\n\n"
                  "inline const std::vector<OnnxGolden>& onnx_goldens() {\n"
                  "  static const std::vector<OnnxGolden> goldens = {\n")
        out.write("\n".join(rows) + "\n  };\n  return goldens;\n}\n")


if __name__ == "__main__":
    main()
