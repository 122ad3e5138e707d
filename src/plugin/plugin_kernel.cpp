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

}  // namespace

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

struct PluginKernel::Worker {
  pid_t pid = -1;
  int to_child = -1;
  int from_child = -1;
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

}  // namespace

std::unique_ptr<PluginKernel> PluginKernel::load(const std::string& path, const Options& opts) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    throw LoadError("cannot load plugin '" + path + "': " + strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw LoadError("cannot load plugin '" + path + "': not a regular file");
  if (!(opts.timeout_s > 0)) throw LoadError("timeout must be > 0");
  // The worker must not die of SIGPIPE's default action in the *oracle* when it writes to a
  // worker that crashed: EPIPE is handled as the worker's death.
  signal(SIGPIPE, SIG_IGN);

  std::unique_ptr<PluginKernel> k(new PluginKernel());
  k->path_ = path;
  k->opts_ = opts;
  const Spawned s = fork_worker(path);
  k->worker_ = std::make_unique<Worker>(Worker{s.pid, s.to_child, s.from_child});

  ipc::Msg t{};
  std::vector<char> payload;
  const auto r = ipc::recv(s.from_child, t, payload, 1 << 24, ipc::now_s() + opts.timeout_s);
  if (r != ipc::IoResult::ok) {
    if (r == ipc::IoResult::timeout) {
      k->kill_worker();
      throw LoadError("plugin '" + path + "' did not finish loading within " +
                      std::to_string(opts.timeout_s) + " s");
    }
    const pid_t pid = k->worker_->pid;
    k->worker_->pid = -1;
    Fault f = death(pid);
    k->kill_worker();
    throw LoadError("plugin '" + path + "' " + f.message() + " while loading");
  }
  ipc::Reader rd(payload);
  if (t == ipc::Msg::load_error) {
    std::string m;
    rd.get_string(m);
    k->kill_worker();
    throw LoadError(m);
  }
  Descriptor& d = k->desc_;
  std::int32_t has_supports = 0, n_hd = 0;
  bool ok = t == ipc::Msg::hello && rd.get(d.abi_version) && rd.get_string(d.name) &&
            rd.get_string(d.description) && rd.get(d.dtypes) && rd.get(d.layouts) &&
            rd.get(has_supports) && rd.get(n_hd);
  for (std::int32_t i = 0; ok && i < n_hd; ++i) {
    std::int64_t v = 0;
    ok = rd.get(v);
    d.head_dims.push_back(v);
  }
  for (int i = 0; ok && i < ROPECHECK_DTYPE_COUNT; ++i) {
    ropecheck_policy p{};
    ok = rd.get(p);
    if (!ok) break;
    if ((d.dtypes & ROPECHECK_DTYPE_BIT(i)) == 0) continue;
    // ABI 2 had no trig_error (reserved bytes, 0) and no ladder recipe.
    const double trig = d.abi_version >= 3 ? p.trig_error : 0.0;
    const std::int32_t max_recipe =
        d.abi_version >= 3 ? ROPECHECK_RECIPE_LADDER_F32 : ROPECHECK_RECIPE_HF_F32;
    if (!valid_precision(p.angle) || !valid_precision(p.table) || !valid_precision(p.arithmetic) ||
        p.recipe < ROPECHECK_RECIPE_POW_PRODUCT || p.recipe > max_recipe) {
      k->kill_worker();
      throw LoadError("plugin '" + d.name + "' declares an invalid precision policy for dtype " +
                      ropecheck::name(static_cast<Dtype>(i)));
    }
    if (!std::isfinite(trig) || trig < 0) {
      k->kill_worker();
      throw LoadError("plugin '" + d.name + "' declares trig_error " + std::to_string(trig) +
                      " for dtype " + ropecheck::name(static_cast<Dtype>(i)) +
                      " (must be finite and >= 0; 0 means the default 2)");
    }
    d.policies[i] = Policy{static_cast<Precision>(p.angle),
                           static_cast<Precision>(p.table),
                           static_cast<Precision>(p.arithmetic),
                           static_cast<AngleRecipe>(p.recipe),
                           p.fused != 0,
                           "third-party plugin (declared policy)",
                           trig == 0 ? 2.0 : trig};
  }
  ok = ok && rd.get(d.scalings) && rd.get(d.flags) && rd.get(d.min_position) &&
       rd.get(d.max_position);
  if (!ok) {
    k->kill_worker();
    throw LoadError("plugin '" + path + "': malformed descriptor reply");
  }
  if (d.abi_version < 3) {
    // ABI 2 always passed scale != 1 and knew no position range: keep that meaning.
    d.flags |= ROPECHECK_FLAG_MAGNITUDE_SCALE;
    d.min_position = d.max_position = 0;
  }
  if (d.min_position > d.max_position) {
    k->kill_worker();
    throw LoadError("plugin '" + d.name + "' declares min_position " +
                    std::to_string(d.min_position) + " > max_position " +
                    std::to_string(d.max_position));
  }
  d.has_supports = has_supports != 0;
  if ((d.dtypes & ROPECHECK_DTYPE_BIT_ALL) == 0)
    throw LoadError("plugin '" + d.name + "' declares no supported dtype");
  if ((d.layouts & ROPECHECK_LAYOUT_BIT_ALL) == 0)
    throw LoadError("plugin '" + d.name + "' declares no supported layout");
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
  return d;
}

std::string PluginKernel::name() const { return desc_.name; }
std::string PluginKernel::description() const { return desc_.description; }
Policy PluginKernel::policy(Dtype d) const { return desc_.policies[static_cast<int>(d)]; }

void PluginKernel::reset() { faults_.clear(); }

void PluginKernel::record(Fault f) const { faults_.push_back(std::move(f)); }

bool PluginKernel::ensure_worker() const {
  if (worker_) return true;
  try {
    const Spawned s = fork_worker(path_);
    worker_ = std::make_unique<Worker>(Worker{s.pid, s.to_child, s.from_child});
    ipc::Msg t{};
    std::vector<char> payload;
    if (ipc::recv(s.from_child, t, payload, 1 << 24, ipc::now_s() + opts_.timeout_s) !=
            ipc::IoResult::ok ||
        t != ipc::Msg::hello) {
      kill_worker();
      return false;
    }
    return true;
  } catch (const LoadError&) {
    return false;
  }
}

bool PluginKernel::supports(const RopeSpec& spec, Dtype d) const {
  // Poisoned: nothing is supported until reset(), so a property engine that already saw the
  // faulting call discards (instead of shrinking through) every further case.
  if (poisoned()) return false;
  // ABI 2 describes every variant and layout; the plugin's declared masks decide.
  if (((desc_.scalings | ROPECHECK_SCALING_BIT(ROPECHECK_SCALING_NONE)) &
       ROPECHECK_SCALING_BIT(static_cast<int>(spec.scaling.kind))) == 0)
    return false;
  if ((desc_.dtypes & ROPECHECK_DTYPE_BIT(static_cast<int>(d))) == 0) return false;
  if ((desc_.layouts & ROPECHECK_LAYOUT_BIT(static_cast<int>(spec.layout))) == 0) return false;
  if (!desc_.head_dims.empty() && std::find(desc_.head_dims.begin(), desc_.head_dims.end(),
                                            spec.head_dim) == desc_.head_dims.end())
    return false;
  if (!desc_.has_supports) return true;
  if (!ensure_worker()) return false;
  ipc::Writer w;
  put_spec(w, to_c(spec));
  w.put<std::int32_t>(static_cast<std::int32_t>(d));
  const double deadline = ipc::now_s() + opts_.timeout_s;
  ipc::Msg t{};
  std::vector<char> rep;
  auto r = ipc::send(worker_->to_child, ipc::Msg::supports, w.buf, deadline);
  if (r == ipc::IoResult::ok) r = ipc::recv(worker_->from_child, t, rep, 64, deadline);
  std::int32_t v = 0;
  if (r == ipc::IoResult::ok && t == ipc::Msg::supports && ipc::Reader(rep).get(v)) return v != 0;
  Fault f;
  if (r == ipc::IoResult::timeout) {
    f.kind = FaultKind::timeout;
    f.detail = "supports() did not return within " + std::to_string(opts_.timeout_s) + " s";
    kill_worker();
  } else {
    const pid_t pid = worker_->pid;
    worker_->pid = -1;
    f = death(pid);
    f.detail = "in supports()";
    kill_worker();
  }
  f.config = "dtype=" + std::string(ropecheck::name(d)) + " " + describe(spec);
  record(std::move(f));
  return false;
}

KernelStatus PluginKernel::apply(const RopeSpec& spec, const TensorArgs& a) const {
  ++calls_;
  if (poisoned()) return KernelStatus::error;
  if (!supports(spec, a.dtype)) return KernelStatus::unsupported;
  if (a.real_positions && !(desc_.flags & ROPECHECK_FLAG_REAL_POSITIONS))
    return KernelStatus::unsupported;
  if (a.n_axes != 1 && a.n_axes != spec.n_axes()) return KernelStatus::error;
  // The host keeps the declared contract; a caller that does not gets an error, never a call.
  if (spec.scale != 1 && !(desc_.flags & ROPECHECK_FLAG_MAGNITUDE_SCALE))
    return KernelStatus::error;
  if ((desc_.flags & ROPECHECK_FLAG_NO_IN_PLACE) && a.in == a.out) return KernelStatus::error;
  if ((desc_.min_position != 0 || desc_.max_position != 0) && a.positions)
    for (std::int64_t i = 0; i < a.n_tokens * a.n_axes; ++i)
      if (a.positions[i] < desc_.min_position || a.positions[i] > desc_.max_position)
        return KernelStatus::error;
  if (a.n_tokens < 0 || a.n_heads < 0 || !a.in || !a.out ||
      (a.n_tokens > 0 && !a.positions && !a.real_positions))
    return KernelStatus::error;
  if (a.n_tokens == 0 || a.n_heads == 0 || spec.head_dim == 0) return KernelStatus::ok;
  const int eb = traits(a.dtype).bytes;
  // Extent of the view in elements: the corners of the (token, head) grid plus one vector.
  const std::int64_t t_span = (a.n_tokens - 1) * a.token_stride;
  const std::int64_t h_span = (a.n_heads - 1) * a.head_stride;
  const std::int64_t min_off =
      std::min<std::int64_t>(0, t_span) + std::min<std::int64_t>(0, h_span);
  const std::int64_t max_off =
      std::max<std::int64_t>(0, t_span) + std::max<std::int64_t>(0, h_span) + spec.head_dim - 1;
  const std::int64_t extent = max_off - min_off + 1;
  const long double bytes =
      static_cast<long double>(extent) * eb * 2 + a.n_tokens * 8.0L * static_cast<double>(a.n_axes);
  if (bytes > static_cast<long double>(opts_.max_bytes)) return KernelStatus::error;
  if (!ensure_worker()) {
    Fault f;
    f.kind = FaultKind::crashed;
    f.detail = "the plugin worker could not be restarted";
    f.config = describe_call(spec, a);
    record(std::move(f));
    return KernelStatus::error;
  }

  ApplyHeader h{};
  h.n_axes = a.n_axes;
  h.has_real_positions = a.real_positions ? 1 : 0;
  h.dtype = static_cast<std::int32_t>(a.dtype);
  h.inplace = a.in == a.out ? 1 : 0;
  h.n_tokens = a.n_tokens;
  h.n_heads = a.n_heads;
  h.token_stride = a.token_stride;
  h.head_stride = a.head_stride;
  h.min_off = min_off;
  h.extent_elems = extent;
  h.n_pairs = spec.n_pairs();
  InvFreqTables tab;
  if (inv_freq_ && h.n_pairs > 0) {
    tab = inv_freq_(spec);
    h.has_inv_freq = static_cast<std::int64_t>(tab.f64.size()) == h.n_pairs &&
                     static_cast<std::int64_t>(tab.f32.size()) == h.n_pairs;
  }
  ipc::Writer w;
  w.buf.reserve(sizeof h + a.n_tokens * a.n_axes * 8 + extent * eb + h.n_pairs * 12);
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
  w.put_bytes(in_bytes + min_off * eb, static_cast<std::size_t>(extent) * eb);

  const double deadline = ipc::now_s() + opts_.timeout_s;
  ipc::Msg t{};
  std::vector<char> rep;
  auto r = ipc::send(worker_->to_child, ipc::Msg::apply, w.buf, deadline);
  if (r == ipc::IoResult::ok)
    r = ipc::recv(worker_->from_child, t, rep, static_cast<std::uint64_t>(extent) * eb + 65536,
                  deadline);
  if (r != ipc::IoResult::ok) {
    Fault f;
    if (r == ipc::IoResult::timeout) {
      f.kind = FaultKind::timeout;
      std::ostringstream o;
      o << "apply() did not return within " << opts_.timeout_s << " s";
      f.detail = o.str();
      kill_worker();
    } else {
      const pid_t pid = worker_->pid;
      worker_->pid = -1;
      f = death(pid);
      kill_worker();
    }
    f.config = describe_call(spec, a);
    record(std::move(f));
    return KernelStatus::error;
  }
  ipc::Reader rd(rep);
  ApplyReply ar{};
  const char* detail = nullptr;
  const char* result = nullptr;
  if (t != ipc::Msg::apply || !rd.get(ar) || !(detail = rd.take(ar.detail_len)) ||
      ar.result_bytes != static_cast<std::uint64_t>(extent) * eb ||
      !(result = rd.take(ar.result_bytes))) {
    Fault f;
    f.kind = FaultKind::bad_reply;
    f.config = describe_call(spec, a);
    record(std::move(f));
    kill_worker();
    return KernelStatus::error;
  }
  if (ar.fault_kind != static_cast<std::int32_t>(FaultKind::none)) {
    Fault f;
    f.kind = static_cast<FaultKind>(ar.fault_kind);
    f.detail.assign(detail, ar.detail_len);
    f.config = describe_call(spec, a);
    record(std::move(f));
    return KernelStatus::error;
  }
  if (ar.status == ROPECHECK_UNSUPPORTED) return KernelStatus::unsupported;
  if (ar.status != ROPECHECK_OK) return KernelStatus::error;
  // Only the view's elements go back: gaps of the caller's buffer keep what they held.
  auto* out = static_cast<unsigned char*>(a.out);
  for (std::int64_t tk = 0; tk < a.n_tokens; ++tk)
    for (std::int64_t hd = 0; hd < a.n_heads; ++hd) {
      const std::int64_t off = tk * a.token_stride + hd * a.head_stride;
      std::memcpy(out + off * eb, result + (off - min_off) * eb,
                  static_cast<std::size_t>(spec.head_dim) * eb);
    }
  return KernelStatus::ok;
}

}  // namespace ropecheck::plugin
