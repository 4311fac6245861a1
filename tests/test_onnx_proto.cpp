// The ONNX protobuf codec (train/io/onnx/proto.h): every field of every message survives
// encode then decode; repeated scalars read packed and unpacked; negative integers take ten-byte
// varints both ways; fields outside the subset, of every wire type, are skipped; and each decode
// error fires with its message. Bytes are written by hand here with a small writer, so the test
// does not only check the codec against itself.
#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "train/io/onnx/proto.h"

using namespace dg::onnx;

namespace {

std::string varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}
std::string key(int field, int wire) { return varint(static_cast<uint64_t>(field) << 3 | wire); }
std::string integer(int field, int64_t v) {
  return key(field, 0) + varint(static_cast<uint64_t>(v));
}
std::string bytes(int field, const std::string& s) { return key(field, 2) + varint(s.size()) + s; }
std::string fixed32(int field, float v) {
  std::string out = key(field, 5);
  out.append(reinterpret_cast<const char*>(&v), 4);
  return out;
}

// A model that sets every field the codec knows.
ModelProto full_model() {
  ModelProto m;
  m.ir_version = 8;
  m.opset_import = {{"", 17}, {"ai.onnx.ml", 3}};
  m.producer_name = "pytorch";
  m.producer_version = "1.13.1";
  m.domain = "org.example";
  m.model_version = 5;
  m.doc_string = "a model";
  m.has_graph = true;
  GraphProto& g = m.graph;
  g.name = "main";
  TensorProto w;
  w.name = "w";
  w.dims = {2, 3};
  w.data_type = static_cast<int32_t>(ElemType::float32);
  w.raw_data = std::string(24, '\x01');
  TensorProto typed;
  typed.name = "typed";
  typed.dims = {2};
  typed.data_type = static_cast<int32_t>(ElemType::int64);
  typed.float_data = {1.5f, -2.5f};
  typed.int32_data = {-3, 7};
  typed.int64_data = {-9000000000, 4};
  typed.double_data = {0.25, -1e300};
  g.initializer = {w, typed};
  g.input = {ValueInfo{"x", 1, true, {{false, 0, "batch"}, {true, 3, ""}}}};
  g.output = {ValueInfo{"y", 1, true, {{true, -1, ""}}}};
  g.value_info = {ValueInfo{"h", 7, false, {}}};
  NodeProto n;
  n.name = "n";
  n.op_type = "Op";
  n.domain = "ai.onnx";
  n.input = {"x", "", "w"};
  n.output = {"y"};
  auto attribute = [](const char* name, int32_t type) {
    AttributeProto a;
    a.name = name;
    a.type = type;
    return a;
  };
  AttributeProto f = attribute("f", AttributeProto::f), i = attribute("i", AttributeProto::i);
  AttributeProto s = attribute("s", AttributeProto::s), t = attribute("t", AttributeProto::t);
  AttributeProto fs = attribute("fs", AttributeProto::floats);
  AttributeProto is = attribute("is", AttributeProto::ints);
  AttributeProto ss = attribute("ss", AttributeProto::strings);
  f.f_value = -0.5f;
  i.i_value = -42;
  s.s_value = "text";
  t.t_value = {typed};
  fs.floats_value = {1, -2};
  is.ints_value = {-1, 0, 1 << 20};
  ss.strings_value = {"a", ""};
  n.attribute = {f, i, s, t, fs, is, ss};
  g.node = {n};
  return m;
}

void check_tensor(const TensorProto& got, const TensorProto& want) {
  CHECK(got.name == want.name);
  CHECK(got.dims == want.dims);
  CHECK(got.data_type == want.data_type);
  CHECK(got.raw_data == want.raw_data);
  CHECK(got.float_data == want.float_data);
  CHECK(got.int32_data == want.int32_data);
  CHECK(got.int64_data == want.int64_data);
  CHECK(got.double_data == want.double_data);
}

void check_value(const ValueInfo& got, const ValueInfo& want) {
  CHECK(got.name == want.name);
  CHECK(got.elem_type == want.elem_type);
  CHECK(got.has_shape == want.has_shape);
  REQUIRE(got.shape.size() == want.shape.size());
  for (size_t d = 0; d < want.shape.size(); ++d) {
    CHECK(got.shape[d].has_value == want.shape[d].has_value);
    CHECK(got.shape[d].value == want.shape[d].value);
    CHECK(got.shape[d].param == want.shape[d].param);
  }
}

std::string decode_error(const std::string& b) {
  try {
    decode_model(b, "m.onnx");
  } catch (const OnnxError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("every field of every message survives encode and decode") {
  const ModelProto want = full_model();
  const std::string encoded = encode_model(want);
  const ModelProto got = decode_model(encoded, "m.onnx");
  CHECK(encode_model(got) == encoded);
  CHECK(got.ir_version == 8);
  REQUIRE(got.opset_import.size() == 2);
  CHECK(got.opset_import[1].domain == "ai.onnx.ml");
  CHECK(got.opset_import[1].version == 3);
  CHECK(got.default_opset() == 17);
  CHECK(got.producer_name == "pytorch");
  CHECK(got.producer_version == "1.13.1");
  CHECK(got.domain == "org.example");
  CHECK(got.model_version == 5);
  CHECK(got.doc_string == "a model");
  REQUIRE(got.has_graph);
  CHECK(got.graph.name == "main");
  REQUIRE(got.graph.initializer.size() == 2);
  check_tensor(got.graph.initializer[0], want.graph.initializer[0]);
  check_tensor(got.graph.initializer[1], want.graph.initializer[1]);
  check_value(got.graph.input.at(0), want.graph.input[0]);
  check_value(got.graph.output.at(0), want.graph.output[0]);
  check_value(got.graph.value_info.at(0), want.graph.value_info[0]);
  const NodeProto& n = got.graph.node.at(0);
  CHECK(n.name == "n");
  CHECK(n.op_type == "Op");
  CHECK(n.domain == "ai.onnx");
  CHECK(n.input == std::vector<std::string>{"x", "", "w"});
  CHECK(n.output == std::vector<std::string>{"y"});
  REQUIRE(n.attribute.size() == 7);
  CHECK(n.attribute[0].f_value == -0.5f);
  CHECK(n.attribute[1].i_value == -42);
  CHECK(n.attribute[2].s_value == "text");
  check_tensor(n.attribute[3].t_value.at(0), want.graph.initializer[1]);
  CHECK(n.attribute[4].floats_value == std::vector<float>{1, -2});
  CHECK(n.attribute[5].ints_value == std::vector<int64_t>{-1, 0, 1 << 20});
  CHECK(n.attribute[6].strings_value == std::vector<std::string>{"a", ""});
  for (size_t k = 0; k < 7; ++k) CHECK(n.attribute[k].type == want.graph.node[0].attribute[k].type);
}

TEST_CASE("repeated scalars read packed and unpacked, negative integers as ten-byte varints") {
  // TensorProto: dims 2 and 3 unpacked (two keys), int64_data packed (-1, 5), int32_data
  // unpacked (-7), float_data one unpacked value then a packed pair, data_location 1.
  std::string packed_int64 = varint(static_cast<uint64_t>(int64_t{-1})) + varint(5);
  CHECK(varint(static_cast<uint64_t>(int64_t{-1})).size() == 10);
  float pair[2] = {2.0f, -4.0f};
  const std::string tensor = integer(1, 2) + integer(1, 3) + integer(2, 7) +
                             bytes(7, packed_int64) + integer(5, -7) + fixed32(4, 0.5f) +
                             bytes(4, std::string(reinterpret_cast<const char*>(pair), 8)) +
                             bytes(8, "t") + integer(14, 1);
  const std::string model = bytes(7, bytes(5, tensor));
  const ModelProto m = decode_model(model, "m.onnx");
  const TensorProto& t = m.graph.initializer.at(0);
  CHECK(t.dims == std::vector<int64_t>{2, 3});
  CHECK(t.int64_data == std::vector<int64_t>{-1, 5});
  CHECK(t.int32_data == std::vector<int32_t>{-7});
  CHECK(t.float_data == std::vector<float>{0.5f, 2.0f, -4.0f});
  CHECK(t.name == "t");
  CHECK(t.external);
  // An empty packed field adds nothing (a crash regression of the fuzz target: memcpy from an
  // empty vector's null data, which the sanitizers report).
  const ModelProto empty = decode_model(bytes(7, bytes(5, bytes(4, "") + bytes(10, ""))), "m.onnx");
  CHECK(empty.graph.initializer.at(0).float_data.empty());
  CHECK(empty.graph.initializer.at(0).double_data.empty());
  // Attribute ints packed (as some writers do) and unpacked (as onnx.proto declares them).
  const std::string attribute = bytes(1, "a") + bytes(8, varint(4) + varint(5)) + integer(8, -6) +
                                integer(20, AttributeProto::ints);
  const ModelProto with_node = decode_model(bytes(7, bytes(1, bytes(5, attribute))), "m.onnx");
  CHECK(with_node.graph.node.at(0).attribute.at(0).ints_value == std::vector<int64_t>{4, 5, -6});
}

TEST_CASE("fields outside the subset are skipped, whatever their wire type") {
  const std::string encoded = encode_model(full_model());
  double eight = 8;
  const std::string unknown = integer(99, 123) + key(98, 1) +
                              std::string(reinterpret_cast<const char*>(&eight), 8) +
                              bytes(97, "skip me") + fixed32(96, 1.0f);
  const ModelProto got = decode_model(unknown + encoded + unknown, "m.onnx");
  CHECK(encode_model(got) == encoded);
  // Inside a graph and a node too (the graph's training_info-like field 50, the node's 6).
  const std::string graph = bytes(1, bytes(4, "Relu") + bytes(6, "doc")) + bytes(50, "x");
  const ModelProto g = decode_model(bytes(7, graph), "m.onnx");
  CHECK(g.graph.node.at(0).op_type == "Relu");
}

TEST_CASE("each decode error fires with its message") {
  CHECK(decode_error(std::string("\x08\xff\xff", 3)) ==
        "m.onnx: not a valid ONNX model: a varint cut short by the end in ModelProto (byte 3 of "
        "the message)");
  CHECK(decode_error("\x08" + std::string(10, '\x80') + "\x01") ==
        "m.onnx: not a valid ONNX model: a varint longer than 10 bytes in ModelProto (byte 11 of "
        "the message)");
  CHECK(decode_error(std::string("\x00", 1)) ==
        "m.onnx: not a valid ONNX model: a field number of 0 or out of range in ModelProto (byte "
        "1 of the message)");
  CHECK(decode_error(key(1, 3)) ==
        "m.onnx: not a valid ONNX model: wire type 3 in ModelProto (byte 1 of the message)");
  CHECK(decode_error(key(1, 6)) ==
        "m.onnx: not a valid ONNX model: wire type 6 in ModelProto (byte 1 of the message)");
  CHECK(decode_error(bytes(2, "x").substr(0, 2)) ==
        "m.onnx: not a valid ONNX model: a length of 1 past the end in ModelProto (byte 2 of the "
        "message)");
  CHECK(decode_error(key(99, 5) + "ab") ==
        "m.onnx: not a valid ONNX model: a value cut short by the end in ModelProto (byte 2 of "
        "the message)");
  CHECK(decode_error(integer(2, 1)) ==
        "m.onnx: not a valid ONNX model: field 2 should be bytes (wire type 2) but has wire type "
        "0 in ModelProto (byte 1 of the message)");
  // Inside nested messages the path names them.
  CHECK(decode_error(bytes(7, bytes(5, bytes(4, "abc")))) ==
        "m.onnx: not a valid ONNX model: packed values of 3 bytes, not a multiple of 4 in "
        "ModelProto.graph.initializer (byte 5 of the message)");
  CHECK(decode_error(bytes(7, bytes(1, fixed32(3, 1.0f)))) ==
        "m.onnx: not a valid ONNX model: field 3 should be bytes (wire type 2) but has wire type "
        "5 in ModelProto.graph.node (byte 1 of the message)");
  CHECK(decode_error(bytes(7, bytes(1, bytes(5, key(2, 5) + "x")))) ==
        "m.onnx: not a valid ONNX model: a value cut short by the end in "
        "ModelProto.graph.node.attribute (byte 1 of the message)");
}

TEST_CASE("read_model names an unreadable path") {
  CHECK_THROWS_AS(read_model("no/such/dir/model.onnx"), OnnxError);
  try {
    read_model("no/such/dir/model.onnx");
  } catch (const OnnxError& e) {
    CHECK(std::string(e.what()).find("no/such/dir/model.onnx") != std::string::npos);
  }
}
