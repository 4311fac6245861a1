// The protobuf codec of the ONNX messages in proto.h. Wire format (protobuf's encoding spec):
// each field is a key varint (field_number << 3 | wire_type) and a value: wire type 0 a varint,
// 1 eight little-endian bytes, 2 a varint length and that many bytes (strings, bytes, nested
// messages, packed repeated scalars), 5 four little-endian bytes. Repeated scalars are read
// packed or not (a reader must accept both); written as onnx.proto declares them.
#include "train/io/onnx/proto.h"

#include <fmt/format.h>

#include <cstring>

#include "train/io/files.h"

namespace dg::onnx {

const char* elem_type_name(int32_t type) {
  switch (static_cast<ElemType>(type)) {
    case ElemType::float32:
      return "float32";
    case ElemType::uint8:
      return "uint8";
    case ElemType::int8:
      return "int8";
    case ElemType::int32:
      return "int32";
    case ElemType::int64:
      return "int64";
    case ElemType::boolean:
      return "bool";
    case ElemType::float16:
      return "float16";
    case ElemType::float64:
      return "float64";
    case ElemType::bfloat16:
      return "bfloat16";
    default:
      break;
  }
  thread_local std::string text;
  text = fmt::format("type {}", type);
  return text.c_str();
}

int64_t ModelProto::default_opset() const {
  for (const OpsetId& id : opset_import)
    if (id.domain.empty() || id.domain == "ai.onnx") return id.version;
  return 0;
}

// ---- Writing ------------------------------------------------------------------------------
namespace {

class Writer {
 public:
  std::string bytes;
  void varint(uint64_t v) {
    while (v >= 0x80) {
      bytes.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    bytes.push_back(static_cast<char>(v));
  }
  void key(int field, int wire) { varint(static_cast<uint64_t>(field) << 3 | wire); }
  void int_field(int field, int64_t v) {  // int32/int64: negative values as 10-byte varints
    key(field, 0);
    varint(static_cast<uint64_t>(v));
  }
  void optional_int(int field, int64_t v) {
    if (v != 0) int_field(field, v);
  }
  void bytes_field(int field, std::string_view s) {
    key(field, 2);
    varint(s.size());
    bytes.append(s);
  }
  void optional_bytes(int field, std::string_view s) {
    if (!s.empty()) bytes_field(field, s);
  }
  void float_field(int field, float v) {
    key(field, 5);
    append_raw(&v, 4);
  }
  template <class T>
  void packed_fixed(int field, const std::vector<T>& values) {  // float / double, packed
    if (values.empty()) return;
    key(field, 2);
    varint(values.size() * sizeof(T));
    append_raw(values.data(), values.size() * sizeof(T));
  }
  template <class T>
  void packed_varints(int field, const std::vector<T>& values) {
    if (values.empty()) return;
    Writer inner;
    for (T v : values) inner.varint(static_cast<uint64_t>(static_cast<int64_t>(v)));
    bytes_field(field, inner.bytes);
  }
  void append_raw(const void* p, size_t n) {  // little-endian host (x86-64, aarch64)
    bytes.append(static_cast<const char*>(p), n);
  }
};

std::string encode(const TensorProto& t) {
  Writer w;
  for (int64_t d : t.dims) w.int_field(1, d);  // repeated int64 dims = 1 (not packed)
  w.optional_int(2, t.data_type);
  w.packed_fixed(4, t.float_data);
  w.packed_varints(5, t.int32_data);
  w.packed_varints(7, t.int64_data);
  w.optional_bytes(8, t.name);
  if (!t.raw_data.empty()) w.bytes_field(9, t.raw_data);
  w.packed_fixed(10, t.double_data);
  return std::move(w.bytes);
}

std::string encode(const AttributeProto& a) {
  Writer w;
  w.bytes_field(1, a.name);
  if (a.type == AttributeProto::f) w.float_field(2, a.f_value);
  if (a.type == AttributeProto::i) w.int_field(3, a.i_value);
  if (a.type == AttributeProto::s) w.bytes_field(4, a.s_value);
  if (a.type == AttributeProto::t)
    for (const TensorProto& t : a.t_value) w.bytes_field(5, encode(t));
  for (float f : a.floats_value) w.float_field(7, f);  // repeated float floats = 7
  for (int64_t i : a.ints_value) w.int_field(8, i);    // repeated int64 ints = 8
  for (const std::string& s : a.strings_value) w.bytes_field(9, s);
  w.int_field(20, a.type);
  return std::move(w.bytes);
}

std::string encode(const ValueInfo& v) {
  Writer shape;
  for (const Dimension& d : v.shape) {
    Writer dim;
    if (d.has_value)
      dim.int_field(1, d.value);
    else if (!d.param.empty())
      dim.bytes_field(2, d.param);
    shape.bytes_field(1, dim.bytes);
  }
  Writer tensor_type;
  tensor_type.int_field(1, v.elem_type);
  if (v.has_shape) tensor_type.bytes_field(2, shape.bytes);
  Writer type;
  type.bytes_field(1, tensor_type.bytes);
  Writer w;
  w.bytes_field(1, v.name);
  if (v.elem_type != 0) w.bytes_field(2, type.bytes);
  return std::move(w.bytes);
}

std::string encode(const NodeProto& n) {
  Writer w;
  for (const std::string& s : n.input) w.bytes_field(1, s);
  for (const std::string& s : n.output) w.bytes_field(2, s);
  w.optional_bytes(3, n.name);
  w.bytes_field(4, n.op_type);
  for (const AttributeProto& a : n.attribute) w.bytes_field(5, encode(a));
  w.optional_bytes(7, n.domain);
  return std::move(w.bytes);
}

std::string encode(const GraphProto& g) {
  Writer w;
  for (const NodeProto& n : g.node) w.bytes_field(1, encode(n));
  w.optional_bytes(2, g.name);
  for (const TensorProto& t : g.initializer) w.bytes_field(5, encode(t));
  for (const ValueInfo& v : g.input) w.bytes_field(11, encode(v));
  for (const ValueInfo& v : g.output) w.bytes_field(12, encode(v));
  for (const ValueInfo& v : g.value_info) w.bytes_field(13, encode(v));
  return std::move(w.bytes);
}

}  // namespace

std::string encode_model(const ModelProto& m) {
  Writer w;
  w.optional_int(1, m.ir_version);
  w.optional_bytes(2, m.producer_name);
  w.optional_bytes(3, m.producer_version);
  w.optional_bytes(4, m.domain);
  w.optional_int(5, m.model_version);
  w.optional_bytes(6, m.doc_string);
  if (m.has_graph) w.bytes_field(7, encode(m.graph));
  for (const OpsetId& id : m.opset_import) {
    Writer op;
    op.optional_bytes(1, id.domain);
    op.int_field(2, id.version);
    w.bytes_field(8, op.bytes);
  }
  return std::move(w.bytes);
}

// ---- Reading ------------------------------------------------------------------------------
namespace {

constexpr int kMaxDepth = 64;  // nested messages (a graph inside an attribute inside a graph...)

// One message's bytes, read field by field; errors name the source and the message path.
class Reader {
 public:
  Reader(std::string_view bytes, const std::string& source, std::string where, int depth)
      : begin_(bytes.data()),
        p_(bytes.data()),
        end_(bytes.data() + bytes.size()),
        source_(source),
        where_(std::move(where)),
        depth_(depth) {
    if (depth_ > kMaxDepth) fail("messages nested more than 64 deep");
  }
  bool next() {  // reads the next key; false at the end of the message
    if (p_ == end_) return false;
    const uint64_t k = varint();
    field_ = static_cast<int>(k >> 3);
    wire_ = static_cast<int>(k & 7);
    if (field_ == 0 || (k >> 3) > 0x1fffffff) fail("a field number of 0 or out of range");
    if (wire_ == 3 || wire_ == 4 || wire_ > 5) fail(fmt::format("wire type {}", wire_));
    return true;
  }
  int field() const { return field_; }
  [[noreturn]] void fail(const std::string& what) const {
    throw OnnxError(fmt::format("{}: not a valid ONNX model: {} in {} (byte {} of the message)",
                                source_, what, where_, offset()));
  }
  int64_t integer() {
    expect(0, "an integer");
    return static_cast<int64_t>(varint());
  }
  int32_t int32() { return static_cast<int32_t>(integer()); }
  float real32() {
    expect(5, "a float");
    float v;
    std::memcpy(&v, take(4).data(), 4);
    return v;
  }
  std::string_view bytes() {
    expect(2, "bytes");
    const uint64_t n = varint();
    if (n > static_cast<uint64_t>(end_ - p_)) fail(fmt::format("a length of {} past the end", n));
    return take(static_cast<size_t>(n));
  }
  Reader message(const char* name) {
    return Reader(bytes(), source_, where_ + "." + name, depth_ + 1);
  }
  // A repeated integer field, packed (wire type 2) or one value (wire type 0).
  template <class T>
  void integers(std::vector<T>& out) {
    if (wire_ == 0) {
      out.push_back(static_cast<T>(varint()));
      return;
    }
    Reader packed(bytes(), source_, where_, depth_);
    while (packed.p_ != packed.end_) out.push_back(static_cast<T>(packed.varint()));
  }
  // A repeated fixed-size field (float: 4 bytes, double: 8), packed or one value.
  template <class T>
  void fixed(std::vector<T>& out) {
    if (wire_ == (sizeof(T) == 4 ? 5 : 1)) {
      T v;
      std::memcpy(&v, take(sizeof(T)).data(), sizeof(T));
      out.push_back(v);
      return;
    }
    const std::string_view b = bytes();
    if (b.size() % sizeof(T) != 0)
      fail(fmt::format("packed values of {} bytes, not a multiple of {}", b.size(), sizeof(T)));
    const size_t old = out.size();
    out.resize(old + b.size() / sizeof(T));
    if (!b.empty()) std::memcpy(out.data() + old, b.data(), b.size());  // never memcpy(null, .., 0)
  }
  void skip() {
    switch (wire_) {
      case 0:
        varint();
        break;
      case 1:
        take(8);
        break;
      case 2:
        bytes();
        break;
      case 5:
        take(4);
        break;
      default:
        fail("an unknown wire type");
    }
  }

 private:
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (p_ == end_) fail("a varint cut short by the end");
      const auto byte = static_cast<uint8_t>(*p_++);
      v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return v;
    }
    fail("a varint longer than 10 bytes");
  }
  std::string_view take(size_t n) {
    if (n > static_cast<size_t>(end_ - p_)) fail("a value cut short by the end");
    std::string_view out(p_, n);
    p_ += n;
    return out;
  }
  void expect(int wire, const char* what) {
    if (wire_ != wire)
      fail(fmt::format("field {} should be {} (wire type {}) but has wire type {}", field_, what,
                       wire, wire_));
  }
  size_t offset() const { return static_cast<size_t>(p_ - begin_); }
  const char* begin_;
  const char* p_;
  const char* end_;
  const std::string& source_;
  std::string where_;
  int depth_;
  int field_ = 0;
  int wire_ = 0;
};

TensorProto decode_tensor(Reader r) {
  TensorProto t;
  while (r.next()) {
    switch (r.field()) {
      case 1:
        r.integers(t.dims);
        break;
      case 2:
        t.data_type = r.int32();
        break;
      case 4:
        r.fixed(t.float_data);
        break;
      case 5:
        r.integers(t.int32_data);
        break;
      case 7:
        r.integers(t.int64_data);
        break;
      case 8:
        t.name = r.bytes();
        break;
      case 9:
        t.raw_data = r.bytes();
        break;
      case 10:
        r.fixed(t.double_data);
        break;
      case 14:
        t.external = r.integer() == 1;
        break;
      default:
        r.skip();
    }
  }
  return t;
}

AttributeProto decode_attribute(Reader r) {
  AttributeProto a;
  while (r.next()) {
    switch (r.field()) {
      case 1:
        a.name = r.bytes();
        break;
      case 2:
        a.f_value = r.real32();
        break;
      case 3:
        a.i_value = r.integer();
        break;
      case 4:
        a.s_value = r.bytes();
        break;
      case 5:
        a.t_value.push_back(decode_tensor(r.message("t")));
        break;
      case 6:
        a.has_graph = true;
        r.skip();
        break;
      case 7:
        r.fixed(a.floats_value);
        break;
      case 8:
        r.integers(a.ints_value);
        break;
      case 9:
        a.strings_value.emplace_back(r.bytes());
        break;
      case 11:
        a.has_graph = true;
        r.skip();
        break;
      case 20:
        a.type = r.int32();
        break;
      default:
        r.skip();
    }
  }
  return a;
}

Dimension decode_dimension(Reader r) {
  Dimension d;
  while (r.next()) {
    if (r.field() == 1) {
      d.has_value = true;
      d.value = r.integer();
    } else if (r.field() == 2) {
      d.param = r.bytes();
    } else {
      r.skip();
    }
  }
  return d;
}

void decode_tensor_type(Reader r, ValueInfo& v) {
  while (r.next()) {
    if (r.field() == 1) {
      v.elem_type = r.int32();
    } else if (r.field() == 2) {
      v.has_shape = true;
      Reader shape = r.message("shape");
      while (shape.next()) {
        if (shape.field() == 1)
          v.shape.push_back(decode_dimension(shape.message("dim")));
        else
          shape.skip();
      }
    } else {
      r.skip();
    }
  }
}

ValueInfo decode_value_info(Reader r) {
  ValueInfo v;
  while (r.next()) {
    if (r.field() == 1) {
      v.name = r.bytes();
    } else if (r.field() == 2) {
      Reader type = r.message("type");
      while (type.next()) {
        if (type.field() == 1)
          decode_tensor_type(type.message("tensor_type"), v);
        else
          type.skip();  // sequences, maps, optionals: no element type, refused by the importer
      }
    } else {
      r.skip();
    }
  }
  return v;
}

NodeProto decode_node(Reader r) {
  NodeProto n;
  while (r.next()) {
    switch (r.field()) {
      case 1:
        n.input.emplace_back(r.bytes());
        break;
      case 2:
        n.output.emplace_back(r.bytes());
        break;
      case 3:
        n.name = r.bytes();
        break;
      case 4:
        n.op_type = r.bytes();
        break;
      case 5:
        n.attribute.push_back(decode_attribute(r.message("attribute")));
        break;
      case 7:
        n.domain = r.bytes();
        break;
      default:
        r.skip();
    }
  }
  return n;
}

GraphProto decode_graph(Reader r) {
  GraphProto g;
  while (r.next()) {
    switch (r.field()) {
      case 1:
        g.node.push_back(decode_node(r.message("node")));
        break;
      case 2:
        g.name = r.bytes();
        break;
      case 5:
        g.initializer.push_back(decode_tensor(r.message("initializer")));
        break;
      case 11:
        g.input.push_back(decode_value_info(r.message("input")));
        break;
      case 12:
        g.output.push_back(decode_value_info(r.message("output")));
        break;
      case 13:
        g.value_info.push_back(decode_value_info(r.message("value_info")));
        break;
      default:
        r.skip();
    }
  }
  return g;
}

}  // namespace

ModelProto decode_model(std::string_view bytes, const std::string& source) {
  ModelProto m;
  Reader r(bytes, source, "ModelProto", 0);
  while (r.next()) {
    switch (r.field()) {
      case 1:
        m.ir_version = r.integer();
        break;
      case 2:
        m.producer_name = r.bytes();
        break;
      case 3:
        m.producer_version = r.bytes();
        break;
      case 4:
        m.domain = r.bytes();
        break;
      case 5:
        m.model_version = r.integer();
        break;
      case 6:
        m.doc_string = r.bytes();
        break;
      case 7:
        m.has_graph = true;
        m.graph = decode_graph(r.message("graph"));
        break;
      case 8: {
        OpsetId id;
        Reader op = r.message("opset_import");
        while (op.next()) {
          if (op.field() == 1)
            id.domain = op.bytes();
          else if (op.field() == 2)
            id.version = op.integer();
          else
            op.skip();
        }
        m.opset_import.push_back(id);
        break;
      }
      default:
        r.skip();
    }
  }
  return m;
}

ModelProto read_model(const std::string& path) {
  std::string bytes;
  try {
    bytes = read_file(path);
  } catch (const std::exception& e) {
    throw OnnxError(e.what());
  }
  return decode_model(bytes, path);
}

void write_model(const ModelProto& model, const std::string& path) {
  write_file_atomic(path, encode_model(model));
}

}  // namespace dg::onnx
