// Host side of the plugin ABI: a third-party kernel (a shared object implementing
// ropecheck/plugin.h) as a run-time `Kernel`, so every property and report written against
// `const Kernel&` checks it unchanged.
//
// Isolation: the plugin is dlopen'ed in a forked worker process, never in the oracle. Every
// supports()/apply() is a request over a pipe; the worker runs the plugin on guarded copies of the
// buffers and sends the result back. A crash, abort, exit() or hang (per-call timeout) kills only
// the worker; it is recorded as a Fault, the kernel is "poisoned" (further calls fail fast without
// touching the plugin: supports() is false, apply() returns error) until reset(), and a fresh
// worker is forked on the next call after reset().
#pragma once

#include "ropecheck/kernel.hpp"
#include "ropecheck/plugin.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace ropecheck::plugin {

namespace ipc {
struct Reply;
}

// The RopeSpec a plugin call carries (the inverse of what the host sends; not normalized, kinds
// and layouts not range-checked: callers serving the host's own calls, or checking first).
RopeSpec spec_from_c(const ropecheck_spec& c);

// The plugin cannot be used at all: missing file, not a shared object, no entry point, wrong ABI
// version, malformed descriptor, crash while loading. The CLI maps it to exit status 2.
class LoadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What isolation and guards observed during one call. Named as the validation report prints them.
enum class FaultKind : int {
  none = 0,
  crashed,               // killed by a signal (segfault, abort, ...)
  exited,                // called exit()/_exit() inside apply/supports
  timeout,               // no answer within the per-call timeout (hang)
  out_of_bounds_write,   // canary around the output/input or a gap inside a strided view changed
  unwritten_output,      // an output element still holds the sentinel after an out-of-place call
  input_modified,        // the input of an out-of-place call (or the positions) changed
  bad_reply,             // the worker's answer was malformed (should not happen)
  kernel_error,          // an in-process kernel (serve()) reported why apply failed, e.g. a Python
                         // exception or a result of the wrong shape or dtype
  protocol_violation,    // the worker's process sent bytes that are not the reply asked for (the
                         // plugin wrote on the worker's pipe), or the host could not read it
  out_of_memory,         // the worker passed its memory limit (Options::memory_limit)
  declaration_mismatch,  // apply() returned UNSUPPORTED for a call inside the declared domain
                         // (detail: the call's offending value and the field to declare)
};
const char* name(FaultKind k);

struct Fault {
  FaultKind kind = FaultKind::none;
  int signal = 0;       // crashed
  int exit_status = 0;  // exited
  std::string detail;   // e.g. "output element (token 1, head 0, j 63) unwritten"
  std::string config;   // the call: dtype, spec, shape, strides, in-place, first positions
  // "crashed (signal 11, SIGSEGV) in config dtype=f32 head_dim=64 ..."
  std::string message() const;
};

struct Options {
  double timeout_s = 10.0;  // per supports()/apply() call
  // Largest request (input + output + positions) the oracle will ship to the worker; a bigger
  // call fails with KernelStatus::error instead of exhausting memory.
  std::uint64_t max_bytes = std::uint64_t{1} << 30;
  // Memory the worker may add beyond its size at the fork (0: no limit): past it in resident
  // memory the host kills it (out_of_memory); its address space is capped a quarter above it
  // (RLIMIT_AS, except under AddressSanitizer), so a plugin that allocates until it is stopped
  // cannot take the machine's memory.
  std::uint64_t memory_limit = std::uint64_t{8} << 30;
};

// theta'_i tables (the scaled ladder, pair order) handed to plugins that take a precomputed
// table. The CLI installs a provider backed by the multiprecision reference (correctly rounded);
// the default evaluates the unscaled ladder base^(-2j/dim) in x87 long double (64-bit significand)
// and rounds to double, correct except in near-tie cases; for scaled specs it falls back to the
// spec's f64 formulas (theta_ladder_f64: a few roundings, not correctly rounded).
struct InvFreqTables {
  std::vector<double> f64;
  std::vector<float> f32;
};
using InvFreqProvider = std::function<InvFreqTables(const RopeSpec&)>;
InvFreqTables default_inv_freq(const RopeSpec& spec);

// Descriptor data copied out of the worker at load time.
struct Descriptor {
  std::uint32_t abi_version = 0;
  std::string name;
  std::string description;
  std::uint32_t dtypes = 0;             // ROPECHECK_DTYPE_BIT mask
  std::uint32_t layouts = 0;            // ROPECHECK_LAYOUT_BIT mask
  std::vector<std::int64_t> head_dims;  // empty = any
  Policy policies[ROPECHECK_DTYPE_COUNT];
  bool has_supports = false;
  std::uint32_t scalings = 0;  // ROPECHECK_SCALING_BIT mask (NONE implied)
  std::uint32_t flags = 0;     // ROPECHECK_FLAG_* (for ABI 2: MAGNITUDE_SCALE added, see plugin.h)
  std::int64_t min_position = 0, max_position = 0;  // both 0: any int64 position
  bool has_backward = false;  // apply_backward set (ABI 3; an ABI 2 descriptor has none)
};

class PluginKernel final : public Kernel {
 public:
  // Forks the worker, loads the plugin there and reads its descriptor. Throws LoadError.
  static std::unique_ptr<PluginKernel> load(const std::string& path, const Options& opts = {});
  // Uses a worker that is already running (serve() in another process, e.g. the Python module)
  // on the pipe ends rfd (its replies) and wfd (our requests); reads its descriptor. `label`
  // stands for the path in messages. Takes ownership of the descriptors. Nothing is forked, so
  // a worker that dies is not restarted: later calls fail. Throws LoadError.
  static std::unique_ptr<PluginKernel> attach(int rfd, int wfd, const std::string& label,
                                              const Options& opts = {});
  ~PluginKernel() override;
  PluginKernel(const PluginKernel&) = delete;
  PluginKernel& operator=(const PluginKernel&) = delete;

  std::string name() const override;
  std::string description() const override;
  Policy policy(Dtype d) const override;
  bool supports(const RopeSpec& spec, Dtype d) const override;
  // The descriptor's head_dims, position range and flags (ABI 3; ABI 2 with its defaults).
  Domain domain() const override;
  // Returns error (never throws, never crashes the caller) when the plugin faults; the fault is
  // recorded and the kernel stays poisoned until reset().
  KernelStatus apply(const RopeSpec& spec, const TensorArgs& args) const override;
  // The descriptor's apply_backward, through the worker as apply() (same guards and faults).
  bool has_backward() const override { return desc_.has_backward; }
  KernelStatus apply_backward(const RopeSpec& spec, const TensorArgs& args) const override;

  const Descriptor& descriptor() const { return desc_; }
  const std::string& path() const { return path_; }
  void set_inv_freq_provider(InvFreqProvider p) { inv_freq_ = std::move(p); }

  // Faults since construction or the last reset(), oldest first.
  const std::vector<Fault>& faults() const { return faults_; }
  bool poisoned() const { return !faults_.empty(); }
  // Forget faults; the next call forks a fresh worker if the old one died.
  void reset();
  std::uint64_t calls() const { return calls_; }

  struct Worker;  // the worker process and its pipes (plugin_kernel.cpp)

 private:
  PluginKernel() = default;
  // An exception thrown while the host talks to the worker: the worker is ended and the call
  // records a protocol_violation (never an internal error of ropecheck).
  void host_error(const std::exception& e, const std::string& what) const;
  bool ensure_worker() const;
  Descriptor read_greeting(const std::string& label) const;
  // The call on the worker (apply() past the host's own checks).
  KernelStatus run_call(const RopeSpec& spec, const TensorArgs& a, bool backward = false) const;
  KernelStatus call(const RopeSpec& spec, const TensorArgs& a, bool backward) const;
  // One line: the call's value the plugin refused and the descriptor field that would exclude it
  // (mismatch.cpp).
  std::string mismatch_hint(const RopeSpec& spec, const TensorArgs& a) const;
  Fault call_fault(const ipc::Reply& r, const std::string& what) const;
  void record(Fault f) const;
  void kill_worker() const;

  std::string path_;
  bool attached_ = false;  // serve()d by another process: nothing to fork or kill
  Options opts_;
  Descriptor desc_;
  InvFreqProvider inv_freq_;
  mutable std::unique_ptr<Worker> worker_;
  mutable std::vector<Fault> faults_;
  mutable std::uint64_t calls_ = 0;
  // supports() answers of the running worker, keyed by the request bytes (spec and dtype): the
  // properties ask the same probe specs in every check, one IPC round trip each otherwise.
  // Forgotten with the worker (kill_worker) and when it grows past a bound.
  mutable std::unordered_map<std::string, bool> supported_;
};

// The worker side of the pipe protocol, for a kernel that lives in an existing process (the
// Python module serves a Python callable through it): sends `desc` (hello), then answers
// supports/apply requests on rfd/wfd, each apply on guarded buffers with the same guards as a
// plugin worker, until quit or EOF. When apply returns an error, `take_error` (if set) gives the
// reason, reported as FaultKind::kernel_error with the call. Returns normally at quit/EOF; throws
// std::runtime_error when the pipe breaks or a request is malformed. Never exits the process.
void serve(int rfd, int wfd, const ropecheck_plugin& desc,
           const std::function<std::string()>& take_error = {});

// One line describing a call, used in fault messages and counterexamples.
std::string describe_call(const RopeSpec& spec, const TensorArgs& args);

}  // namespace ropecheck::plugin
