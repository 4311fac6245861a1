#!/usr/bin/env python3
"""Writes tests/data/onnx_cli/mlp_torch.onnx: a small MLP exported by torch.onnx.export (torch
1.13, opset 17, a dynamic batch axis named "batch"), which tests/cli_onnx.sh reads with
`depthgrad onnx-check` (a file of another producer: its inputs, outputs, opset, op counts and
parameter count are asserted there); and three miswired graphs written with onnx.helper and saved
unchecked, which onnx-check must refuse (reads_undefined.onnx: a node reads a tensor nothing
makes; made_twice.onnx: two nodes make the same tensor; output_unmade.onnx: a graph output no
node makes).

Offline only: nothing in the build or the tests runs this script or needs PyTorch; it is kept so
the file can be regenerated and audited (/usr/bin/python3 tools/torch_goldens_onnx_cli.py from the
repository's root, PyTorch 1.13).
The model: Linear(4, 8) -> ReLU -> Linear(8, 3) -> Softmax(dim=1), 67 parameters, weights from
torch.manual_seed(0).
"""
import os

import onnx
import onnx.helper as oh
import torch

FOLDER = os.path.join("tests", "data", "onnx_cli")
OUT = os.path.join(FOLDER, "mlp_torch.onnx")


def save_miswired(name, nodes, output="y"):
    """x [batch, 2] -> nodes -> output, saved without the checker."""
    x = oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 2])
    y = oh.make_tensor_value_info(output, onnx.TensorProto.FLOAT, ["batch", 2])
    graph = oh.make_graph(nodes, name, [x], [y])
    model = oh.make_model(graph, producer_name="tools/torch_goldens_onnx_cli.py",
                          opset_imports=[oh.make_opsetid("", 17)])
    model.ir_version = 8
    path = os.path.join(FOLDER, name + ".onnx")
    onnx.save(model, path)
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def main():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3),
                                torch.nn.Softmax(dim=1)).eval()
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    torch.onnx.export(model, (torch.randn(2, 4),), OUT, opset_version=17, input_names=["features"],
                      output_names=["probabilities"],
                      dynamic_axes={"features": {0: "batch"}, "probabilities": {0: "batch"}})
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)")
    save_miswired("reads_undefined", [oh.make_node("Add", ["x", "nowhere"], ["y"], name="add")])
    save_miswired("made_twice", [oh.make_node("Relu", ["x"], ["y"], name="first"),
                                 oh.make_node("Neg", ["x"], ["y"], name="second")])
    save_miswired("output_unmade", [oh.make_node("Relu", ["x"], ["h"], name="relu")], output="z")


if __name__ == "__main__":
    main()
