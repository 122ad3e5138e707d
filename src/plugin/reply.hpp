// The host's decoders of the worker's replies (the bytes a plugin's process sends are untrusted:
// every field is checked before it is used to allocate, index or compare). recv_reply (ipc.hpp)
// has checked the header (type, id, length against what the request can produce); these check
// the payload. The libFuzzer target src/fuzz/fuzz_worker_reply.cpp runs them on arbitrary bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ipc.hpp"
#include "ropecheck/plugin/host.hpp"

namespace ropecheck::plugin {

// What the header of each reply may be.
ipc::Expect expect_hello();
ipc::Expect expect_supports(std::uint32_t id);
ipc::Expect expect_apply(std::uint32_t id, std::uint64_t result_bytes);

// Msg::hello: the descriptor. Throws LoadError for a malformed or unusable one (the load fails).
Descriptor read_descriptor(const std::vector<char>& payload, const std::string& path);

// Msg::supports: true/false; nullopt when the payload is not one int32 0 or 1.
std::optional<bool> read_supports_reply(const std::vector<char>& payload);

// Msg::apply: a fault the worker's guards saw, else the plugin's status and, when ok, the result
// extent inside the payload. `violation` is non-empty when the payload is not a reply to a
// request whose result extent has result_bytes bytes (then nothing else is set).
struct ApplyOutcome {
  std::string violation;
  std::optional<Fault> fault;
  KernelStatus status = KernelStatus::error;
  const char* result = nullptr;
};
ApplyOutcome read_apply_reply(const std::vector<char>& payload, std::uint64_t result_bytes);

}  // namespace ropecheck::plugin
