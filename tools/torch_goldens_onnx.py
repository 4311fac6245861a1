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


def export(name, model, example, opset, others, training=torch.onnx.TrainingMode.EVAL):
    f = io.BytesIO()
    torch.onnx.export(model, example, f, opset_version=opset, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
                      training=training)
    with open(os.path.join(OUT, name + ".onnx"), "wb") as out:
        out.write(f.getvalue())
    rows = []
    for x in [example] + others:
        with torch.no_grad():
            y = model(x)
        rows.append(f'    {{"{name}", {{{", ".join(map(str, x.shape))}}}, {{{floats(x.float())}}},\n'
                    f'     {{{", ".join(map(str, y.shape))}}}, {{{floats(y)}}}}},')
    return rows


def main():
    os.makedirs(OUT, exist_ok=True)
    g = torch.Generator().manual_seed(3)
    rows = []
    rows += export("mlp", randomize(Mlp(), 1), torch.randn(4, 6, generator=g), 17,
                   [torch.randn(7, 6, generator=g)])
    rows += export("cnn", randomize(Cnn(), 2), torch.randn(2, 1, 8, 8, generator=g), 13,
                   [torch.randn(3, 1, 8, 8, generator=g)], torch.onnx.TrainingMode.PRESERVE)
    rows += export("lstm", randomize(Lstm(), 3), torch.randn(2, 4, 5, generator=g), 13,
                   [torch.randn(5, 4, 5, generator=g)])
    rows += export("gru", randomize(Gru(), 4), torch.randn(2, 4, 5, generator=g), 17,
                   [torch.randn(3, 4, 5, generator=g)])
    encoder = randomize(Encoder(), 5)
    ids = torch.randint(0, 11, (2, 5), generator=g)
    more = [torch.randint(0, 11, (3, 5), generator=g)]
    rows += export("encoder13", encoder, ids, 13, more)
    rows += export("encoder17", encoder, ids, 17, more)
    with open("tests/onnx_goldens.h", "w") as out:
        out.write("// Generated by tools/torch_goldens_onnx.py (torch 1.13): for each model of\n"
                  "// tests/data/onnx/, inputs and torch's outputs (float32). Do not edit.\n"
                  "#pragma once\n#include <cstdint>\n#include <vector>\n\n"
                  "struct OnnxGolden {\n  const char* model;\n  std::vector<int64_t> input_shape;\n"
                  "  std::vector<float> input;\n  std::vector<int64_t> output_shape;\n"
                  "  std::vector<float> output;\n};\n\n"
                  "inline const std::vector<OnnxGolden>& onnx_goldens() {\n"
                  "  static const std::vector<OnnxGolden> goldens = {\n")
        out.write("\n".join(rows) + "\n  };\n  return goldens;\n}\n")


if __name__ == "__main__":
    main()
