// The plugin host (module map for src/plugin):
//   include/ropecheck/plugin/host.hpp  PluginKernel: a third-party plugin as a run-time Kernel
//   abi/ropecheck/plugin.h             the C99 ABI plugins compile against (installed as is)
//   plugin_kernel.cpp (here)           oracle side: load and read the descriptor, supports(),
//                                      apply() = check the call against the declared contract,
//                                      marshal it, run it in the worker, classify the reply
//   worker.{hpp,cpp}                   the forked child: dlopen, guarded buffers, the guards
//   ipc.{hpp,cpp}                      message framing on the two pipes
// A new layout or scaling kind: its ROPECHECK_* value in plugin.h and, for a new spec field,
// to_c() here and put_spec/get_spec (worker.cpp). A new dtype: plugin.h, element_bytes and
// sentinel_bits (worker.cpp). A new descriptor field: a reserved slot of plugin.h, send_hello
// (worker.cpp) and read_descriptor_fields here.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "ipc.hpp"
#include "ropecheck/plugin/host.hpp"
#include "worker.hpp"

namespace ropecheck::plugin {

const char* name(FaultKind k) {
  switch (k) {
    case FaultKind::none:
      return "none";
    case FaultKind::crashed:
      return "crashed";
    case FaultKind::exited:
      return "exited";
    case FaultKind::timeout:
      return "timeout";
    case FaultKind::out_of_bounds_write:
      return "out_of_bounds_write";
    case FaultKind::unwritten_output:
      return "unwritten_output";
    case FaultKind::input_modified:
      return "input_modified";
    case FaultKind::bad_reply:
      return "bad_reply";
    case FaultKind::kernel_error:
      return "kernel_error";
  }
  return "?";
}

std::string Fault::message() const {
  std::ostringstream o;
  switch (kind) {
    case FaultKind::crashed: {
      const char* abbrev = sigabbrev_np(signal);
      o << "crashed (signal " << signal;
      if (abbrev) o << ", SIG" << abbrev;
      o << ")";
      break;
    }
    case FaultKind::exited:
      o << "exited (status " << exit_status << ")";
      break;
    case FaultKind::timeout:
      o << "timeout";
      break;
    case FaultKind::out_of_bounds_write:
      o << "out-of-bounds write";
      break;
    case FaultKind::unwritten_output:
      o << "unwritten output";
      break;
    case FaultKind::input_modified:
      o << "input modified";
      break;
    case FaultKind::bad_reply:
      o << "bad reply from the plugin worker";
      break;
    case FaultKind::kernel_error:
      o << "kernel error";
      break;
    case FaultKind::none:
      o << "no fault";
      break;
  }
  if (!detail.empty()) o << ": " << detail;
  if (!config.empty()) o << " in config " << config;
  return o.str();
}

InvFreqTables default_inv_freq(const RopeSpec& spec) {
  InvFreqTables t;
  const std::int64_t n = spec.n_pairs();
  if (spec.scaling.kind != ScalingKind::none) {
    for (double v : theta_ladder_f64(spec)) {
      t.f64.push_back(v);
      t.f32.push_back(static_cast<float>(v));
    }
    return t;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const auto [j, dim] = spec.ladder(i);
    const long double e = -2.0L * static_cast<long double>(j) / static_cast<long double>(dim);
    const long double v = std::pow(static_cast<long double>(spec.base), e);
    t.f64.push_back(static_cast<double>(v));
    t.f32.push_back(static_cast<float>(v));  // from long double: one rounding
  }
  return t;
}

namespace {

// The whole spec, every field of every variant (the arrays point into `s`, which outlives the
// request that put_spec serializes them into).
ropecheck_spec to_c(const RopeSpec& s) {
  ropecheck_spec c{};
  c.struct_size = sizeof(ropecheck_spec);
  c.layout = static_cast<std::int32_t>(s.layout);
  c.head_dim = s.head_dim;
  c.rotary_dim = s.rotary_dim;
  c.base = s.base;
  c.scale = s.scale;
  const Scaling& sc = s.scaling;
  ropecheck_scaling& cs = c.scaling;
  cs.kind = static_cast<std::int32_t>(sc.kind);
  cs.truncate = sc.truncate ? 1 : 0;
  cs.factor = sc.factor;
  cs.original_max_position_embeddings = sc.original_max_position_embeddings;
  cs.max_position_embeddings = sc.max_position_embeddings;
  cs.seq_len = sc.seq_len;
  cs.beta_fast = sc.beta_fast;
  cs.beta_slow = sc.beta_slow;
  cs.mscale = sc.mscale;
  cs.mscale_all_dim = sc.mscale_all_dim;
  cs.has_attention_factor = sc.attention_factor.has_value() ? 1 : 0;
  cs.attention_factor = sc.attention_factor.value_or(0.0);
  cs.low_freq_factor = sc.low_freq_factor;
  cs.high_freq_factor = sc.high_freq_factor;
  const auto arr = [](const auto& v) { return v.empty() ? nullptr : v.data(); };
  cs.short_factor = arr(sc.short_factor);
  cs.n_short_factor = static_cast<std::int64_t>(sc.short_factor.size());
  cs.long_factor = arr(sc.long_factor);
  cs.n_long_factor = static_cast<std::int64_t>(sc.long_factor.size());
  cs.freq_factors = arr(sc.freq_factors);
  cs.n_freq_factors = static_cast<std::int64_t>(sc.freq_factors.size());
  c.n_axes = static_cast<std::int32_t>(s.n_axes());
  c.sections = arr(s.sections);
  c.n_sections = static_cast<std::int64_t>(s.sections.size());
  return c;
}

bool valid_precision(std::int32_t p) { return p >= 0 && p < ROPECHECK_DTYPE_COUNT; }

template <class T>
std::vector<T> array_of(const T* p, std::int64_t n) {
  return p && n > 0 ? std::vector<T>(p, p + n) : std::vector<T>();
}

}  // namespace

RopeSpec spec_from_c(const ropecheck_spec& c) {
  RopeSpec s;
  s.head_dim = c.head_dim;
  s.rotary_dim = c.rotary_dim;
  s.base = c.base;
  s.layout = static_cast<Layout>(c.layout);
  s.scale = c.scale;
  const ropecheck_scaling& cs = c.scaling;
  Scaling& sc = s.scaling;
  sc.kind = static_cast<ScalingKind>(cs.kind);
  sc.truncate = cs.truncate != 0;
  sc.factor = cs.factor;
  sc.original_max_position_embeddings = cs.original_max_position_embeddings;
  sc.max_position_embeddings = cs.max_position_embeddings;
  sc.seq_len = cs.seq_len;
  sc.beta_fast = cs.beta_fast;
  sc.beta_slow = cs.beta_slow;
  sc.mscale = cs.mscale;
  sc.mscale_all_dim = cs.mscale_all_dim;
  if (cs.has_attention_factor) sc.attention_factor = cs.attention_factor;
  sc.low_freq_factor = cs.low_freq_factor;
  sc.high_freq_factor = cs.high_freq_factor;
  sc.short_factor = array_of(cs.short_factor, cs.n_short_factor);
  sc.long_factor = array_of(cs.long_factor, cs.n_long_factor);
  sc.freq_factors = array_of(cs.freq_factors, cs.n_freq_factors);
  s.sections = array_of(c.sections, c.n_sections);
  return s;
}

std::string describe_call(const RopeSpec& spec, const TensorArgs& a) {
  std::ostringstream o;
  o << "dtype=" << ropecheck::name(a.dtype) << " " << describe(spec) << " n_tokens=" << a.n_tokens
    << " n_heads=" << a.n_heads << " token_stride=" << a.token_stride
    << " head_stride=" << a.head_stride << (a.in == a.out ? " in-place" : " out-of-place");
  if ((a.positions || a.real_positions) && a.n_tokens > 0) {
    // Multi-axis positions print per token as (t,h,w).
    const std::int64_t na = std::max<std::int64_t>(a.n_axes, 1);
    o << (a.real_positions ? " real_positions=[" : " positions=[");
    const std::int64_t n = std::min<std::int64_t>(a.n_tokens, 6);
    for (std::int64_t i = 0; i < n; ++i) {
      o << (i ? "," : "") << (na > 1 ? "(" : "");
      for (std::int64_t ax = 0; ax < na; ++ax) {
        o << (ax ? "," : "");
        if (a.real_positions)
          o << a.real_positions[i * na + ax];
        else
          o << a.positions[i * na + ax];
      }
      o << (na > 1 ? ")" : "");
    }
    if (a.n_tokens > n) o << ",...";
    o << "]";
  }
  return o.str();
}

// The worker process and the two pipes to it. kill_worker() ends it.
struct PluginKernel::Worker {
  pid_t pid = -1;
  int to_child = -1;
  int from_child = -1;

  // Forks the worker, which loads the plugin (throws LoadError when it cannot fork).
  static std::unique_ptr<Worker> spawn(const std::string& path);
  // The worker's first message: hello (the descriptor) or load_error.
  ipc::IoResult greeting(ipc::Msg& type, std::vector<char>& payload, double timeout_s) const;
  // One request and its reply under the per-call deadline.
  ipc::IoResult round_trip(ipc::Msg type, const std::vector<char>& request, ipc::Msg& reply_type,
                           std::vector<char>& reply, std::uint64_t max_reply,
                           double timeout_s) const;
  // The worker stopped answering (EOF, broken pipe): how it ended. Waits for it; kill_worker()
  // then only closes the pipes.
  Fault reap();
};

namespace {
void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}
}  // namespace

void PluginKernel::kill_worker() const {
  if (!worker_) return;
  if (worker_->pid > 0) {
    kill(worker_->pid, SIGKILL);
    int st = 0;
    waitpid(worker_->pid, &st, 0);
  }
  close_fd(worker_->to_child);
  close_fd(worker_->from_child);
  worker_.reset();
  supported_.clear();  // a new worker answers afresh
}

namespace {

struct Spawned {
  pid_t pid;
  int to_child;
  int from_child;
};

Spawned fork_worker(const std::string& path) {
  int down[2], up[2];
  if (pipe2(down, O_CLOEXEC) != 0 || pipe2(up, O_CLOEXEC) != 0)
    throw LoadError("cannot create pipes for the plugin worker: " + std::string(strerror(errno)));
  std::fflush(nullptr);  // buffered output must not be duplicated into the child
  const pid_t pid = fork();
  if (pid < 0) throw LoadError("cannot fork the plugin worker: " + std::string(strerror(errno)));
  if (pid == 0) {
    // The child never returns into the oracle's code: worker_main ends in _exit.
    close(down[1]);
    close(up[0]);
    worker_main(down[0], up[1], path);
  }
  close(down[0]);
  close(up[1]);
  return {pid, down[1], up[0]};
}

// Turns the worker's death into a Fault (waits for it).
Fault death(pid_t pid) {
  Fault f;
  int st = 0;
  if (waitpid(pid, &st, 0) == pid) {
    if (WIFSIGNALED(st)) {
      f.kind = FaultKind::crashed;
      f.signal = WTERMSIG(st);
    } else if (WIFEXITED(st)) {
      f.kind = FaultKind::exited;
      f.exit_status = WEXITSTATUS(st);
    } else {
      f.kind = FaultKind::bad_reply;
    }
  } else {
    f.kind = FaultKind::bad_reply;
  }
  return f;
}

// ---- the descriptor the worker sends at load time (Msg::hello; worker.cpp send_hello) ---------

[[noreturn]] void refuse(const std::string& m) { throw LoadError(m); }

void check_loadable(const std::string& path, const Options& opts) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) refuse("cannot load plugin '" + path + "': " + strerror(errno));
  if (!S_ISREG(st.st_mode)) refuse("cannot load plugin '" + path + "': not a regular file");
  if (!(opts.timeout_s > 0)) refuse("timeout must be > 0");
}

// The declared policy of dtype i, checked: precisions and recipe in range, trig_error >= 0.
Policy declared_policy(const Descriptor& d, const ropecheck_policy& p, int i) {
  // ABI 2 had no trig_error (reserved bytes, 0) and no ladder recipe.
  const double trig = d.abi_version >= 3 ? p.trig_error : 0.0;
  const std::int32_t max_recipe =
      d.abi_version >= 3 ? ROPECHECK_RECIPE_LADDER_F32 : ROPECHECK_RECIPE_HF_F32;
  const char* dtype = ropecheck::name(static_cast<Dtype>(i));
  if (!valid_precision(p.angle) || !valid_precision(p.table) || !valid_precision(p.arithmetic) ||
      p.recipe < ROPECHECK_RECIPE_POW_PRODUCT || p.recipe > max_recipe)
    refuse("plugin '" + d.name + "' declares an invalid precision policy for dtype " + dtype);
  if (!std::isfinite(trig) || trig < 0)
    refuse("plugin '" + d.name + "' declares trig_error " + std::to_string(trig) + " for dtype " +
           dtype + " (must be finite and >= 0; 0 means the default 2)");
  return Policy{static_cast<Precision>(p.angle),
                static_cast<Precision>(p.table),
                static_cast<Precision>(p.arithmetic),
                static_cast<AngleRecipe>(p.recipe),
                p.fused != 0,
                "third-party plugin (declared policy)",
                trig == 0 ? 2.0 : trig};
}

// Field by field as send_hello writes them; false when the reply is short.
bool read_descriptor_fields(ipc::Reader& rd, Descriptor& d) {
  std::int32_t has_supports = 0, n_hd = 0;
  bool ok = rd.get(d.abi_version) && rd.get_string(d.name) && rd.get_string(d.description) &&
            rd.get(d.dtypes) && rd.get(d.layouts) && rd.get(has_supports) && rd.get(n_hd);
  d.has_supports = has_supports != 0;
  for (std::int32_t i = 0; ok && i < n_hd; ++i) {
    std::int64_t v = 0;
    ok = rd.get(v);
    d.head_dims.push_back(v);
  }
  for (int i = 0; ok && i < ROPECHECK_DTYPE_COUNT; ++i) {
    ropecheck_policy p{};
    ok = rd.get(p);
    if (ok && (d.dtypes & ROPECHECK_DTYPE_BIT(i)) != 0) d.policies[i] = declared_policy(d, p, i);
  }
  return ok && rd.get(d.scalings) && rd.get(d.flags) && rd.get(d.min_position) &&
         rd.get(d.max_position);
}

Descriptor read_descriptor(const std::vector<char>& payload, const std::string& path) {
  ipc::Reader rd(payload);
  Descriptor d;
  if (!read_descriptor_fields(rd, d)) refuse("plugin '" + path + "': malformed descriptor reply");
  if (d.abi_version < 3) {
    // ABI 2 always passed scale != 1 and knew no position range: keep that meaning.
    d.flags |= ROPECHECK_FLAG_MAGNITUDE_SCALE;
    d.min_position = d.max_position = 0;
  }
  if (d.min_position > d.max_position)
    refuse("plugin '" + d.name + "' declares min_position " + std::to_string(d.min_position) +
           " > max_position " + std::to_string(d.max_position));
  if ((d.dtypes & ROPECHECK_DTYPE_BIT_ALL) == 0)
    refuse("plugin '" + d.name + "' declares no supported dtype");
  if ((d.layouts & ROPECHECK_LAYOUT_BIT_ALL) == 0)
    refuse("plugin '" + d.name + "' declares no supported layout");
  return d;
}

}  // namespace

std::unique_ptr<PluginKernel::Worker> PluginKernel::Worker::spawn(const std::string& path) {
  const Spawned s = fork_worker(path);
  return std::make_unique<Worker>(Worker{s.pid, s.to_child, s.from_child});
}

ipc::IoResult PluginKernel::Worker::greeting(ipc::Msg& type, std::vector<char>& payload,
                                             double timeout_s) const {
  return ipc::recv(from_child, type, payload, 1 << 24, ipc::now_s() + timeout_s);
}

ipc::IoResult PluginKernel::Worker::round_trip(ipc::Msg type, const std::vector<char>& request,
                                               ipc::Msg& reply_type, std::vector<char>& reply,
                                               std::uint64_t max_reply, double timeout_s) const {
  const double deadline = ipc::now_s() + timeout_s;
  auto r = ipc::send(to_child, type, request, deadline);
  if (r == ipc::IoResult::ok) r = ipc::recv(from_child, reply_type, reply, max_reply, deadline);
  return r;
}

Fault PluginKernel::Worker::reap() {
  const pid_t p = pid;
  pid = -1;
  if (p <= 0) {  // attached: not our child, waitpid would wait for any child
    Fault f;
    f.kind = FaultKind::bad_reply;
    f.detail = "the serving process closed the pipe";
    return f;
  }
  return death(p);
}

namespace {
Fault timeout_fault(std::string detail) {
  Fault f;
  f.kind = FaultKind::timeout;
  f.detail = std::move(detail);
  return f;
}
}  // namespace

std::unique_ptr<PluginKernel> PluginKernel::load(const std::string& path, const Options& opts) {
  check_loadable(path, opts);
  // Process-wide on purpose: writing to a worker that crashed must not kill the *oracle* by
  // SIGPIPE's default action; the resulting EPIPE is handled as the worker's death.
  signal(SIGPIPE, SIG_IGN);

  std::unique_ptr<PluginKernel> k(new PluginKernel());
  k->path_ = path;
  k->opts_ = opts;
  k->worker_ = Worker::spawn(path);
  ipc::Msg t{};
  std::vector<char> payload;
  const ipc::IoResult r = k->worker_->greeting(t, payload, opts.timeout_s);
  try {
    if (r == ipc::IoResult::timeout)
      refuse("plugin '" + path + "' did not finish loading within " +
             std::to_string(opts.timeout_s) + " s");
    if (r != ipc::IoResult::ok)
      refuse("plugin '" + path + "' " + k->worker_->reap().message() + " while loading");
    if (t == ipc::Msg::load_error) {
      std::string m;
      ipc::Reader(payload).get_string(m);
      refuse(m);
    }
    if (t != ipc::Msg::hello) refuse("plugin '" + path + "': malformed descriptor reply");
    k->desc_ = read_descriptor(payload, path);
  } catch (const LoadError&) {
    k->kill_worker();
    throw;
  }
  k->inv_freq_ = default_inv_freq;
  return k;
}

std::unique_ptr<PluginKernel> PluginKernel::attach(int rfd, int wfd, const std::string& label,
                                                   const Options& opts) {
  signal(SIGPIPE, SIG_IGN);  // as load(): a dead server must be an EPIPE, not our death
  std::unique_ptr<PluginKernel> k(new PluginKernel());
  k->path_ = label;
  k->attached_ = true;
  k->opts_ = opts;
  k->worker_ = std::make_unique<Worker>(Worker{-1, wfd, rfd});
  ipc::Msg t{};
  std::vector<char> payload;
  try {
    const ipc::IoResult r = k->worker_->greeting(t, payload, opts.timeout_s);
    if (r != ipc::IoResult::ok || t != ipc::Msg::hello)
      refuse("worker on descriptors " + std::to_string(rfd) + "," + std::to_string(wfd) +
             " sent no descriptor");
    k->desc_ = read_descriptor(payload, label);
  } catch (const LoadError&) {
    k->kill_worker();
    throw;
  }
  k->inv_freq_ = default_inv_freq;
  return k;
}

PluginKernel::~PluginKernel() {
  if (worker_ && worker_->to_child >= 0) {
    ipc::send(worker_->to_child, ipc::Msg::quit, {}, ipc::now_s() + 1.0);
  }
  kill_worker();
}

Domain PluginKernel::domain() const {
  Domain d;
  d.head_dims = desc_.head_dims;
  if (desc_.min_position != 0 || desc_.max_position != 0) {
    d.min_position = desc_.min_position;
    d.max_position = desc_.max_position;
  }
  d.magnitude_scale = (desc_.flags & ROPECHECK_FLAG_MAGNITUDE_SCALE) != 0;
  d.in_place = (desc_.flags & ROPECHECK_FLAG_NO_IN_PLACE) == 0;
  d.layouts_bitwise_symmetric = (desc_.flags & ROPECHECK_FLAG_LAYOUTS_BITWISE_SYMMETRIC) != 0;
  d.batch_invariant = (desc_.flags & ROPECHECK_FLAG_BATCH_VARIANT) == 0;
  return d;
}

std::string PluginKernel::name() const { return desc_.name; }
std::string PluginKernel::description() const { return desc_.description; }
Policy PluginKernel::policy(Dtype d) const { return desc_.policies[static_cast<int>(d)]; }

void PluginKernel::reset() { faults_.clear(); }

void PluginKernel::record(Fault f) const { faults_.push_back(std::move(f)); }

bool PluginKernel::ensure_worker() const {
  if (worker_) return true;
  if (attached_) return false;  // its server is gone; there is nothing to fork
  try {
    worker_ = Worker::spawn(path_);
    ipc::Msg t{};
    std::vector<char> payload;
    if (worker_->greeting(t, payload, opts_.timeout_s) != ipc::IoResult::ok ||
        t != ipc::Msg::hello) {
      kill_worker();
      return false;
    }
    return true;
  } catch (const LoadError&) {
    return false;
  }
}

namespace {
// The descriptor's static masks: scaling kind, dtype, layout, head_dim.
bool declared(const Descriptor& desc, const RopeSpec& spec, Dtype d) {
  // ABI 2 describes every variant and layout; the plugin's declared masks decide.
  if (((desc.scalings | ROPECHECK_SCALING_BIT(ROPECHECK_SCALING_NONE)) &
       ROPECHECK_SCALING_BIT(static_cast<int>(spec.scaling.kind))) == 0)
    return false;
  if ((desc.dtypes & ROPECHECK_DTYPE_BIT(static_cast<int>(d))) == 0) return false;
  if ((desc.layouts & ROPECHECK_LAYOUT_BIT(static_cast<int>(spec.layout))) == 0) return false;
  return desc.head_dims.empty() || std::find(desc.head_dims.begin(), desc.head_dims.end(),
                                             spec.head_dim) != desc.head_dims.end();
}
// supports() answers kept per worker: the probe grid of every dtype (a few hundred specs) fits
// many times over; the random specs of a long run beyond it start the memo afresh.
constexpr std::size_t kMaxRemembered = std::size_t{1} << 16;
}  // namespace

bool PluginKernel::supports(const RopeSpec& spec, Dtype d) const {
  // Poisoned: nothing is supported until reset(), so a property engine that already saw the
  // faulting call discards (instead of shrinking through) every further case.
  if (poisoned()) return false;
  if (!declared(desc_, spec, d)) return false;
  if (!desc_.has_supports) return true;
  if (!ensure_worker()) return false;
  ipc::Writer w;
  put_spec(w, to_c(spec));
  w.put<std::int32_t>(static_cast<std::int32_t>(d));
  // The answer is a function of (spec, dtype) (plugin.h: "non-zero if (spec, dtype) is
  // supported"), so the worker's earlier answer stands. The key is the request with the struct's
  // pointers cleared (the arrays they point to follow it in the request): equal keys are equal
  // specs; a different pointer or padding byte can only miss, never answer for another spec.
  std::string key(w.buf.begin(), w.buf.end());
  {
    ropecheck_spec c{};
    std::memcpy(&c, key.data(), sizeof c);
    c.sections = nullptr;
    c.scaling.short_factor = c.scaling.long_factor = c.scaling.freq_factors = nullptr;
    std::memcpy(key.data(), &c, sizeof c);
  }
  if (const auto it = supported_.find(key); it != supported_.end()) return it->second;
  ipc::Msg t{};
  std::vector<char> rep;
  const auto r = worker_->round_trip(ipc::Msg::supports, w.buf, t, rep, 64, opts_.timeout_s);
  std::int32_t v = 0;
  if (r == ipc::IoResult::ok && t == ipc::Msg::supports && ipc::Reader(rep).get(v)) {
    if (supported_.size() >= kMaxRemembered) supported_.clear();
    supported_.emplace(std::move(key), v != 0);
    return v != 0;
  }
  Fault f;
  if (r == ipc::IoResult::timeout) {
    f = timeout_fault("supports() did not return within " + std::to_string(opts_.timeout_s) + " s");
  } else {
    f = worker_->reap();
    f.detail = "in supports()";
  }
  kill_worker();
  f.config = "dtype=" + std::string(ropecheck::name(d)) + " " + describe(spec);
  record(std::move(f));
  return false;
}

// ---- apply: check the call against the declared contract, marshal, call, classify -------------

namespace {

// A call the host refuses before it reaches the plugin: outside the declared domain
// (unsupported / error) or malformed arguments (error). nullopt: the call may go ahead.
std::optional<KernelStatus> refuse_call(const Descriptor& desc, const RopeSpec& spec,
                                        const TensorArgs& a) {
  if (a.real_positions && !(desc.flags & ROPECHECK_FLAG_REAL_POSITIONS))
    return KernelStatus::unsupported;
  if (a.n_axes != 1 && a.n_axes != spec.n_axes()) return KernelStatus::error;
  // The host keeps the declared contract; a caller that does not gets an error, never a call.
  if (spec.scale != 1 && !(desc.flags & ROPECHECK_FLAG_MAGNITUDE_SCALE)) return KernelStatus::error;
  if ((desc.flags & ROPECHECK_FLAG_NO_IN_PLACE) && a.in == a.out) return KernelStatus::error;
  if ((desc.min_position != 0 || desc.max_position != 0) && a.positions)
    for (std::int64_t i = 0; i < a.n_tokens * a.n_axes; ++i)
      if (a.positions[i] < desc.min_position || a.positions[i] > desc.max_position)
        return KernelStatus::error;
  if (a.n_tokens < 0 || a.n_heads < 0 || !a.in || !a.out ||
      (a.n_tokens > 0 && !a.positions && !a.real_positions))
    return KernelStatus::error;
  return std::nullopt;
}

// The bytes a strided view spans: from the lowest to the highest element any (token, head)
// vector touches. Only this extent travels to the worker and back.
struct Extent {
  std::int64_t min_off;  // element offset of the extent start relative to the view origin (<= 0)
  std::int64_t elems;
  int eb;  // element bytes
  std::uint64_t bytes() const { return static_cast<std::uint64_t>(elems) * eb; }
};

Extent extent_of(const RopeSpec& spec, const TensorArgs& a) {
  // The corners of the (token, head) grid plus one vector.
  const std::int64_t t_span = (a.n_tokens - 1) * a.token_stride;
  const std::int64_t h_span = (a.n_heads - 1) * a.head_stride;
  const std::int64_t min_off =
      std::min<std::int64_t>(0, t_span) + std::min<std::int64_t>(0, h_span);
  const std::int64_t max_off =
      std::max<std::int64_t>(0, t_span) + std::max<std::int64_t>(0, h_span) + spec.head_dim - 1;
  return {min_off, max_off - min_off + 1, traits(a.dtype).bytes};
}

// Msg::apply's request (layout in worker.hpp, ApplyHeader).
std::vector<char> apply_request(const RopeSpec& spec, const TensorArgs& a, const Extent& x,
                                const InvFreqProvider& inv_freq) {
  ApplyHeader h{};
  h.n_axes = a.n_axes;
  h.has_real_positions = a.real_positions ? 1 : 0;
  h.dtype = static_cast<std::int32_t>(a.dtype);
  h.inplace = a.in == a.out ? 1 : 0;
  h.n_tokens = a.n_tokens;
  h.n_heads = a.n_heads;
  h.token_stride = a.token_stride;
  h.head_stride = a.head_stride;
  h.min_off = x.min_off;
  h.extent_elems = x.elems;
  h.n_pairs = spec.n_pairs();
  InvFreqTables tab;
  if (inv_freq && h.n_pairs > 0) {
    tab = inv_freq(spec);
    h.has_inv_freq = static_cast<std::int64_t>(tab.f64.size()) == h.n_pairs &&
                     static_cast<std::int64_t>(tab.f32.size()) == h.n_pairs;
  }
  ipc::Writer w;
  w.buf.reserve(sizeof h + a.n_tokens * a.n_axes * 8 + x.bytes() + h.n_pairs * 12);
  w.put(h);
  put_spec(w, to_c(spec));
  const std::size_t n_pos = static_cast<std::size_t>(a.n_tokens * a.n_axes);
  if (a.real_positions)
    w.put_bytes(a.real_positions, n_pos * 8);
  else
    w.put_bytes(a.positions, n_pos * 8);
  if (h.has_inv_freq) {
    w.put_bytes(tab.f64.data(), tab.f64.size() * 8);
    w.put_bytes(tab.f32.data(), tab.f32.size() * 4);
  }
  const auto* in_bytes = static_cast<const unsigned char*>(a.in);
  w.put_bytes(in_bytes + x.min_off * x.eb, x.bytes());
  return std::move(w.buf);
}

// Only the view's elements go back: gaps of the caller's buffer keep what they held.
void copy_view_back(const RopeSpec& spec, const TensorArgs& a, const Extent& x,
                    const char* result) {
  auto* out = static_cast<unsigned char*>(a.out);
  for (std::int64_t tk = 0; tk < a.n_tokens; ++tk)
    for (std::int64_t hd = 0; hd < a.n_heads; ++hd) {
      const std::int64_t off = tk * a.token_stride + hd * a.head_stride;
      std::memcpy(out + off * x.eb, result + (off - x.min_off) * x.eb,
                  static_cast<std::size_t>(spec.head_dim) * x.eb);
    }
}

// What the worker's reply says: a fault (a malformed reply, or what the worker's guards saw the
// plugin do), else the plugin's status and, when ok, the result extent inside the reply.
struct ApplyOutcome {
  std::optional<Fault> fault;
  KernelStatus status = KernelStatus::error;
  const char* result = nullptr;
};

ApplyOutcome read_apply_reply(ipc::Msg type, const std::vector<char>& rep, const Extent& x) {
  ipc::Reader rd(rep);
  ApplyReply ar{};
  const char* detail = nullptr;
  const char* result = nullptr;
  ApplyOutcome out;
  if (type != ipc::Msg::apply || !rd.get(ar) || !(detail = rd.take(ar.detail_len)) ||
      ar.result_bytes != x.bytes() || !(result = rd.take(ar.result_bytes))) {
    out.fault.emplace();
    out.fault->kind = FaultKind::bad_reply;
    return out;
  }
  if (ar.fault_kind != static_cast<std::int32_t>(FaultKind::none)) {
    out.fault.emplace();
    out.fault->kind = static_cast<FaultKind>(ar.fault_kind);
    out.fault->detail.assign(detail, ar.detail_len);
    return out;
  }
  if (ar.status == ROPECHECK_UNSUPPORTED)
    out.status = KernelStatus::unsupported;
  else if (ar.status == ROPECHECK_OK)
    out.status = KernelStatus::ok;
  out.result = result;
  return out;
}

}  // namespace

KernelStatus PluginKernel::apply(const RopeSpec& spec, const TensorArgs& a) const {
  ++calls_;
  if (poisoned()) return KernelStatus::error;
  if (!supports(spec, a.dtype)) return KernelStatus::unsupported;
  if (const auto refused = refuse_call(desc_, spec, a)) return *refused;
  if (a.n_tokens == 0 || a.n_heads == 0 || spec.head_dim == 0) return KernelStatus::ok;
  const Extent x = extent_of(spec, a);
  const long double bytes = static_cast<long double>(x.elems) * x.eb * 2 +
                            a.n_tokens * 8.0L * static_cast<double>(a.n_axes);
  if (bytes > static_cast<long double>(opts_.max_bytes)) return KernelStatus::error;
  if (!ensure_worker()) {
    Fault f;
    f.kind = FaultKind::crashed;
    f.detail = "the plugin worker could not be restarted";
    f.config = describe_call(spec, a);
    record(std::move(f));
    return KernelStatus::error;
  }
  ipc::Msg t{};
  std::vector<char> rep;
  const auto r = worker_->round_trip(ipc::Msg::apply, apply_request(spec, a, x, inv_freq_), t, rep,
                                     x.bytes() + 65536, opts_.timeout_s);
  if (r != ipc::IoResult::ok) {
    std::ostringstream o;
    o << "apply() did not return within " << opts_.timeout_s << " s";
    Fault f = r == ipc::IoResult::timeout ? timeout_fault(o.str()) : worker_->reap();
    kill_worker();
    f.config = describe_call(spec, a);
    record(std::move(f));
    return KernelStatus::error;
  }
  const ApplyOutcome out = read_apply_reply(t, rep, x);
  if (out.fault) {
    Fault f = *out.fault;
    f.config = describe_call(spec, a);
    record(std::move(f));
    if (out.fault->kind == FaultKind::bad_reply) kill_worker();
    return KernelStatus::error;
  }
  if (out.status == KernelStatus::ok) copy_view_back(spec, a, x, out.result);
  return out.status;
}

}  // namespace ropecheck::plugin
