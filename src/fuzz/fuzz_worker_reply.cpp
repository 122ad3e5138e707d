// libFuzzer target: the host's reading of a plugin worker's messages (src/plugin/reply.hpp), the
// channel a hostile plugin can write anything on. Input: [kind u8][result_bytes u32][stream]; the
// stream is put in a pipe exactly as the worker's bytes would arrive, and read by
// ipc::recv_reply against the expectation of the kind (0: the greeting, 1: a supports() answer,
// 2: an apply() reply whose output has result_bytes bytes), then decoded. Contract: never crash,
// never allocate beyond what the expectation allows, and a reply accepted is consistent (its
// result lies inside the payload, its fault kind is a guard's). Seeds: real replies recorded from
// workers (corpus/worker_reply, make_worker_reply_seeds.py).
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fuzz_check.hpp"
#include "ipc.hpp"
#include "reply.hpp"

namespace plugin = ropecheck::plugin;
namespace ipc = ropecheck::plugin::ipc;

namespace {

void read_as(std::uint8_t kind, std::uint32_t result_bytes, int fd) {
  const double deadline = ipc::now_s() + 1.0;  // the pipe holds all of it, then EOF
  const ipc::Expect e = kind == 0   ? plugin::expect_hello()
                        : kind == 1 ? plugin::expect_supports(1)
                                    : plugin::expect_apply(1, result_bytes);
  const ipc::Reply r = ipc::recv_reply(fd, e, deadline);
  if (r.io == ipc::IoResult::violation) FUZZ_REQUIRE(!ipc::not_a_reply(r).empty());
  if (r.io != ipc::IoResult::ok) return;
  FUZZ_REQUIRE(r.payload.size() >= e.min_len && r.payload.size() <= e.max_len);
  if (kind == 0) {
    try {
      const plugin::Descriptor d = plugin::read_descriptor(r.payload, "fuzz");
      FUZZ_REQUIRE(d.min_position <= d.max_position && d.head_dims.size() <= 100000);
    } catch (const plugin::LoadError&) {
    }
  } else if (kind == 1) {
    (void)plugin::read_supports_reply(r.payload);
  } else {
    const plugin::ApplyOutcome out = plugin::read_apply_reply(r.payload, result_bytes);
    if (!out.violation.empty() || out.fault) return;
    if (out.status == ropecheck::KernelStatus::ok) {
      FUZZ_REQUIRE(out.result != nullptr);
      FUZZ_REQUIRE(out.result >= r.payload.data() &&
                   out.result + result_bytes == r.payload.data() + r.payload.size());
      volatile unsigned char sink = 0;
      for (std::uint32_t i = 0; i < result_bytes; ++i) sink = sink ^ out.result[i];
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 5 || size - 5 > 60000) return 0;  // the stream must fit in the pipe's buffer
  const std::uint8_t kind = data[0] % 3;
  std::uint32_t result_bytes = 0;
  std::memcpy(&result_bytes, data + 1, 4);
  result_bytes %= 1u << 16;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return 0;
  const std::size_t n = size - 5;
  FUZZ_REQUIRE(n == 0 || write(p[1], data + 5, n) == static_cast<ssize_t>(n));
  close(p[1]);
  read_as(kind, result_bytes, p[0]);
  close(p[0]);
  return 0;
}
