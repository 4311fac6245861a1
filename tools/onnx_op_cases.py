#!/usr/bin/python3
"""One ONNX graph of many small op cases, run by ONNX Runtime, for depthgrad's importer; offline.

Builds tests/data/onnx/op_cases.onnx (opset 17) with python3-onnx's helper: four inputs (x [2,3,4],
img [1,2,5,5], seq [3,2,4], m [3,4]) and one graph output per case (named after it), each an op
with settings torch.onnx.export does not write (asymmetric pads, auto_pad, a reverse LSTM, a GRU
without bias, RNNs, exclusive reverse CumSum, negative Slice steps, integer shape arithmetic, Pad modes,
...), and op_cases18.onnx with opset 18's forms (Reduce* axes as inputs, Split's num_outputs,
Pad's axes). ONNX Runtime (onnxruntime-node 1.30.0, through tools/onnx_op_cases_ort.js) computes every
output, and tests/onnx_op_cases.h gets the inputs and those outputs: the test compares depthgrad
with ONNX Runtime, the reference the ONNX spec names in practice.

Not needed to build or test depthgrad: run it by hand from the repository's root, with node and
onnxruntime-node installed (npm install --ignore-scripts onnxruntime-node@1.30.0 in a folder F):
    NODE_PATH=F/node_modules /usr/bin/python3 tools/onnx_op_cases.py
"""
import json
import subprocess

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.RandomState(7)
nodes, initializers, outputs = [], [], []
counter = [0]


def const(array, dtype=np.float32):
    counter[0] += 1
    name = f"c{counter[0]}"
    initializers.append(numpy_helper.from_array(np.asarray(array, dtype=dtype), name))
    return name


def weight(*shape):
    return const(rng.uniform(-0.6, 0.6, shape))


def ints(*values):
    return const(values, np.int64)


def tmp(op, inputs, **attrs):
    counter[0] += 1
    name = f"t{counter[0]}"
    nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
    return name


def case(name, op, inputs, n_out=1, **attrs):
    outs = [name] if n_out == 1 else [f"{name}_{k}" for k in range(n_out)]
    nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
    outputs.extend(outs)


def build():
    x, img, seq, m = "x", "img", "seq", "m"
    positive = tmp("Add", [tmp("Abs", [x]), const(1.0)])
    # MatMul and Gemm
    case("gemm_general", "Gemm", [m, weight(3, 5), weight(5)], alpha=2.0, beta=0.5, transA=1)
    case("matmul_1d", "MatMul", [weight(3), m])
    case("matmul_batched", "MatMul", [x, weight(4, 2)])
    # Convolutions and pools
    wconv = weight(3, 2, 3, 3)
    case("conv_asymmetric_pads", "Conv", [img, wconv, weight(3)], pads=[0, 1, 1, 2],
         strides=[2, 1])
    case("conv_same_upper", "Conv", [img, wconv], auto_pad="SAME_UPPER", strides=[2, 2])
    case("conv_grouped_dilated", "Conv", [img, weight(4, 1, 2, 2)], group=2, dilations=[2, 1])
    case("conv_transpose_asymmetric", "ConvTranspose", [img, weight(2, 3, 3, 3), weight(3)],
         strides=[2, 2], pads=[1, 0, 0, 1], output_padding=[1, 0])
    case("conv_transpose_1d", "ConvTranspose", [seq, weight(2, 3, 2)], strides=[2])
    case("maxpool_asymmetric_pads", "MaxPool", [img], kernel_shape=[3, 3], pads=[1, 0, 0, 1],
         strides=[2, 2])
    case("maxpool_dilated_ceil", "MaxPool", [img], kernel_shape=[2, 2], dilations=[2, 1],
         ceil_mode=1, strides=[2, 2])
    case("averagepool_excluding_pads", "AveragePool", [img], kernel_shape=[3, 3],
         pads=[1, 1, 1, 1], strides=[2, 2])
    case("averagepool_counting_pads", "AveragePool", [img], kernel_shape=[3, 3],
         pads=[1, 1, 1, 1], strides=[2, 2], count_include_pad=1)
    case("averagepool_1d", "AveragePool", [seq], kernel_shape=[2])
    case("global_maxpool", "GlobalMaxPool", [img])
    case("global_averagepool", "GlobalAveragePool", [img])
    # Normalisation
    case("instance_norm", "InstanceNormalization", [img, weight(2), weight(2)], epsilon=1e-3)
    case("batch_norm", "BatchNormalization",
         [img, weight(2), weight(2), weight(2), const(rng.uniform(0.5, 1.5, 2))], epsilon=1e-3)
    case("layer_norm_no_bias", "LayerNormalization", [x, weight(4)], epsilon=1e-3)
    case("layer_norm_axis_1", "LayerNormalization", [x, weight(3, 4), weight(3, 4)], axis=1)
    # Recurrent: seq is [T=3, N=2, I=4]; hidden size 3
    case("lstm_reverse", "LSTM",
         ["seq", weight(1, 12, 4), weight(1, 12, 3), weight(1, 24), "", weight(1, 2, 3),
          weight(1, 2, 3)], n_out=3, hidden_size=3, direction="reverse")
    case("gru_no_bias", "GRU", [seq, weight(1, 9, 4), weight(1, 9, 3)], n_out=2, hidden_size=3,
         linear_before_reset=1)
    case("gru_bidirectional", "GRU",
         [seq, weight(2, 9, 4), weight(2, 9, 3), weight(2, 18), "", weight(2, 2, 3)], n_out=2,
         hidden_size=3, linear_before_reset=1, direction="bidirectional")
    # Elementwise
    for op in ["Relu", "Sigmoid", "Tanh", "Exp", "Neg", "Abs", "Erf", "Sin", "Cos", "Floor",
               "Ceil", "Sign", "Softplus"]:
        case(op.lower(), op, [x])
    case("log", "Log", [positive])
    case("sqrt", "Sqrt", [positive])
    case("reciprocal", "Reciprocal", [positive])
    case("elu", "Elu", [x], alpha=0.5)
    case("leaky_relu", "LeakyRelu", [x], alpha=0.2)
    case("hard_sigmoid", "HardSigmoid", [x], alpha=0.3, beta=0.4)
    case("softmax_axis_1", "Softmax", [x], axis=1)
    case("log_softmax_axis_0", "LogSoftmax", [x], axis=0)
    case("pow_tensor", "Pow", [positive, weight(4)])
    case("pow_scalar", "Pow", [x, const(3.0)])
    case("sub_broadcast", "Sub", [x, weight(3, 1)])
    case("div_broadcast", "Div", [x, tmp("Add", [tmp("Abs", [weight(4)]), const(0.5)])])
    case("mean_of_three", "Mean", [x, weight(4), weight(3, 1)])
    case("sum_of_two", "Sum", [x, weight(2, 1, 1)])
    case("max_of_three", "Max", [x, weight(4), weight(3, 1)])
    case("min_of_two", "Min", [x, weight(3, 4)])
    case("clip_min_only", "Clip", [x, const(-0.2)])
    case("clip_both", "Clip", [x, const(-0.3), const(0.4)])
    greater = tmp("Greater", [x, const(0.0)])
    less = tmp("Less", [x, const(0.5)])
    case("not_and", "Not", [tmp("And", [greater, less])])
    case("or_xor", "Xor", [tmp("Or", [greater, less]), tmp("LessOrEqual", [x, const(-0.1)])])
    case("equal_greater_or_equal", "Equal", [greater, tmp("GreaterOrEqual", [x, const(0.0)])])
    case("where_float", "Where", [greater, x, tmp("Neg", [x])])
    case("cast_float_to_int", "Cast", [tmp("Mul", [x, const(3.0)])], to=TensorProto.INT64)
    case("cast_bool_to_float", "Cast", [greater], to=TensorProto.FLOAT)
    case("dropout", "Dropout", [x])
    case("identity", "Identity", [x])
    # Reductions (opset 17: axes attributes, ReduceSum's an input)
    case("reduce_min", "ReduceMin", [x], axes=[0, 2], keepdims=1)
    case("reduce_max_all", "ReduceMax", [x], keepdims=0)
    case("reduce_l2", "ReduceL2", [x], axes=[1], keepdims=0)
    case("reduce_sum_square", "ReduceSumSquare", [x], keepdims=0)
    case("reduce_sum_axes_input", "ReduceSum", [x, ints(-1, 0)], keepdims=0)
    case("reduce_sum_noop", "ReduceSum", [x], noop_with_empty_axes=1)
    case("reduce_mean_negative_axis", "ReduceMean", [x], axes=[-2])
    case("argmax", "ArgMax", [x], axis=2, keepdims=0)
    case("argmin", "ArgMin", [x], axis=-1)
    case("cumsum_exclusive_reverse", "CumSum", [x, ints(1)], exclusive=1, reverse=1)
    case("cumsum", "CumSum", [x, ints(-1)])
    # Shapes
    shape = tmp("Shape", [x])
    case("shape_from_1", "Shape", [x], start=1)
    case("size", "Size", [x])
    case("shape_div", "Div", [shape, ints(2, 2, 3)])
    case("shape_arithmetic", "Sub", [tmp("Mul", [shape, ints(3)]), tmp("Add", [shape, ints(1)])])
    case("shape_neg", "Neg", [shape])
    case("gather_shape_last", "Gather", [shape, const(-1, np.int64)])
    case("concat_ints", "Concat", [shape, ints(5, 6)], axis=0)
    case("gather_negative_indices", "Gather", [x, const([[-1, 0]], np.int64)], axis=1)
    case("gather_scalar_index", "Gather", [x, const(2, np.int64)], axis=2)
    case("slice_negative_steps", "Slice", [x, ints(-1, 3), ints(-100, 0), ints(1, 2), ints(-1, -2)])
    case("slice_clamped", "Slice", [x, ints(1, -100), ints(100, 3), ints(2, 1)])
    case("reshape_zero_copies", "Reshape", [x, ints(0, -1)])
    case("squeeze_all", "Squeeze", [tmp("Unsqueeze", [x, ints(0, 4)])])
    case("squeeze_axis", "Squeeze", [tmp("Unsqueeze", [x, ints(-1)]), ints(3)])
    case("transpose_default", "Transpose", [x])
    case("flatten_axis_0", "Flatten", [x], axis=0)
    case("flatten_axis_minus_1", "Flatten", [x], axis=-1)
    case("expand_bidirectional", "Expand", [weight(3, 1), ints(2, 1, 4)])
    case("tile", "Tile", [x, ints(1, 2, 1)])
    case("split_equal", "Split", [x], n_out=2, axis=2)
    case("split_sizes", "Split", [x, ints(1, 2)], n_out=2, axis=1)
    case("concat_floats", "Concat", [x, weight(2, 1, 4)], axis=1)
    case("constant_of_shape", "ConstantOfShape", [ints(2, 3)],
         value=numpy_helper.from_array(np.array([7], np.int64)))
    case("constant_of_shape_default", "ConstantOfShape", [shape])
    case("range_float", "Range", [const(0.5), const(3.0), const(0.75)])
    case("range_int", "Range", [const(10, np.int64), const(1, np.int64), const(-3, np.int64)])
    case("constant_floats", "Constant", [], value_floats=[1.5, -2.0])
    case("constant_int", "Constant", [], value_int=-4)
    case("pad_reflect", "Pad", [img, ints(0, 0, 1, 2, 0, 0, 2, 1)], mode="reflect")
    case("pad_edge", "Pad", [img, ints(0, 0, 2, 0, 0, 0, 1, 3)], mode="edge")
    case("pad_constant", "Pad", [x, ints(0, 1, 0, 1, 0, 2), const(1.5)])
    case("rnn_bidirectional", "RNN",
         [seq, weight(2, 3, 4), weight(2, 3, 3), weight(2, 6), "", weight(2, 2, 3)], n_out=2,
         hidden_size=3, direction="bidirectional")
    case("rnn_relu_reverse", "RNN", [seq, weight(1, 3, 4), weight(1, 3, 3)], n_out=2,
         hidden_size=3, direction="reverse", activations=["Relu"])


def build_18():
    """Opset 18's forms: the axes of every Reduce* as an input, Split's num_outputs, Pad's axes,
    GroupNormalization (scale and bias per group)."""
    x, img = "x", "img"
    case("reduce_mean_axes_input", "ReduceMean", [x, ints(0, -1)])
    case("reduce_max_axes_input", "ReduceMax", [x, ints(1)], keepdims=0)
    case("reduce_min_no_axes", "ReduceMin", [x], keepdims=0)
    case("reduce_l2_axes_input", "ReduceL2", [x, ints(2)])
    case("split_num_outputs", "Split", [img], n_out=3, axis=3, num_outputs=3)
    case("pad_axes", "Pad", [img, ints(1, 2, 0, 1), const(-1.0), ints(2, 3)])
    case("group_normalization", "GroupNormalization", [img, weight(2), weight(2)], num_groups=2,
         epsilon=1e-3)
    case("group_normalization_one_group", "GroupNormalization", [img, weight(1), weight(1)],
         num_groups=1)


def save(path, opset):
    float_input = lambda name, shape: helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
    inputs = [float_input("x", [2, 3, 4]), float_input("img", [1, 2, 5, 5]),
              float_input("seq", [3, 2, 4]), float_input("m", [3, 4])]
    graph = helper.make_graph(nodes, "op_cases", inputs,
                              [helper.make_value_info(name, onnx.TypeProto()) for name in outputs],
                              initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="tools/onnx_op_cases.py")
    model.ir_version = 8
    if opset <= 17:  # python3-onnx 1.12 knows opsets up to 17: infer the outputs' types, check
        inferred = onnx.shape_inference.infer_shapes(model)
        types = {v.name: v.type for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
        for out in model.graph.output:
            out.type.CopyFrom(types[out.name])
        onnx.checker.check_model(model)
    else:  # every opset-18 case gives float32; ONNX Runtime checks the rest when it loads it
        for out in model.graph.output:
            out.type.CopyFrom(helper.make_tensor_type_proto(TensorProto.FLOAT, None))
    onnx.save(model, path)


def run_in_ort(path, values):
    request = {"model": path,
               "inputs": {k: {"dims": list(v.shape), "type": "float32",
                              "data": [float(np.float32(e)) for e in v.reshape(-1)]}
                          for k, v in values.items()}}
    ran = subprocess.run(["node", "tools/onnx_op_cases_ort.js"], input=json.dumps(request),
                         capture_output=True, text=True)
    if ran.returncode != 0:
        raise SystemExit(f"ONNX Runtime on {path}: {ran.stderr}")
    return request, json.loads(ran.stdout)


def row(name, dims, data):
    text = ", ".join(f"{v:.9g}" for v in data)
    return f'    {{"{name}", {{{", ".join(map(str, dims))}}}, {{{text}}}}},'


def table(function, rows):
    return (f"inline const std::vector<OnnxOpCase>& {function}() {{\n"
            "  static const std::vector<OnnxOpCase> cases = {\n" + "\n".join(rows) +
            "\n  };\n  return cases;\n}\n")


def main():
    build()
    save("tests/data/onnx/op_cases.onnx", 17)
    cases17 = list(outputs)
    values = {"x": rng.randn(2, 3, 4), "img": rng.randn(1, 2, 5, 5), "seq": rng.randn(3, 2, 4),
              "m": rng.randn(3, 4)}
    request, results17 = run_in_ort("tests/data/onnx/op_cases.onnx", values)
    nodes.clear()
    initializers.clear()
    outputs.clear()
    build_18()
    save("tests/data/onnx/op_cases18.onnx", 18)
    _, results18 = run_in_ort("tests/data/onnx/op_cases18.onnx", values)
    with open("tests/onnx_op_cases.h", "w") as out:
        out.write("// GENERATED by tools/onnx_op_cases.py; do not edit. The inputs of\n"
                  "// tests/data/onnx/op_cases.onnx (opset 17) and op_cases18.onnx (opset 18), and\n"
                  "// ONNX Runtime's (1.30.0) output of each case.\n"
                  "#pragma once\n#include <cstdint>\n#include <vector>\n\n"
                  "struct OnnxOpCase {\n  const char* name;\n  std::vector<int64_t> shape;\n"
                  "  std::vector<double> values;\n};\n\n")
        out.write(table("onnx_op_case_inputs",
                        [row(k, v["dims"], v["data"]) for k, v in request["inputs"].items()]))
        out.write("\n" + table("onnx_op_case_outputs",
                                [row(n, results17[n]["dims"], results17[n]["data"]) for n in cases17]))
        out.write("\n" + table("onnx_op_case18_outputs",
                                [row(n, results18[n]["dims"], results18[n]["data"]) for n in outputs]))


if __name__ == "__main__":
    main()
