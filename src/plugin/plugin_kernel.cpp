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
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <typeinfo>

#include <sys/resource.h>

#include "ipc.hpp"
#include "reply.hpp"
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
    case FaultKind::protocol_violation:
      return "protocol_violation";
    case FaultKind::out_of_memory:
      return "out_of_memory";
    case FaultKind::declaration_mismatch:
      return "declaration_mismatch";
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
    case FaultKind::protocol_violation:
      o << "protocol violation";
      break;
    case FaultKind::out_of_memory:
      o << "out of memory";
      break;
    case FaultKind::declaration_mismatch:
      o << "declaration mismatch";
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

// The worker process, the two pipes to it and the pipe of its stdout/stderr. kill_worker() ends
// it. Everything it sends is read as untrusted input (ipc::recv_reply, reply.hpp).
struct PluginKernel::Worker {
  pid_t pid = -1;  // -1: attached (a serving process that is not our child)
  int to_child = -1;
  int from_child = -1;
  int log = -1;  // the worker's stdout/stderr (the host drains it while it waits)
  std::uint32_t next_id = 1;
  std::uint64_t drained = 0;
  std::uint64_t memory_limit = 0, base_rss = 0;
  bool over_memory = false;  // the watch saw the resident size pass the limit
  bool ended = false;        // the watch saw the worker end while its pipe stayed open

  // Forks the worker, which loads the plugin (throws LoadError when it cannot fork).
  static std::unique_ptr<Worker> spawn(const std::string& path, const Options& opts);
  // The worker's first message: hello (the descriptor) or load_error.
  ipc::Reply greeting(double timeout_s);
  // One request and its checked reply under the per-call deadline.
  ipc::Reply round_trip(ipc::Msg type, const std::vector<char>& request, ipc::Expect e,
                        double timeout_s);
  ipc::Watch watch();
  std::uint64_t rss() const;
  // Ends the worker: waits until `deadline` for it to end by itself, then kills its process group
  // (the plugin's own children with it) and reaps it. How it ended; `killed`: by us.
  Fault end(double deadline, bool& killed);
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
    kill(-worker_->pid, SIGKILL);  // its process group: what the plugin forked dies too
    kill(worker_->pid, SIGKILL);
    int st = 0;
    waitpid(worker_->pid, &st, 0);
  }
  close_fd(worker_->to_child);
  close_fd(worker_->from_child);
  close_fd(worker_->log);
  worker_.reset();
  supported_.clear();  // a new worker answers afresh
}

namespace {

struct Spawned {
  pid_t pid;
  int to_child;
  int from_child;
  int log;
};

Spawned fork_worker(const std::string& path, std::uint64_t memory_limit) {
  int down[2], up[2], log[2];
  if (pipe2(down, O_CLOEXEC) != 0 || pipe2(up, O_CLOEXEC) != 0 || pipe2(log, O_CLOEXEC) != 0)
    throw LoadError("cannot create pipes for the plugin worker: " + std::string(strerror(errno)));
  std::fflush(nullptr);  // buffered output must not be duplicated into the child
  const pid_t pid = fork();
  if (pid < 0) throw LoadError("cannot fork the plugin worker: " + std::string(strerror(errno)));
  if (pid == 0) {
    // The child never returns into the oracle's code: worker_main ends in _exit.
    close(down[1]);
    close(up[0]);
    close(log[0]);
    worker_main(down[0], up[1], log[1], path, memory_limit);
  }
  setpgid(pid, pid);  // as the child does: whichever runs first, the group exists before a kill
  close(down[0]);
  close(up[1]);
  close(log[1]);
  fcntl(log[0], F_SETFL, O_NONBLOCK);
  return {pid, down[1], up[0], log[0]};
}

// A wait status as a Fault.
Fault death_of(int st) {
  Fault f;
  if (WIFSIGNALED(st)) {
    f.kind = FaultKind::crashed;
    f.signal = WTERMSIG(st);
  } else if (WIFEXITED(st)) {
    f.kind = FaultKind::exited;
    f.exit_status = WEXITSTATUS(st);
  } else {
    f.kind = FaultKind::bad_reply;
  }
  return f;
}

bool has_ended(pid_t pid) {
  siginfo_t si{};
  return waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         si.si_pid == pid;
}

// The watch while the host waits (ipc::Watch::check): the memory limit, and a worker that ended
// while a process it forked keeps the reply pipe open (no EOF would ever come).
bool watch_worker(void* ctx) {
  auto* w = static_cast<PluginKernel::Worker*>(ctx);
  if (w->memory_limit && w->rss() > w->base_rss + w->memory_limit) {
    w->over_memory = true;
    return false;
  }
  if (has_ended(w->pid)) {
    // Its descriptors closed when it ended: unless another process holds the pipe, the read
    // sees EOF (or its last bytes) now.
    pollfd p{w->from_child, POLLIN, 0};
    if (poll(&p, 1, 0) == 1 && p.revents) return true;
    w->ended = true;
    return false;
  }
  return true;
}

[[noreturn]] void refuse(const std::string& m) { throw LoadError(m); }

void check_loadable(const std::string& path, const Options& opts) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) refuse("cannot load plugin '" + path + "': " + strerror(errno));
  if (!S_ISREG(st.st_mode)) refuse("cannot load plugin '" + path + "': not a regular file");
  if (!(opts.timeout_s > 0)) refuse("timeout must be > 0");
}

std::string mib(std::uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

std::unique_ptr<PluginKernel::Worker> PluginKernel::Worker::spawn(const std::string& path,
                                                                  const Options& opts) {
  const Spawned s = fork_worker(path, opts.memory_limit);
  auto w = std::make_unique<Worker>();
  w->pid = s.pid;
  w->to_child = s.to_child;
  w->from_child = s.from_child;
  w->log = s.log;
  w->memory_limit = opts.memory_limit;
  w->base_rss = w->rss();
  return w;
}

std::uint64_t PluginKernel::Worker::rss() const {
  if (pid <= 0) return 0;
  const std::string path = "/proc/" + std::to_string(pid) + "/statm";
  unsigned long long size = 0, resident = 0;
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    if (std::fscanf(f, "%llu %llu", &size, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

ipc::Watch PluginKernel::Worker::watch() {
  ipc::Watch w;
  if (pid <= 0) return w;  // attached: its output and memory are the serving process's own
  w.drain_fd = log;
  w.drained = &drained;
  w.check = watch_worker;
  w.ctx = this;
  return w;
}

ipc::Reply PluginKernel::Worker::greeting(double timeout_s) {
  const ipc::Watch w = watch();
  return ipc::recv_reply(from_child, expect_hello(), ipc::now_s() + timeout_s, &w);
}

ipc::Reply PluginKernel::Worker::round_trip(ipc::Msg type, const std::vector<char>& request,
                                            ipc::Expect e, double timeout_s) {
  const double deadline = ipc::now_s() + timeout_s;
  const ipc::Watch w = watch();
  e.id = next_id++;
  ipc::Reply r;
  r.io = ipc::send(to_child, type, e.id, request, deadline, &w);
  if (r.io == ipc::IoResult::ok) r = ipc::recv_reply(from_child, e, deadline, &w);
  return r;
}

Fault PluginKernel::Worker::end(double deadline, bool& killed) {
  killed = false;
  const pid_t p = pid;
  pid = -1;
  if (p <= 0) {  // attached: not our child, waitpid would wait for any child
    Fault f;
    f.kind = FaultKind::bad_reply;
    f.detail = "the serving process closed the pipe";
    return f;
  }
  while (!has_ended(p) && ipc::now_s() < deadline) usleep(5000);
  killed = !has_ended(p);
  kill(-p, SIGKILL);  // also when it ended: children it forked may hold the pipes
  kill(p, SIGKILL);
  int st = 0;
  rusage ru{};
  if (wait4(p, &st, 0, &ru) != p) return death_of(-1);
  Fault f = death_of(st);
  // The peak resident size says whether it ended on the memory limit (RLIMIT_AS: the plugin's
  // allocation failed and it crashed or gave up).
  const auto peak = static_cast<std::uint64_t>(ru.ru_maxrss) * 1024;
  if (memory_limit && peak >= base_rss + memory_limit * 3 / 4) {
    f.detail = f.message() + " after its resident memory reached " + mib(peak) +
               " (--worker-memory: " + mib(memory_limit) + " beyond its start)";
    f.kind = FaultKind::out_of_memory;
  }
  return f;
}

// How a call that got no usable reply ended, as the configuration's fault; the worker is gone
// afterwards (killed and reaped, or closed when attached). `what`: "apply()" or "supports()".
Fault PluginKernel::call_fault(const ipc::Reply& r, const std::string& what) const {
  Fault f;
  Worker& w = *worker_;
  if (r.io == ipc::IoResult::violation) {
    f.kind = FaultKind::protocol_violation;
    f.detail = ipc::not_a_reply(r) + " in " + what;
  } else if (w.over_memory || (r.io == ipc::IoResult::timeout && w.memory_limit &&
                               w.rss() > w.base_rss + w.memory_limit)) {
    f.kind = FaultKind::out_of_memory;
    f.detail = what + " grew the worker's resident memory past its limit of " +
               mib(w.memory_limit) + " (--worker-memory)";
  } else if (r.io == ipc::IoResult::timeout) {
    std::ostringstream o;
    o << what << " did not return within " << opts_.timeout_s << " s";
    f.kind = FaultKind::timeout;
    f.detail = o.str();
  } else {
    // EOF or a broken pipe: the worker normally ended; give it a moment to be reaped. One that
    // closed its pipe and lives on is killed and said so.
    bool killed = false;
    f = w.end(ipc::now_s() + std::min(opts_.timeout_s, 2.0), killed);
    if (killed) {
      f.kind = FaultKind::protocol_violation;
      f.detail = "the plugin's process closed its reply pipe in " + what + " and did not end";
    } else if (w.ended) {
      f.detail += (f.detail.empty() ? "" : "; ") + std::string(
                                                       "a process it forked kept the "
                                                       "reply pipe open (killed)");
    } else if (f.detail.empty() && what != "apply()") {
      f.detail = "in " + what;
    }
  }
  kill_worker();
  return f;
}

std::unique_ptr<PluginKernel> PluginKernel::load(const std::string& path, const Options& opts) {
  check_loadable(path, opts);
  // Process-wide on purpose: writing to a worker that crashed must not kill the *oracle* by
  // SIGPIPE's default action; the resulting EPIPE is handled as the worker's death.
  signal(SIGPIPE, SIG_IGN);

  std::unique_ptr<PluginKernel> k(new PluginKernel());
  k->path_ = path;
  k->opts_ = opts;
  k->worker_ = Worker::spawn(path, opts);
  try {
    k->desc_ = k->read_greeting(path);
  } catch (const LoadError&) {
    k->kill_worker();
    throw;
  }
  k->inv_freq_ = default_inv_freq;
  return k;
}

// The greeting of a new worker: its descriptor, or why it cannot be used (LoadError).
Descriptor PluginKernel::read_greeting(const std::string& label) const {
  const ipc::Reply r = worker_->greeting(opts_.timeout_s);
  if (r.io == ipc::IoResult::timeout)
    refuse("plugin '" + label + "' did not finish loading within " +
           std::to_string(opts_.timeout_s) + " s");
  if (r.io != ipc::IoResult::ok)
    refuse("plugin '" + label + "' " + call_fault(r, "the plugin's load").message());
  if (r.type == ipc::Msg::load_error) {
    std::string m;
    ipc::Reader(r.payload).get_string(m);
    refuse(m.empty() ? "plugin '" + label + "' could not be loaded" : m);
  }
  return read_descriptor(r.payload, label);
}

std::unique_ptr<PluginKernel> PluginKernel::attach(int rfd, int wfd, const std::string& label,
                                                   const Options& opts) {
  signal(SIGPIPE, SIG_IGN);  // as load(): a dead server must be an EPIPE, not our death
  std::unique_ptr<PluginKernel> k(new PluginKernel());
  k->path_ = label;
  k->attached_ = true;
  k->opts_ = opts;
  k->worker_ = std::make_unique<Worker>();
  k->worker_->to_child = wfd;
  k->worker_->from_child = rfd;
  try {
    k->desc_ = k->read_greeting(label);
  } catch (const LoadError&) {
    k->kill_worker();
    throw;
  }
  k->inv_freq_ = default_inv_freq;
  return k;
}

PluginKernel::~PluginKernel() {
  if (worker_ && worker_->to_child >= 0) {
    ipc::send(worker_->to_child, ipc::Msg::quit, worker_->next_id, {}, ipc::now_s() + 1.0);
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
    worker_ = Worker::spawn(path_, opts_);
    read_greeting(path_);
    return true;
  } catch (const LoadError&) {
    kill_worker();
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

bool PluginKernel::supports(const RopeSpec& spec, Dtype d) const try {
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
  const ipc::Reply r =
      worker_->round_trip(ipc::Msg::supports, w.buf, expect_supports(0), opts_.timeout_s);
  std::optional<bool> v;
  if (r.io == ipc::IoResult::ok) v = read_supports_reply(r.payload);
  if (v) {
    if (supported_.size() >= kMaxRemembered) supported_.clear();
    supported_.emplace(std::move(key), *v);
    return *v;
  }
  ipc::Reply bad = r;
  if (r.io == ipc::IoResult::ok) {
    bad.io = ipc::IoResult::violation;
    bad.why = "an answer that is not 0 or 1";
  }
  Fault f = call_fault(bad, "supports()");
  f.config = "dtype=" + std::string(ropecheck::name(d)) + " " + describe(spec);
  record(std::move(f));
  return false;
} catch (const std::exception& e) {
  host_error(e, "supports() dtype=" + std::string(ropecheck::name(d)) + " " + describe(spec));
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

}  // namespace

KernelStatus PluginKernel::apply(const RopeSpec& spec, const TensorArgs& a) const {
  return call(spec, a, false);
}

KernelStatus PluginKernel::apply_backward(const RopeSpec& spec, const TensorArgs& a) const {
  if (!desc_.has_backward) return KernelStatus::unsupported;
  return call(spec, a, true);
}

KernelStatus PluginKernel::call(const RopeSpec& spec, const TensorArgs& a, bool backward) const
    try {
  ++calls_;
  if (poisoned()) return KernelStatus::error;
  if (!supports(spec, a.dtype)) return KernelStatus::unsupported;
  if (const auto refused = refuse_call(desc_, spec, a)) return *refused;
  const KernelStatus st = run_call(spec, a, backward);
  // supports() accepted the spec and the call is inside the declared domain: an UNSUPPORTED
  // now is the declaration's fault, said at once with the field that would exclude the call.
  if (st == KernelStatus::unsupported && !poisoned()) {
    Fault f;
    f.kind = FaultKind::declaration_mismatch;
    f.detail = mismatch_hint(spec, a);
    f.config = describe_call(spec, a);
    record(std::move(f));
  }
  return st;
} catch (const std::exception& e) {
  host_error(e, (backward ? "apply_backward() " : "apply() ") + describe_call(spec, a));
  return KernelStatus::error;
}

KernelStatus PluginKernel::run_call(const RopeSpec& spec, const TensorArgs& a,
                                    bool backward) const {
  if (a.n_tokens == 0 || a.n_heads == 0 || spec.head_dim == 0) return KernelStatus::ok;
  const Extent x = extent_of(spec, a);
  const long double bytes = static_cast<long double>(x.elems) * x.eb * 2 +
                            a.n_tokens * 8.0L * static_cast<double>(a.n_axes);
  if (bytes > static_cast<long double>(opts_.max_bytes)) return KernelStatus::error;
  if (!ensure_worker()) {
    Fault f;
    f.kind = FaultKind::crashed;
    f.detail = attached_ ? "the serving process's channel is closed (an earlier fault)"
                         : "the plugin worker could not be restarted";
    f.config = describe_call(spec, a);
    record(std::move(f));
    return KernelStatus::error;
  }
  const ipc::Reply r = worker_->round_trip(backward ? ipc::Msg::apply_backward : ipc::Msg::apply,
                                           apply_request(spec, a, x, inv_freq_),
                                           expect_apply(0, x.bytes()), opts_.timeout_s);
  ApplyOutcome out;
  if (r.io == ipc::IoResult::ok) out = read_apply_reply(r.payload, x.bytes());
  if (r.io != ipc::IoResult::ok || !out.violation.empty()) {
    ipc::Reply bad = r;
    if (r.io == ipc::IoResult::ok) {
      bad.io = ipc::IoResult::violation;
      bad.why = out.violation;
    }
    Fault f = call_fault(bad, backward ? "apply_backward()" : "apply()");
    f.config = describe_call(spec, a);
    record(std::move(f));
    return KernelStatus::error;
  }
  if (out.fault) {
    Fault f = *out.fault;
    f.config = describe_call(spec, a);
    record(std::move(f));
    return KernelStatus::error;
  }
  if (out.status == KernelStatus::ok) copy_view_back(spec, a, x, out.result);
  return out.status;
}

void PluginKernel::host_error(const std::exception& e, const std::string& what) const {
  Fault f;
  f.kind = FaultKind::protocol_violation;
  f.detail = std::string("the host could not read the worker's reply to ") + what + ": " +
             (*e.what() ? e.what() : typeid(e).name());
  kill_worker();
  record(std::move(f));
}

}  // namespace ropecheck::plugin
