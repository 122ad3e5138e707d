// safetensors and .npy, read and written. Sections: shared helpers and the safetensors dtype
// table (kStDtypes); decode and Tensor accessors; safetensors (header length and JSON, one
// EntryReader per tensor entry, the overlap check, the layout of all entries); npy (preamble,
// header dict, descr); streaming (InputFile, open_*); make_tensor. Every parse_* works on bytes
// and checks before it touches them; read_* only adds the file; open_* runs the same header
// checks on the header alone, with the file's size standing in for the byte count.
#include "ropecheck/tensorio/tensorio.hpp"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "ropecheck/dtype.hpp"

namespace ropecheck::tensorio {

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& msg) {
  throw FormatError(what + ": " + msg);
}

// Element count of a shape, or nullopt when a dim is negative or the product overflows int64.
std::optional<std::int64_t> checked_numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / d) return std::nullopt;
    n *= d;
  }
  return n;
}

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string o = "[";
  for (std::size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

struct StDtype {
  const char* name;
  ElemType type;
  int bytes;
};
// Every dtype of the safetensors format, so files with extra tensors (masks, ids) still parse.
constexpr StDtype kStDtypes[] = {
    {"F64", ElemType::f64, 8},    {"F32", ElemType::f32, 4},    {"F16", ElemType::f16, 2},
    {"BF16", ElemType::bf16, 2},  {"I64", ElemType::i64, 8},    {"I32", ElemType::i32, 4},
    {"BOOL", ElemType::other, 1}, {"U8", ElemType::u8, 1},      {"I8", ElemType::other, 1},
    {"I16", ElemType::other, 2},  {"U16", ElemType::other, 2},  {"U32", ElemType::other, 4},
    {"U64", ElemType::other, 8},  {"F8_E4M3", ElemType::u8, 1}, {"F8_E5M2", ElemType::u8, 1},
};

std::vector<unsigned char> read_file(const std::string& path, const Limits& limits) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) throw FormatError(path + ": cannot open file");
  const std::streamoff size = f.tellg();
  if (size < 0) throw FormatError(path + ": cannot determine file size");
  if (static_cast<std::uint64_t>(size) > limits.max_bytes)
    throw FormatError(path + ": file is " + std::to_string(size) +
                      " bytes, larger than the memory limit of " +
                      std::to_string(limits.max_bytes) + " bytes (raise it with --max-bytes)");
  std::vector<unsigned char> buf(static_cast<std::size_t>(size));
  f.seekg(0);
  if (size > 0 && !f.read(reinterpret_cast<char*>(buf.data()), size))
    throw FormatError(path + ": read error");
  return buf;
}

void write_file(const std::string& path, const std::string& head,
                const std::vector<const Tensor*>& parts) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw FormatError(path + ": cannot create file");
  f.write(head.data(), static_cast<std::streamsize>(head.size()));
  for (const Tensor* t : parts)
    f.write(reinterpret_cast<const char*>(t->data.data()),
            static_cast<std::streamsize>(t->data.size()));
  if (!f) throw FormatError(path + ": write error");
}

}  // namespace

const char* name(ElemType t) {
  switch (t) {
    case ElemType::f64:
      return "f64";
    case ElemType::f32:
      return "f32";
    case ElemType::f16:
      return "f16";
    case ElemType::bf16:
      return "bf16";
    case ElemType::i64:
      return "i64";
    case ElemType::i32:
      return "i32";
    case ElemType::other:
      return "other";
    case ElemType::u8:
      return "u8";
  }
  return "?";
}

int elem_bytes(ElemType t) {
  switch (t) {
    case ElemType::f64:
    case ElemType::i64:
      return 8;
    case ElemType::f32:
    case ElemType::i32:
      return 4;
    case ElemType::f16:
    case ElemType::bf16:
      return 2;
    case ElemType::u8:
      return 1;
    case ElemType::other:
      return 0;
  }
  return 0;
}

std::int64_t Tensor::numel() const { return checked_numel(shape).value_or(0); }
bool Tensor::is_float() const {
  return type == ElemType::f64 || type == ElemType::f32 || type == ElemType::f16 ||
         type == ElemType::bf16;
}

double decode(ElemType t, const unsigned char* p) {
  switch (t) {
    case ElemType::f64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case ElemType::f32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case ElemType::f16: {
      std::uint16_t b;
      std::memcpy(&b, p, 2);
      return from_bits(b, Dtype::f16);
    }
    case ElemType::bf16: {
      std::uint16_t b;
      std::memcpy(&b, p, 2);
      return from_bits(b, Dtype::bf16);
    }
    case ElemType::i64:
    case ElemType::i32:
    case ElemType::u8:
      return static_cast<double>(decode_int(t, p));
    case ElemType::other:
      break;
  }
  return 0;
}

std::int64_t decode_int(ElemType t, const unsigned char* p) {
  if (t == ElemType::i64) {
    std::int64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  if (t == ElemType::u8) return *p;
  if (t == ElemType::i32) {
    std::int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  return 0;
}

double Tensor::get(std::int64_t i) const {
  return decode(type, data.data() + i * elem_bytes(type));
}

std::int64_t Tensor::get_int(std::int64_t i) const {
  return decode_int(type, data.data() + i * elem_bytes(type));
}

const Tensor* TensorFile::find(const std::string& n) const {
  for (const auto& t : tensors)
    if (t.name == n) return &t;
  return nullptr;
}

// ---- safetensors ------------------------------------------------------------------------------
// [u64 LE header length N][N bytes JSON header][data]. Header: {"__metadata__": {str: str},
// "<name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...}; offsets are
// relative to the start of the data section, end exclusive.
namespace {

void check_size(std::size_t n, const std::string& what, const Limits& limits) {
  if (n > limits.max_bytes)
    fail(what, "input of " + std::to_string(n) + " bytes exceeds the memory limit of " +
                   std::to_string(limits.max_bytes) + " bytes");
}

// The header length, bytes 0-7 of `first` (which holds min(8, n) bytes of an input of n bytes),
// checked against the input before anything else is read.
std::uint64_t safetensors_header_length(const unsigned char* first, std::uint64_t n,
                                        const std::string& what) {
  if (n < 8)
    fail(what, "truncated: " + std::to_string(n) +
                   " bytes, a safetensors file starts with an 8-byte header length");
  std::uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | first[i];
  if (hlen > n - 8)
    fail(what, "header length " + std::to_string(hlen) +
                   " (bytes 0-7) runs past the end of the file (" + std::to_string(n) + " bytes)");
  // The format caps the header at 100 MB; a bigger one is corrupt, not a big model.
  if (hlen > 100'000'000) fail(what, "header length " + std::to_string(hlen) + " exceeds 100 MB");
  return hlen;
}

// The JSON header: the hlen bytes at p (bytes 8 .. 8 + hlen of the input).
nlohmann::json safetensors_header_json(const unsigned char* p, std::uint64_t hlen,
                                       const std::string& what) {
  const auto* hbeg = reinterpret_cast<const char*>(p);
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(hbeg, hbeg + hlen);
  } catch (const nlohmann::json::exception& e) {
    // parse_error, and out_of_range for numbers beyond double (1e400): both malformed headers.
    fail(what, "header JSON (bytes 8-" + std::to_string(8 + hlen) + ") is malformed: " + e.what());
  }
  if (!h.is_object()) fail(what, "header JSON is not an object");
  return h;
}

void read_metadata(const nlohmann::json& v, const std::string& what,
                   std::map<std::string, std::string>& out) {
  if (!v.is_object()) fail(what, "__metadata__ must be an object of strings");
  for (auto m = v.begin(); m != v.end(); ++m) {
    if (!m.value().is_string())
      fail(what, "__metadata__[\"" + m.key() +
                     "\"] must be a string (safetensors metadata is string -> string)");
    out[m.key()] = m.value().get<std::string>();
  }
}

// One tensor entry of the header; `loc` ("tensor 'x'") prefixes every message about it.
class EntryReader {
 public:
  EntryReader(const nlohmann::json& v, const std::string& what, const std::string& loc)
      : v_(v), what_(what), loc_(loc) {}

  [[noreturn]] void err(const std::string& m) const { fail(what_, loc_ + ": " + m); }

  void check_fields() const {
    if (!v_.is_object()) err("entry is not an object");
    if (!v_.contains("dtype") || !v_["dtype"].is_string()) err("missing string 'dtype'");
    if (!v_.contains("shape") || !v_["shape"].is_array()) err("missing array 'shape'");
    if (!v_.contains("data_offsets") || !v_["data_offsets"].is_array() ||
        v_["data_offsets"].size() != 2)
      err("'data_offsets' must be [begin, end]");
  }
  // Sets t.type; returns the element size.
  int dtype(Tensor& t) const {
    int eb = 0;
    for (const auto& d : kStDtypes)
      if (t.type_name == d.name) {
        t.type = d.type;
        eb = d.bytes;
      }
    if (eb == 0) err("unknown dtype '" + t.type_name + "'");
    return eb;
  }
  std::vector<std::int64_t> shape() const {
    std::vector<std::int64_t> shape;
    for (const auto& d : v_["shape"]) {
      if (!d.is_number_integer()) err("shape entries must be integers");
      if (d.is_number_unsigned() &&
          d.get<std::uint64_t>() >
              static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        err("shape entry out of range");
      shape.push_back(d.get<std::int64_t>());
    }
    if (shape.size() > 16) err("more than 16 dimensions");
    return shape;
  }
  // [begin, end) inside a data section of data_len bytes.
  std::pair<std::uint64_t, std::uint64_t> offsets(std::uint64_t data_len) const {
    for (const auto& o : v_["data_offsets"])
      if (!o.is_number_unsigned() && !(o.is_number_integer() && o.get<std::int64_t>() >= 0))
        err("data_offsets must be non-negative integers");
    const auto b = v_["data_offsets"][0].get<std::uint64_t>();
    const auto e = v_["data_offsets"][1].get<std::uint64_t>();
    if (b > e) err("data_offsets begin " + std::to_string(b) + " > end " + std::to_string(e));
    if (e > data_len)
      err("data_offsets end " + std::to_string(e) + " is past the data section (" +
          std::to_string(data_len) + " bytes after the header)");
    return {b, e};
  }

 private:
  const nlohmann::json& v_;
  const std::string& what_;
  std::string loc_;
};

// Where a tensor's bytes lie in the data section (for the overlap check).
struct Span {
  std::uint64_t b, e;
  std::string name;
};

// One tensor entry, validated against a data section of data_len bytes: the tensor without its
// bytes, and where they lie.
Tensor describe_entry(const std::string& key, const nlohmann::json& v, std::uint64_t data_len,
                      const std::string& what, Span& span) {
  const EntryReader rd(v, what, "tensor '" + key + "'");
  rd.check_fields();
  Tensor t;
  t.name = key;
  t.type_name = v["dtype"].get<std::string>();
  const int eb = rd.dtype(t);
  t.shape = rd.shape();
  const auto numel = checked_numel(t.shape);
  if (!numel) rd.err("shape " + shape_str(t.shape) + " is negative or overflows");
  const auto [b, e] = rd.offsets(data_len);
  const std::uint64_t want = static_cast<std::uint64_t>(*numel);
  if (want > (e - b) / static_cast<std::uint64_t>(eb) || want * eb != e - b)
    rd.err("byte count " + std::to_string(e - b) + " != shape " + shape_str(t.shape) + " x " +
           std::to_string(eb) + " bytes (" + t.type_name + ")");
  span = {b, e, key};
  return t;
}

void check_no_overlap(std::vector<Span> spans, const std::string& what) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.b < b.b; });
  for (std::size_t i = 1; i < spans.size(); ++i)
    if (spans[i].b < spans[i - 1].e)
      fail(what, "tensors '" + spans[i - 1].name + "' and '" + spans[i].name +
                     "' overlap in the data section");
}

}  // namespace

namespace {

// Every entry of a header, validated against a data section of data_len bytes (no data read):
// tensors[i]'s bytes are spans[i].
struct Layout {
  std::map<std::string, std::string> metadata;
  std::vector<Tensor> tensors;
  std::vector<Span> spans;
};

Layout safetensors_layout(const nlohmann::json& h, std::uint64_t data_len,
                          const std::string& what) {
  Layout out;
  std::vector<Span> filled;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") {
      read_metadata(it.value(), what, out.metadata);
      continue;
    }
    Span span;
    out.tensors.push_back(describe_entry(it.key(), it.value(), data_len, what, span));
    out.spans.push_back(span);
    // Empty tensors occupy no bytes, so they cannot overlap anything (their offsets may coincide
    // with a neighbour's begin).
    if (span.e > span.b) filled.push_back(std::move(span));
  }
  check_no_overlap(std::move(filled), what);
  return out;
}

}  // namespace

TensorFile parse_safetensors(const unsigned char* data, std::size_t n, const std::string& what,
                             const Limits& limits) {
  check_size(n, what, limits);
  const std::uint64_t hlen = safetensors_header_length(data, n, what);
  const unsigned char* section = data + 8 + hlen;
  Layout l = safetensors_layout(safetensors_header_json(data + 8, hlen, what), n - 8 - hlen, what);
  TensorFile out;
  out.metadata = std::move(l.metadata);
  out.tensors = std::move(l.tensors);
  for (std::size_t i = 0; i < out.tensors.size(); ++i)
    out.tensors[i].data.assign(section + l.spans[i].b, section + l.spans[i].e);
  return out;
}

TensorFile read_safetensors(const std::string& path, const Limits& limits) {
  const auto buf = read_file(path, limits);
  return parse_safetensors(buf.data(), buf.size(), path, limits);
}

void write_safetensors(const std::string& path, const TensorFile& f) {
  nlohmann::json h = nlohmann::json::object();
  if (!f.metadata.empty()) h["__metadata__"] = f.metadata;
  std::uint64_t off = 0;
  std::vector<const Tensor*> parts;
  for (const auto& t : f.tensors) {
    const char* dt = nullptr;
    for (const auto& d : kStDtypes)  // the tensor's own label first (U8 / F8_E4M3 / F8_E5M2)
      if (d.type == t.type && d.type != ElemType::other && (!dt || t.type_name == d.name))
        dt = d.name;
    if (!dt) throw FormatError(path + ": cannot write tensor '" + t.name + "' of this type");
    h[t.name] = {{"dtype", dt}, {"shape", t.shape}, {"data_offsets", {off, off + t.data.size()}}};
    off += t.data.size();
    parts.push_back(&t);
  }
  std::string js = h.dump();
  while ((8 + js.size()) % 8)
    js += ' ';  // data section 8-byte aligned, as the reference writer does
  std::string head(8, '\0');
  std::uint64_t len = js.size();
  for (int i = 0; i < 8; ++i) head[i] = static_cast<char>((len >> (8 * i)) & 0xFF);
  write_file(path, head + js, parts);
}

// ---- npy ------------------------------------------------------------------------------------
// "\x93NUMPY" major minor, header length (u16 for v1, u32 for v2/v3), then a Python dict literal
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces and '\n'.
namespace {

class DictParser {
 public:
  DictParser(const std::string& s, const std::string& what) : s_(s), what_(what) {}
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  bool eat(char c) {
    ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) err(std::string("expected '") + c + "'");
  }
  std::string str() {
    ws();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) err("expected a quoted string");
    const char q = s_[i_++];
    const auto e = s_.find(q, i_);
    if (e == std::string::npos) err("unterminated string");
    std::string r = s_.substr(i_, e - i_);
    i_ = e + 1;
    return r;
  }
  bool boolean() {
    ws();
    if (s_.compare(i_, 4, "True") == 0) {
      i_ += 4;
      return true;
    }
    if (s_.compare(i_, 5, "False") == 0) {
      i_ += 5;
      return false;
    }
    err("expected True or False");
  }
  std::vector<std::int64_t> tuple() {
    std::vector<std::int64_t> r;
    expect('(');
    for (;;) {
      if (eat(')')) return r;
      ws();
      std::size_t st = i_;
      if (i_ < s_.size() && s_[i_] == '-') ++i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      if (i_ == st || (i_ == st + 1 && s_[st] == '-')) err("expected an integer in shape");
      if (i_ - st > 18) err("shape entry too large");
      r.push_back(std::stoll(s_.substr(st, i_ - st)));
      if (r.size() > 16) err("more than 16 dimensions");
      if (!eat(',')) {
        expect(')');
        return r;
      }
    }
  }
  [[noreturn]] void err(const std::string& m) {
    fail(what_, "npy header, character " + std::to_string(i_) + ": " + m + " in " + s_);
  }

 private:
  const std::string& s_;
  std::string what_;
  std::size_t i_ = 0;
};

constexpr unsigned char kNpyMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

// Where the header dict lies: v1 has a u16 length at bytes 8-9, v2/v3 a u32 at bytes 8-11.
struct NpyPreamble {
  std::uint64_t hstart, hlen;
};

NpyPreamble npy_preamble(const unsigned char* data, std::size_t n, const std::string& what) {
  if (n < 10 || std::memcmp(data, kNpyMagic, 6) != 0)
    fail(what, "not a .npy file (bad magic, bytes 0-5)");
  const int major = data[6];
  NpyPreamble p{};
  if (major == 1) {
    p.hlen = data[8] | (static_cast<std::uint64_t>(data[9]) << 8);
    p.hstart = 10;
  } else if (major == 2 || major == 3) {
    if (n < 12) fail(what, "truncated npy v2 preamble");
    p.hlen = data[8] | (static_cast<std::uint64_t>(data[9]) << 8) |
             (static_cast<std::uint64_t>(data[10]) << 16) |
             (static_cast<std::uint64_t>(data[11]) << 24);
    p.hstart = 12;
  } else {
    fail(what, "unsupported npy format version " + std::to_string(major) + " (byte 6)");
  }
  if (p.hlen > n - p.hstart)
    fail(what, "npy header length " + std::to_string(p.hlen) + " runs past the end of the file (" +
                   std::to_string(n) + " bytes)");
  return p;
}

struct NpyHeader {
  std::string descr;
  bool fortran;
  std::vector<std::int64_t> shape;
};

// The dict literal; all three keys required, any other key refused.
NpyHeader npy_header(const std::string& header, const std::string& what) {
  DictParser p(header, what);
  std::optional<std::string> descr;
  std::optional<bool> fortran;
  std::optional<std::vector<std::int64_t>> shape;
  p.expect('{');
  while (!p.eat('}')) {
    const std::string key = p.str();
    p.expect(':');
    if (key == "descr")
      descr = p.str();
    else if (key == "fortran_order")
      fortran = p.boolean();
    else if (key == "shape")
      shape = p.tuple();
    else
      p.err("unknown key '" + key + "'");
    if (!p.eat(',')) {
      p.expect('}');
      break;
    }
  }
  if (!descr || !fortran || !shape) fail(what, "npy header lacks descr, fortran_order or shape");
  return {*descr, *fortran, *shape};
}

ElemType npy_type(const std::string& d, const std::string& what) {
  if (d == "<f8") return ElemType::f64;
  if (d == "<f4") return ElemType::f32;
  if (d == "<f2") return ElemType::f16;
  if (d == "<i8") return ElemType::i64;
  if (d == "<i4") return ElemType::i32;
  if (!d.empty() && d[0] == '>')
    fail(what,
         "big-endian npy data ('" + d + "') is not supported; save with dtype.newbyteorder('<')");
  fail(what, "unsupported npy dtype '" + d +
                 "' (f64/f32/f16 values, int64/int32 positions; bf16 via safetensors)");
}

}  // namespace

namespace {

// The tensor a validated preamble and header dict describe, its data the rest of an input of n
// bytes (no data read).
Tensor npy_describe(const NpyPreamble& pre, const std::string& dict, std::uint64_t n,
                    const std::string& what) {
  const NpyHeader h = npy_header(dict, what);
  Tensor t;
  t.name = what;
  t.type_name = h.descr;
  t.shape = h.shape;
  t.type = npy_type(h.descr, what);
  const auto numel = checked_numel(t.shape);
  if (!numel) fail(what, "npy shape " + shape_str(t.shape) + " is negative or overflows");
  if (h.fortran && t.shape.size() > 1)
    fail(what, "Fortran-ordered npy arrays are not supported; save np.ascontiguousarray(a)");
  const std::uint64_t eb = static_cast<std::uint64_t>(elem_bytes(t.type));
  const std::uint64_t have = n - pre.hstart - pre.hlen;
  if (static_cast<std::uint64_t>(*numel) > have / eb ||
      static_cast<std::uint64_t>(*numel) * eb != have)
    fail(what, "npy data is " + std::to_string(have) + " bytes, shape " + shape_str(t.shape) +
                   " x " + std::to_string(eb) + " bytes needs " +
                   std::to_string(static_cast<std::uint64_t>(*numel) * eb));
  return t;
}

}  // namespace

Tensor parse_npy(const unsigned char* data, std::size_t n, const std::string& what,
                 const Limits& limits) {
  check_size(n, what, limits);
  const NpyPreamble pre = npy_preamble(data, n, what);
  Tensor t = npy_describe(
      pre, std::string(reinterpret_cast<const char*>(data + pre.hstart), pre.hlen), n, what);
  t.data.assign(data + pre.hstart + pre.hlen, data + n);
  return t;
}

Tensor read_npy(const std::string& path, const Limits& limits) {
  const auto buf = read_file(path, limits);
  return parse_npy(buf.data(), buf.size(), path, limits);
}

void write_npy(const std::string& path, const Tensor& t) {
  const char* descr = nullptr;
  switch (t.type) {
    case ElemType::f64:
      descr = "<f8";
      break;
    case ElemType::f32:
      descr = "<f4";
      break;
    case ElemType::f16:
      descr = "<f2";
      break;
    case ElemType::i64:
      descr = "<i8";
      break;
    case ElemType::i32:
      descr = "<i4";
      break;
    default:
      throw FormatError(path + ": npy cannot hold " + std::string(name(t.type)));
  }
  // Python tuple syntax: () , (3,) , (2, 3)
  std::string shape = "(";
  for (std::size_t i = 0; i < t.shape.size(); ++i)
    shape += (i ? ", " : "") + std::to_string(t.shape[i]);
  shape += t.shape.size() == 1 ? ",)" : ")";
  std::string dict =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  std::string head = "\x93NUMPY";
  head += '\x01';
  head += '\x00';
  std::size_t total = head.size() + 2 + dict.size() + 1;
  while (total % 64) {
    dict += ' ';
    ++total;
  }
  dict += '\n';
  head += static_cast<char>(dict.size() & 0xFF);
  head += static_cast<char>((dict.size() >> 8) & 0xFF);
  write_file(path, head + dict, {&t});
}

// ---- streaming ----------------------------------------------------------------------------------
// Why pread and not mmap: a mapping turns a file that shrinks while we read it (another process
// truncating or rewriting the dump) into SIGBUS at the first access past the new end, which a
// multi-threaded reader survives only with a signal handler and longjmp. pread turns the same
// event into a short read, reported as a FormatError (exit 2). The copy is noise next to the
// oracle (a 256-byte vector copies in nanoseconds, its check takes microseconds), and memory stays
// bounded by construction: we hold what a caller asked for, nothing to madvise away. The page
// cache keeps what was read, but it is reclaimable and not counted in our RSS.
// A file rewritten in place with the same size is read as it is now: the header was validated
// once, at open; the values are whatever the file holds when they are read.
class InputFile {
 public:
  explicit InputFile(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw FormatError(path + ": cannot open file: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd_);
      throw FormatError(path + ": not a regular file (cannot determine its size)");
    }
    size_ = static_cast<std::uint64_t>(st.st_size);
    ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);  // a hint: doubles the read-ahead
  }
  // Memory-backed: tensors handed over in memory (the Python module's NumPy / torch buffers) are
  // read through the same TensorRef as file tensors, so `check` has one scan for both.
  InputFile(const unsigned char* data, std::uint64_t n, std::shared_ptr<const void> keep,
            const std::string& what)
      : path_(what), size_(n), mem_(data), keep_(std::move(keep)) {}
  ~InputFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  std::uint64_t size() const { return size_; }  // at open

  // Exactly n bytes at off (thread-safe: pread has no file position).
  void read(std::uint64_t off, std::uint64_t n, unsigned char* out) const {
    if (mem_) {
      if (off > size_ || n > size_ - off)
        throw FormatError(path_ + ": bytes [" + std::to_string(off) + ", +" + std::to_string(n) +
                          ") outside the " + std::to_string(size_) + "-byte buffer");
      std::memcpy(out, mem_ + off, static_cast<std::size_t>(n));
      return;
    }
    while (n > 0) {
      const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(n, 1u << 30));
      const ssize_t r = ::pread(fd_, out, want, static_cast<off_t>(off));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0)
        throw FormatError(path_ + ": read error at byte " + std::to_string(off) + ": " +
                          std::strerror(errno));
      if (r == 0)
        throw FormatError(path_ + ": file ends at byte " + std::to_string(off) + ", " +
                          std::to_string(n) + " bytes short: it was truncated while being read (" +
                          std::to_string(size_) + " bytes when opened)");
      out += r;
      off += static_cast<std::uint64_t>(r);
      n -= static_cast<std::uint64_t>(r);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  const unsigned char* mem_ = nullptr;  // memory-backed when set
  std::shared_ptr<const void> keep_;    // holds mem_ alive
};

namespace {

// open_* hold the header in memory, nothing else of the file.
void check_header_size(std::uint64_t hlen, const std::string& what, const Limits& limits) {
  if (hlen > limits.max_bytes)
    fail(what, "header is " + std::to_string(hlen) + " bytes, larger than the memory limit of " +
                   std::to_string(limits.max_bytes) + " bytes (raise it with --max-bytes)");
}

TensorRef ref_of(const Tensor& t, std::uint64_t offset, std::shared_ptr<const InputFile> file) {
  TensorRef r;
  r.name = t.name;
  r.type = t.type;
  r.type_name = t.type_name;
  r.shape = t.shape;
  r.offset = offset;
  r.file = std::move(file);
  return r;
}

}  // namespace

std::int64_t TensorRef::numel() const { return checked_numel(shape).value_or(0); }

void TensorRef::read(std::int64_t first, std::int64_t count, unsigned char* out) const {
  const std::int64_t n = numel();
  const int eb = elem_bytes(type);
  if (eb == 0 || first < 0 || count < 0 || first > n || count > n - first)
    throw FormatError(name + ": cannot read elements [" + std::to_string(first) + ", " +
                      std::to_string(first) + " + " + std::to_string(count) + ") of " +
                      std::to_string(n) + " (" + type_name + ")");
  file->read(offset + static_cast<std::uint64_t>(first) * eb,
             static_cast<std::uint64_t>(count) * eb, out);
}

const TensorRef* TensorFileRef::find(const std::string& n) const {
  for (const auto& t : tensors)
    if (t.name == n) return &t;
  return nullptr;
}

TensorFileRef open_safetensors(const std::string& path, const Limits& limits) {
  auto file = std::make_shared<const InputFile>(path);
  const std::uint64_t n = file->size();
  unsigned char first[8] = {};
  file->read(0, std::min<std::uint64_t>(8, n), first);
  const std::uint64_t hlen = safetensors_header_length(first, n, path);
  check_header_size(hlen, path, limits);
  std::vector<unsigned char> head(hlen);
  file->read(8, hlen, head.data());
  Layout l =
      safetensors_layout(safetensors_header_json(head.data(), hlen, path), n - 8 - hlen, path);
  TensorFileRef out;
  out.metadata = std::move(l.metadata);
  for (std::size_t i = 0; i < l.tensors.size(); ++i)
    out.tensors.push_back(ref_of(l.tensors[i], 8 + hlen + l.spans[i].b, file));
  return out;
}

TensorRef open_npy(const std::string& path, const Limits& limits) {
  auto file = std::make_shared<const InputFile>(path);
  const std::uint64_t n = file->size();
  unsigned char first[12] = {};
  file->read(0, std::min<std::uint64_t>(12, n), first);
  const NpyPreamble pre = npy_preamble(first, n, path);
  check_header_size(pre.hstart + pre.hlen, path, limits);
  std::string dict(pre.hlen, '\0');
  file->read(pre.hstart, pre.hlen, reinterpret_cast<unsigned char*>(dict.data()));
  return ref_of(npy_describe(pre, dict, n, path), pre.hstart + pre.hlen, file);
}

TensorRef memory_tensor(const std::string& nm, ElemType type, std::vector<std::int64_t> shape,
                        const void* data, std::shared_ptr<const void> keep) {
  const auto n = checked_numel(shape);
  if (!n || elem_bytes(type) == 0)
    fail(nm, "invalid shape or element type for an in-memory tensor");
  const auto bytes = static_cast<std::uint64_t>(*n) * static_cast<std::uint64_t>(elem_bytes(type));
  Tensor t;
  t.name = nm;
  t.type = type;
  t.type_name = name(type);
  t.shape = std::move(shape);
  return ref_of(t, 0,
                std::make_shared<const InputFile>(static_cast<const unsigned char*>(data), bytes,
                                                  std::move(keep), nm));
}

Tensor make_tensor(const std::string& nm, ElemType type, std::vector<std::int64_t> shape,
                   const std::vector<double>& values) {
  Tensor t;
  t.name = nm;
  t.type = type;
  t.shape = std::move(shape);
  const int eb = elem_bytes(type);
  t.data.resize(values.size() * eb);
  for (std::size_t i = 0; i < values.size(); ++i) {
    unsigned char* p = t.data.data() + i * eb;
    switch (type) {
      case ElemType::f64:
        std::memcpy(p, &values[i], 8);
        break;
      case ElemType::f32: {
        const float f = static_cast<float>(values[i]);
        std::memcpy(p, &f, 4);
        break;
      }
      case ElemType::f16: {
        const auto b = static_cast<std::uint16_t>(bits_of(values[i], Dtype::f16));
        std::memcpy(p, &b, 2);
        break;
      }
      case ElemType::bf16: {
        const auto b = static_cast<std::uint16_t>(bits_of(values[i], Dtype::bf16));
        std::memcpy(p, &b, 2);
        break;
      }
      default:
        throw FormatError("make_tensor: not a float type");
    }
  }
  return t;
}

Tensor make_int_tensor(const std::string& nm, ElemType type, std::vector<std::int64_t> shape,
                       const std::vector<std::int64_t>& values) {
  Tensor t;
  t.name = nm;
  t.type = type;
  t.shape = std::move(shape);
  const int eb = elem_bytes(type);
  t.data.resize(values.size() * eb);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (type == ElemType::i64)
      std::memcpy(t.data.data() + i * 8, &values[i], 8);
    else if (type == ElemType::i32) {
      const auto v = static_cast<std::int32_t>(values[i]);
      std::memcpy(t.data.data() + i * 4, &v, 4);
    } else
      throw FormatError("make_int_tensor: not an integer type");
  }
  return t;
}

}  // namespace ropecheck::tensorio
