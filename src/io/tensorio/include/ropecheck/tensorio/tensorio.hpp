// Reading and writing recorded tensors: safetensors and NumPy .npy (little-endian).
//
// Every reader works on an in-memory byte range (parse_*) so it can be fuzzed; the file variants
// only add a size check against the memory limit before reading. Every malformed input ends in a
// FormatError whose message names the file and the location (byte offset, tensor name, header
// field); nothing is trusted: lengths, offsets and shapes are checked for overflow and against
// the actual byte count before any allocation or access.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ropecheck::tensorio {

class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Element types we read for checking (safetensors names F64 F32 F16 BF16 I64 I32; npy <f8 <f4
// <f2 <i8 <i4). Other valid safetensors dtypes are parsed (sizes checked) but kept as `other`.
enum class ElemType : int { f64, f32, f16, bf16, i64, i32, other };
const char* name(ElemType t);
int elem_bytes(ElemType t);  // 0 for other (see Tensor::other_bytes)

struct Limits {
  // Largest file (and so largest tensor) a reader accepts; bigger inputs are refused with a
  // FormatError instead of an out-of-memory. Default 4 GiB.
  std::uint64_t max_bytes = std::uint64_t{4} << 30;
};

struct Tensor {
  std::string name;
  ElemType type = ElemType::f32;
  std::string type_name;  // as written in the file ("F32", "<f4", "U8", ...)
  std::vector<std::int64_t> shape;
  std::vector<unsigned char> data;  // little-endian, C order

  std::int64_t numel() const;
  bool is_float() const;
  // Element i as double (float types: exact) / as int64 (integer types).
  double get(std::int64_t i) const;
  std::int64_t get_int(std::int64_t i) const;
};

struct TensorFile {
  std::map<std::string, std::string> metadata;  // safetensors __metadata__ (string -> string)
  std::vector<Tensor> tensors;                  // file order
  const Tensor* find(const std::string& name) const;
};

// `what` names the input in error messages (usually the path).
TensorFile parse_safetensors(const unsigned char* data, std::size_t n, const std::string& what,
                             const Limits& limits = {});
TensorFile read_safetensors(const std::string& path, const Limits& limits = {});
void write_safetensors(const std::string& path, const TensorFile& f);

Tensor parse_npy(const unsigned char* data, std::size_t n, const std::string& what,
                 const Limits& limits = {});
Tensor read_npy(const std::string& path, const Limits& limits = {});
void write_npy(const std::string& path, const Tensor& t);  // v1.0 header, C order

// Builds a tensor of `type` from doubles (values must be representable: the caller rounds) or
// int64s.
Tensor make_tensor(const std::string& name, ElemType type, std::vector<std::int64_t> shape,
                   const std::vector<double>& values);
Tensor make_int_tensor(const std::string& name, ElemType type, std::vector<std::int64_t> shape,
                       const std::vector<std::int64_t>& values);

}  // namespace ropecheck::tensorio
