#!/usr/bin/env python3
"""Writes tests/data/onnx_cli/mlp_torch.onnx: a small MLP exported by torch.onnx.export (torch
1.13, opset 17, a dynamic batch axis named "batch"), which tests/cli_onnx.sh reads with
`depthgrad onnx-check` (a file of another producer: its inputs, outputs, opset, op counts and
parameter count are asserted there).

Offline only: nothing in the build or the tests runs this script or needs PyTorch; it is kept so
the file can be regenerated and audited (/usr/bin/python3 tools/torch_goldens_onnx_cli.py from the
repository's root, PyTorch 1.13).
The model: Linear(4, 8) -> ReLU -> Linear(8, 3) -> Softmax(dim=1), 67 parameters, weights from
torch.manual_seed(0).
"""
import os

import torch

OUT = os.path.join("tests", "data", "onnx_cli", "mlp_torch.onnx")


def main():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3),
                                torch.nn.Softmax(dim=1)).eval()
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    torch.onnx.export(model, (torch.randn(2, 4),), OUT, opset_version=17, input_names=["features"],
                      output_names=["probabilities"],
                      dynamic_axes={"features": {0: "batch"}, "probabilities": {0: "batch"}})
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)")


if __name__ == "__main__":
    main()
