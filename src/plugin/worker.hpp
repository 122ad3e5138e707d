// The plugin worker: the child process that dlopens the plugin and runs it on guarded buffers.
#pragma once

#include "ropecheck/plugin.h"

#include <cstdint>
#include <string>
#include <vector>

#include "ipc.hpp"

namespace ropecheck::plugin {

// A spec on the wire: the struct (its pointers are meaningless in the other process), then
// sections[n_sections] (int64), short_factor, long_factor and freq_factors (double). get_spec
// copies the arrays out and points the struct at the copies; false on a malformed request.
struct WireSpec {
  ropecheck_spec c{};
  std::vector<std::int64_t> sections;
  std::vector<double> short_factor, long_factor, freq_factors;
};
void put_spec(ipc::Writer& w, const ropecheck_spec& s);
bool get_spec(ipc::Reader& r, WireSpec& s);

// Request of Msg::apply: this header, the spec (put_spec), then positions[n_tokens * n_axes]
// (int64, or double when has_real_positions), then, if has_inv_freq,
// inv_freq_f64[n_pairs] and inv_freq_f32[n_pairs], then the input extent
// (extent_elems * element bytes, starting at element offset min_off relative to the view origin).
struct ApplyHeader {
  std::int32_t dtype;
  std::int32_t inplace;
  std::int32_t has_inv_freq;
  std::int32_t has_real_positions;
  std::int64_t n_axes;
  std::int64_t n_tokens, n_heads, token_stride, head_stride;
  std::int64_t min_off;       // element offset of the extent start (<= 0)
  std::int64_t extent_elems;  // elements from min_off to the last element of the view
  std::int64_t n_pairs;
};

// Reply of Msg::apply: followed by detail_len bytes of text, then extent_elems * element bytes of
// the result extent (the output buffer, or the in-place buffer).
struct ApplyReply {
  std::int32_t status;      // what apply() returned
  std::int32_t fault_kind;  // FaultKind (guards); none if clean
  std::uint64_t detail_len;
  std::uint64_t result_bytes;
};
static_assert(sizeof(ApplyReply) == 24, "the wire layout of Msg::apply's reply");
// The worker cuts a guard's or kernel's message to this many bytes; the host accepts no more.
inline constexpr std::uint64_t kMaxDetail = 4096;
// The largest descriptor (Msg::hello) send_hello can write: name 256, description 4096 and
// 100000 head dims (load_plugin's limit) besides the fixed fields.
inline constexpr std::uint64_t kMaxHello = (1u << 20);

// Sentinel bit patterns pre-filled into out-of-place outputs: signalling NaNs with a payload no
// arithmetic produces (arithmetic quiets NaNs), so an element still holding one was not written.
std::uint64_t sentinel_bits(int dtype);

// Never returns: loads `path`, answers requests on rfd/wfd until quit or EOF, then _exit(0).
// First it keeps only the descriptors it needs (stdin, rfd, wfd; stdout and stderr onto logfd, the
// pipe the host drains), so a plugin can write on no pipe of the host but its own reply pipe, and
// leads a process group of its own (the host kills the group: children the plugin forks die
// with it). memory_limit (bytes, 0: none) caps its address space beyond what it had at the fork.
[[noreturn]] void worker_main(int rfd, int wfd, int logfd, const std::string& path,
                              std::uint64_t memory_limit);

}  // namespace ropecheck::plugin
