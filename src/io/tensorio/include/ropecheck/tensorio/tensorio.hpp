// Reading and writing recorded tensors: safetensors and NumPy .npy (little-endian).
//
// Two ways in, one validation:
//   parse_* / read_*   the whole input in memory (parse_* on bytes, so it can be fuzzed; read_*
//                      adds the file, refused beyond Limits::max_bytes before anything is read)
//   open_*             streaming: only the header is read and validated against the file size;
//                      a TensorRef then reads element ranges on demand (`check` on dumps of any
//                      size in bounded memory). Limits::max_bytes guards the header only.
// Both run the same header checks (tensorio.cpp), so every malformed input ends in the same
// FormatError whose message names the file and the location (byte offset, tensor name, header
// field); nothing is trusted: lengths, offsets and shapes are checked for overflow and against
// the actual byte count before any allocation or access.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
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
// <f2 <i8 <i4). u8: one raw byte, safetensors U8, F8_E4M3 and F8_E5M2 (an FP8 cache's bytes;
// what they mean comes from the declared format, ropecheck/fp8.hpp; type_name keeps the label),
// decoded as the unsigned byte. Other valid safetensors dtypes are parsed (sizes checked) but
// kept as `other`.
enum class ElemType : int { f64, f32, f16, bf16, i64, i32, other, u8 };
const char* name(ElemType t);
int elem_bytes(ElemType t);  // 0 for other (see Tensor::other_bytes)

struct Limits {
  // What a reader may hold in memory: read_* / parse_* refuse a larger input (file), open_* a
  // larger header (safetensors JSON, npy dict), with a FormatError instead of an out-of-memory.
  // Default 4 GiB.
  std::uint64_t max_bytes = std::uint64_t{4} << 30;
};

// An element of type t at p (little-endian) as double (float types: exact) / as int64 (integer
// types); 0 for other types.
double decode(ElemType t, const unsigned char* p);
std::int64_t decode_int(ElemType t, const unsigned char* p);

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

// ---- streaming -------------------------------------------------------------------------------
class InputFile;  // an open file read with pread (tensorio.cpp says why not mmap)

// A tensor whose bytes stay in its file. Copies share the file; read() may be called from several
// threads at once.
struct TensorRef {
  std::string name;
  ElemType type = ElemType::f32;
  std::string type_name;
  std::vector<std::int64_t> shape;
  std::uint64_t offset = 0;  // file offset of element 0
  std::shared_ptr<const InputFile> file;

  std::int64_t numel() const;
  // Elements [first, first + count) into out (count * elem_bytes(type) bytes). Throws
  // FormatError for a range outside the tensor, and when the file no longer holds the bytes (it
  // shrank after it was opened).
  void read(std::int64_t first, std::int64_t count, unsigned char* out) const;
};

struct TensorFileRef {
  std::map<std::string, std::string> metadata;
  std::vector<TensorRef> tensors;  // file order
  const TensorRef* find(const std::string& name) const;
};

TensorFileRef open_safetensors(const std::string& path, const Limits& limits = {});
TensorRef open_npy(const std::string& path, const Limits& limits = {});

// A tensor whose bytes are in memory (C order, little-endian): read() copies from `data`, which
// `keep` must hold alive for as long as any copy of the ref exists (it may be null when the
// caller guarantees that itself). The Python module checks NumPy / torch tensors through it.
TensorRef memory_tensor(const std::string& name, ElemType type, std::vector<std::int64_t> shape,
                        const void* data, std::shared_ptr<const void> keep = nullptr);

// Builds a tensor of `type` from doubles (values must be representable: the caller rounds) or
// int64s.
Tensor make_tensor(const std::string& name, ElemType type, std::vector<std::int64_t> shape,
                   const std::vector<double>& values);
Tensor make_int_tensor(const std::string& name, ElemType type, std::vector<std::int64_t> shape,
                       const std::vector<std::int64_t>& values);

}  // namespace ropecheck::tensorio
