// The ONNX file format: the protobuf messages of onnx.proto that a model of dense tensors uses,
// read and written by a small protobuf codec of our own (wire format: varints, fixed 32/64-bit
// values, length-delimited fields). Why not libprotobuf with onnx.proto: the messages needed are
// eight, their codec is a few hundred lines a reader can check against the wire-format spec, it
// can be fuzzed on its own, and a build needs neither protoc nor a protobuf version matched to the
// ONNX headers. Field numbers are onnx.proto's (IR version 8, ONNX 1.12); fields outside this
// subset are skipped when read and never written, so any valid ModelProto reads.
//
// Reading never trusts the file: every length is checked against the bytes left, nesting is
// bounded, and any fault throws OnnxError with one line naming the file, the message and field.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dg::onnx {

// What a malformed or unsupported ONNX file (or graph) throws: one line saying what is wrong.
struct OnnxError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// TensorProto.DataType values used here.
enum class ElemType : int32_t {
  undefined = 0,
  float32 = 1,
  uint8 = 2,
  int8 = 3,
  int32 = 6,
  int64 = 7,
  boolean = 9,
  float16 = 10,
  float64 = 11,
  bfloat16 = 16,
};
const char* elem_type_name(int32_t type);  // "float32", ..., "type 42" for an unknown one

struct TensorProto {
  std::string name;
  std::vector<int64_t> dims;
  int32_t data_type = 0;
  std::string raw_data;  // little-endian values, when the writer used raw_data
  std::vector<float> float_data;
  std::vector<int32_t> int32_data;  // also carries bool, uint8, int8, float16 values
  std::vector<int64_t> int64_data;
  std::vector<double> double_data;
  bool external = false;  // data_location EXTERNAL: the values are in another file (refused)
};

struct GraphProto;
struct AttributeProto {
  enum Type : int32_t {
    undefined = 0,
    f = 1,
    i = 2,
    s = 3,
    t = 4,
    g = 5,
    floats = 6,
    ints = 7,
    strings = 8,
    tensors = 9,
    graphs = 10
  };
  std::string name;
  int32_t type = undefined;
  float f_value = 0;
  int64_t i_value = 0;
  std::string s_value;
  std::vector<TensorProto> t_value;  // one tensor when type == t
  std::vector<float> floats_value;
  std::vector<int64_t> ints_value;
  std::vector<std::string> strings_value;
  bool has_graph = false;  // a subgraph (If, Loop, Scan): read past, refused by the importer
};

struct Dimension {
  bool has_value = false;
  int64_t value = 0;
  std::string param;  // a named (dynamic) dimension, "batch"
};
struct ValueInfo {
  std::string name;
  int32_t elem_type = 0;
  bool has_shape = false;
  std::vector<Dimension> shape;
};

struct NodeProto {
  std::vector<std::string> input;  // "" for an optional input not given
  std::vector<std::string> output;
  std::string name;
  std::string op_type;
  std::string domain;  // "" or "ai.onnx" is the default domain
  std::vector<AttributeProto> attribute;
};

struct GraphProto {
  std::string name;
  std::vector<NodeProto> node;
  std::vector<TensorProto> initializer;
  std::vector<ValueInfo> input;
  std::vector<ValueInfo> output;
  std::vector<ValueInfo> value_info;
};

struct OpsetId {
  std::string domain;
  int64_t version = 0;
};

struct ModelProto {
  int64_t ir_version = 0;
  std::vector<OpsetId> opset_import;
  std::string producer_name;
  std::string producer_version;
  std::string domain;
  int64_t model_version = 0;
  std::string doc_string;
  bool has_graph = false;
  GraphProto graph;

  // The version of the default ("" or "ai.onnx") operator set; 0 when none is imported.
  int64_t default_opset() const;
};

// Serialises a model (only the fields above; defaults are written as protobuf writers do:
// scalars only when set, i.e. non-zero or non-empty).
std::string encode_model(const ModelProto& model);
// Parses bytes; `source` names them in errors ("model.onnx"). Throws OnnxError.
ModelProto decode_model(std::string_view bytes, const std::string& source);

// A file: read (throws OnnxError naming the path when unreadable or malformed) and written
// atomically (train/io/files.h).
ModelProto read_model(const std::string& path);
void write_model(const ModelProto& model, const std::string& path);

}  // namespace dg::onnx
