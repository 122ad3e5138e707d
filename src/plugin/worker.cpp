// The plugin worker (the forked child): loads the plugin (load_plugin), sends its descriptor
// (send_hello) and serves supports/apply requests until quit. Each apply runs on guarded copies
// of the buffers (Guarded, CallBuffers); the guards (class Guards) then name what the plugin did
// wrong, and the host turns that into a Fault.
#include "worker.hpp"

#include <dlfcn.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "ipc.hpp"
#include "ropecheck/plugin/host.hpp"

namespace ropecheck::plugin {

std::uint64_t sentinel_bits(int dtype) {
  switch (dtype) {
    case ROPECHECK_DTYPE_F64:
      return 0x7FF4A5A5A5A5A5A5ull;
    case ROPECHECK_DTYPE_F32:
      return 0x7FA5A5A5u;
    case ROPECHECK_DTYPE_F16:
      return 0x7D5Au;  // exponent all ones, quiet bit clear
    case ROPECHECK_DTYPE_BF16:
      return 0x7FA5u;  // idem
  }
  return 0;
}

void put_spec(ipc::Writer& w, const ropecheck_spec& s) {
  w.put(s);
  const auto arr = [&](const auto* p, std::int64_t n) {
    if (n > 0) w.put_bytes(p, static_cast<std::size_t>(n) * sizeof(*p));
  };
  arr(s.sections, s.n_sections);
  arr(s.scaling.short_factor, s.scaling.n_short_factor);
  arr(s.scaling.long_factor, s.scaling.n_long_factor);
  arr(s.scaling.freq_factors, s.scaling.n_freq_factors);
}

bool get_spec(ipc::Reader& r, WireSpec& s) {
  if (!r.get(s.c)) return false;
  const auto arr = [&](auto& v, std::int64_t n) {
    using T = typename std::remove_reference_t<decltype(v)>::value_type;
    v.clear();
    if (n < 0 || n > (std::int64_t{1} << 24)) return false;
    const char* p = r.take(static_cast<std::size_t>(n) * sizeof(T));
    if (!p) return false;
    v.resize(static_cast<std::size_t>(n));
    if (n) std::memcpy(v.data(), p, static_cast<std::size_t>(n) * sizeof(T));
    return true;
  };
  if (!arr(s.sections, s.c.n_sections) || !arr(s.short_factor, s.c.scaling.n_short_factor) ||
      !arr(s.long_factor, s.c.scaling.n_long_factor) ||
      !arr(s.freq_factors, s.c.scaling.n_freq_factors))
    return false;
  // NULL for empty arrays, as the header documents.
  const auto ptr = [](const auto& v) { return v.empty() ? nullptr : v.data(); };
  s.c.sections = ptr(s.sections);
  s.c.scaling.short_factor = ptr(s.short_factor);
  s.c.scaling.long_factor = ptr(s.long_factor);
  s.c.scaling.freq_factors = ptr(s.freq_factors);
  return true;
}

namespace {

constexpr std::uint64_t kMaxRequest = std::uint64_t{1} << 34;
constexpr double kNoDeadline = 1e300;
// Inputs and outputs get different canary bytes: a kernel that copies one element past the input
// vector into one element past the output vector would otherwise copy a canary onto an identical
// canary and go unnoticed.
constexpr unsigned char kOutCanary = 0xA5;
constexpr unsigned char kInCanary = 0x5A;
// Canary bytes on each side of every buffer; beyond them sit PROT_NONE pages, so a stray write
// just past the view is *reported* (canary changed) and a wild one far away crashes the worker
// (reported as a crash) — it can never land in the worker's own state unnoticed.
constexpr std::size_t kCanary = 1024;

int element_bytes(int dtype) {
  return dtype == ROPECHECK_DTYPE_F64 ? 8 : dtype == ROPECHECK_DTYPE_F32 ? 4 : 2;
}

// A guarded buffer is kept from call to call (prepare()): a fresh mmap/munmap per buffer and call
// cost more than the plugin call itself, since munmap shoots down TLB entries on every CPU the
// worker ran on (seen: 40% of a validate run's CPU time in those IPIs on a 2-core VM). Calls
// alternate between small and large buffers, so one mapping per size (in pages) is kept and
// reused, up to kMaxMappings of them or kMaxKeptBytes in all (then all are dropped and mapped
// afresh). A reused mapping is refilled with its canary end to end, so each call starts from the
// bytes a new mapping holds.
class Guarded {
 public:
  explicit Guarded(unsigned char canary) : canary_(canary) {
    page_ = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  }
  ~Guarded() { unmap_all(); }
  Guarded(const Guarded&) = delete;
  Guarded& operator=(const Guarded&) = delete;
  // Makes the buffer hold n bytes between canaries and PROT_NONE pages. Returns false when the
  // memory cannot be mapped.
  bool prepare(std::size_t n) {
    const std::size_t need = (kCanary + n + kCanary + page_ - 1) / page_ * page_;
    if (!map_ || need != inner_) {
      Mapping* found = nullptr;
      for (Mapping& m : kept_)
        if (m.inner == need) found = &m;
      if (!found) {
        const std::size_t len = page_ + need + page_;
        if (kept_.size() >= kMaxMappings || kept_bytes_ + len > kMaxKeptBytes) unmap_all();
        void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
          map_ = nullptr;
          return false;
        }
        auto* base = static_cast<unsigned char*>(m);
        mprotect(base, page_, PROT_NONE);
        mprotect(base + page_ + need, page_, PROT_NONE);
        kept_.push_back({base, need, len});
        kept_bytes_ += len;
        found = &kept_.back();
      }
      map_ = found->base;
      inner_ = found->inner;
    }
    n_ = n;
    std::memset(map_ + page_, canary_, inner_);
    return true;
  }
  bool ok() const { return map_ != nullptr; }
  unsigned char* data() const { return map_ + page_ + kCanary; }
  // Byte offset (relative to data()) of the first changed canary byte, or 0 if intact; negative
  // for bytes before the data, >= n for bytes after it.
  bool canary_intact(std::int64_t& where) const {
    const unsigned char* front = map_ + page_;
    for (std::size_t i = 0; i < kCanary; ++i)
      if (front[i] != canary_) {
        where = static_cast<std::int64_t>(i) - static_cast<std::int64_t>(kCanary);
        return false;
      }
    const unsigned char* back = data() + n_;
    const std::size_t back_len = inner_ - kCanary - n_;
    for (std::size_t i = 0; i < back_len; ++i)
      if (back[i] != canary_) {
        where = static_cast<std::int64_t>(n_ + i);
        return false;
      }
    return true;
  }

 private:
  struct Mapping {
    unsigned char* base;  // the front PROT_NONE page
    std::size_t inner;    // bytes between the two PROT_NONE pages
    std::size_t len;      // the whole mapping
  };
  static constexpr std::size_t kMaxMappings = 64;
  static constexpr std::size_t kMaxKeptBytes = std::size_t{64} << 20;
  void unmap_all() {
    for (const Mapping& m : kept_) munmap(m.base, m.len);
    kept_.clear();
    kept_bytes_ = 0;
    map_ = nullptr;
  }
  std::vector<Mapping> kept_;
  std::size_t kept_bytes_ = 0, n_ = 0, page_ = 0, inner_ = 0;
  unsigned char* map_ = nullptr;  // the mapping in use (one of kept_)
  unsigned char canary_;
};

struct View {
  std::int64_t n_tokens, n_heads, ts, hs, hd, min_off, extent;
  // Extent index -> is it an element of the view?
  std::vector<unsigned char> mask() const {
    std::vector<unsigned char> m(static_cast<std::size_t>(extent), 0);
    for (std::int64_t t = 0; t < n_tokens; ++t)
      for (std::int64_t h = 0; h < n_heads; ++h)
        for (std::int64_t j = 0; j < hd; ++j) m[t * ts + h * hs + j - min_off] = 1;
    return m;
  }
  std::string locate(std::int64_t idx) const {
    const std::int64_t off = idx + min_off;
    for (std::int64_t t = 0; t < n_tokens; ++t)
      for (std::int64_t h = 0; h < n_heads; ++h) {
        const std::int64_t j = off - t * ts - h * hs;
        if (j >= 0 && j < hd) {
          std::ostringstream o;
          o << "(token " << t << ", head " << h << ", element " << j << ")";
          return o.str();
        }
      }
    std::ostringstream o;
    o << "at element offset " << off << " (a gap of the strided view, not an element of it)";
    return o.str();
  }
};

bool equal_elem(const unsigned char* a, const unsigned char* b, int eb) {
  return std::memcmp(a, b, static_cast<std::size_t>(eb)) == 0;
}

std::uint64_t load_bits(const unsigned char* p, int eb) {
  std::uint64_t v = 0;
  std::memcpy(&v, p, static_cast<std::size_t>(eb));  // little-endian host
  return v;
}

void fill_sentinel(unsigned char* p, std::int64_t n, int dtype) {
  const int eb = element_bytes(dtype);
  const std::uint64_t s = sentinel_bits(dtype);
  for (std::int64_t i = 0; i < n; ++i) std::memcpy(p + i * eb, &s, static_cast<std::size_t>(eb));
}

std::string canary_text(const char* which, std::int64_t byte, std::int64_t n_bytes, int eb) {
  std::ostringstream o;
  if (byte < 0)
    o << "write " << (-byte + eb - 1) / eb << " element(s) before the start of the " << which
      << " buffer";
  else
    o << "write " << (byte - n_bytes) / eb + 1 << " element(s) past the end of the " << which
      << " buffer";
  return o.str();
}

// The worker stops serving (quit, EOF, a broken pipe, a malformed request): worker_main then
// leaves with _exit, serve() returns or reports it. Thrown, never exits here: serve() runs inside
// the Python interpreter.
struct StopServing {
  bool clean;
};
[[noreturn]] void die_quietly() { throw StopServing{false}; }

void send_or_die(int wfd, ipc::Msg t, std::uint32_t id, const std::vector<char>& p) {
  if (ipc::send(wfd, t, id, p, kNoDeadline) != ipc::IoResult::ok) die_quietly();
}

// Msg::apply's request, read in place (layout in worker.hpp, ApplyHeader). A malformed request
// means the oracle and the worker disagree: the worker leaves.
struct ApplyRequest {
  ApplyHeader h{};
  WireSpec spec;
  int eb = 0;                 // element bytes
  std::size_t pos_bytes = 0;  // int64 or double: 8 bytes per position either way
  std::size_t nbytes = 0;     // the input extent (extent_elems * eb)
  const char* pos = nullptr;
  const char* f64 = nullptr;
  const char* f32 = nullptr;
  const unsigned char* in = nullptr;

  explicit ApplyRequest(const std::vector<char>& req) {
    ipc::Reader r(req);
    if (!r.get(h) || !get_spec(r, spec)) die_quietly();
    eb = element_bytes(h.dtype);
    pos_bytes = static_cast<std::size_t>(h.n_tokens * h.n_axes) * 8;
    pos = r.take(pos_bytes);
    if (h.has_inv_freq) {
      f64 = r.take(static_cast<std::size_t>(h.n_pairs) * 8);
      f32 = r.take(static_cast<std::size_t>(h.n_pairs) * 4);
    }
    nbytes = static_cast<std::size_t>(h.extent_elems) * eb;
    in = reinterpret_cast<const unsigned char*>(r.take(nbytes));
    if (!pos || !in || (h.has_inv_freq && (!f64 || !f32))) die_quietly();
  }
  View view() const {
    return {h.n_tokens,      h.n_heads, h.token_stride, h.head_stride,
            spec.c.head_dim, h.min_off, h.extent_elems};
  }
};

// Every buffer the plugin sees, each a guarded copy: input (and in-place output), out-of-place
// output pre-filled with the sentinel, positions, inv_freq tables. One set for the worker's life,
// prepared afresh for each call (load()).
struct CallBuffers {
  Guarded in{kInCanary}, out{kOutCanary}, pos{kInCanary}, tf64{kInCanary}, tf32{kInCanary};

  void load(const ApplyRequest& q) {
    if (!in.prepare(q.nbytes) || !out.prepare(q.h.inplace ? 0 : q.nbytes) ||
        !pos.prepare(q.pos_bytes) || !tf64.prepare(static_cast<std::size_t>(q.h.n_pairs) * 8) ||
        !tf32.prepare(static_cast<std::size_t>(q.h.n_pairs) * 4))
      die_quietly();
    std::memcpy(in.data(), q.in, q.nbytes);
    std::memcpy(pos.data(), q.pos, q.pos_bytes);
    if (q.h.has_inv_freq) {
      std::memcpy(tf64.data(), q.f64, static_cast<std::size_t>(q.h.n_pairs) * 8);
      std::memcpy(tf32.data(), q.f32, static_cast<std::size_t>(q.h.n_pairs) * 4);
    }
    if (!q.h.inplace) fill_sentinel(out.data(), q.h.extent_elems, q.h.dtype);
  }
  // Where the result is: the output, or the input for an in-place call.
  const unsigned char* result(const ApplyHeader& h) const {
    return h.inplace ? in.data() : out.data();
  }
};

ropecheck_tensor tensor_of(const ApplyHeader& h, const CallBuffers& b) {
  ropecheck_tensor t{};
  t.struct_size = sizeof(ropecheck_tensor);
  t.dtype = h.dtype;
  t.n_tokens = h.n_tokens;
  t.n_heads = h.n_heads;
  t.token_stride = h.token_stride;
  t.head_stride = h.head_stride;
  t.n_axes = h.n_axes;
  if (h.has_real_positions)
    t.real_positions = reinterpret_cast<const double*>(b.pos.data());
  else
    t.positions = reinterpret_cast<const std::int64_t*>(b.pos.data());
  // The view origin sits -min_off elements into the extent.
  unsigned char* in_origin = b.in.data() - h.min_off * element_bytes(h.dtype);
  t.in = in_origin;
  t.out = h.inplace ? in_origin : b.out.data() - h.min_off * element_bytes(h.dtype);
  t.inv_freq_f64 = h.has_inv_freq ? reinterpret_cast<const double*>(b.tf64.data()) : nullptr;
  t.inv_freq_f32 = h.has_inv_freq ? reinterpret_cast<const float*>(b.tf32.data()) : nullptr;
  return t;
}

// What a guard found: the fault and its located description.
struct Finding {
  FaultKind fault = FaultKind::none;
  std::string detail;
  explicit operator bool() const { return fault != FaultKind::none; }
};

// The guards, one per kind of misbehaviour, run most severe first by check_guards: writes
// outside the buffers, writes into gaps of a strided view, writes to inputs, then holes.
class Guards {
 public:
  Guards(const ApplyRequest& q, const CallBuffers& b, int status)
      : q_(q), h_(q.h), b_(b), v_(q.view()), mask_(v_.mask()), status_(status) {}

  Finding canaries() const {
    std::int64_t where = 0;
    const auto n = static_cast<std::int64_t>(q_.nbytes);
    if (!h_.inplace && !b_.out.canary_intact(where))
      return {FaultKind::out_of_bounds_write, canary_text("output", where, n, q_.eb)};
    if (!b_.in.canary_intact(where))
      return {FaultKind::out_of_bounds_write,
              canary_text(h_.inplace ? "in-place" : "input", where, n, q_.eb)};
    if (!b_.pos.canary_intact(where) || !b_.tf64.canary_intact(where) ||
        !b_.tf32.canary_intact(where))
      return {FaultKind::out_of_bounds_write, "write outside the positions or inv_freq arrays"};
    return {};
  }
  // Gaps of a strided view belong to nobody: they must keep what they held.
  Finding gaps() const {
    const std::uint64_t s = sentinel_bits(h_.dtype);
    const unsigned char* result = b_.result(h_);
    const int eb = q_.eb;
    for (std::int64_t i = 0; i < h_.extent_elems; ++i) {
      if (mask_[i]) continue;
      const bool changed = h_.inplace ? !equal_elem(result + i * eb, q_.in + i * eb, eb)
                                      : load_bits(result + i * eb, eb) != s;
      if (changed)
        return {FaultKind::out_of_bounds_write, "write " + v_.locate(i) + " of the output"};
    }
    return {};
  }
  Finding input_unchanged() const {
    if (h_.inplace) return {};
    std::int64_t n_changed = 0, first = -1;
    for (std::int64_t i = 0; i < h_.extent_elems; ++i)
      if (!equal_elem(b_.in.data() + i * q_.eb, q_.in + i * q_.eb, q_.eb)) {
        if (first < 0) first = i;
        ++n_changed;
      }
    if (n_changed == 0) return {};
    return {FaultKind::input_modified, "out-of-place call changed " + std::to_string(n_changed) +
                                           " input element(s), first " + v_.locate(first)};
  }
  Finding positions_unchanged() const {
    if (std::memcmp(b_.pos.data(), q_.pos, q_.pos_bytes) == 0) return {};
    return {FaultKind::input_modified, "the call changed the positions array"};
  }
  // A pass-through element copied from an input that happens to hold the sentinel pattern is
  // written, not a hole: only sentinel outputs over non-sentinel inputs count.
  Finding holes() const {
    if (h_.inplace || status_ != ROPECHECK_OK) return {};
    const std::uint64_t s = sentinel_bits(h_.dtype);
    const unsigned char* result = b_.result(h_);
    const int eb = q_.eb;
    std::int64_t n_holes = 0, first = -1;
    for (std::int64_t i = 0; i < h_.extent_elems; ++i)
      if (mask_[i] && load_bits(result + i * eb, eb) == s && load_bits(q_.in + i * eb, eb) != s) {
        if (first < 0) first = i;
        ++n_holes;
      }
    if (n_holes == 0) return {};
    return {
        FaultKind::unwritten_output,
        std::to_string(n_holes) + " output element(s) left unwritten, first " + v_.locate(first)};
  }

 private:
  const ApplyRequest& q_;
  const ApplyHeader& h_;
  const CallBuffers& b_;
  View v_;
  std::vector<unsigned char> mask_;  // extent index -> is it an element of the view?
  int status_;
};

Finding check_guards(const Guards& g) {
  if (Finding f = g.canaries()) return f;
  if (Finding f = g.gaps()) return f;
  if (Finding f = g.input_unchanged()) return f;
  if (Finding f = g.positions_unchanged()) return f;
  return g.holes();
}

using ErrorHook = std::function<std::string()>;

void handle_apply(int wfd, std::uint32_t id, const ropecheck_plugin* desc,
                  const std::vector<char>& req, CallBuffers& b, const ErrorHook& take_error,
                  bool backward) {
  const ApplyRequest q(req);
  b.load(q);
  const ropecheck_tensor t = tensor_of(q.h, b);
  const int status = backward ? desc->apply_backward(&q.spec.c, &t, desc->user)
                              : desc->apply(&q.spec.c, &t, desc->user);
  Finding f;
  if (status != ROPECHECK_OK && status != ROPECHECK_UNSUPPORTED && take_error)
    if (std::string why = take_error(); !why.empty()) f = {FaultKind::kernel_error, std::move(why)};
  if (!f) f = check_guards(Guards(q, b, status));
  if (f.detail.size() > kMaxDetail) f.detail.resize(kMaxDetail);  // the host accepts no more

  ipc::Writer w;
  ApplyReply rep{status, static_cast<std::int32_t>(f.fault), f.detail.size(), q.nbytes};
  w.put(rep);
  w.put_bytes(f.detail.data(), f.detail.size());
  w.put_bytes(b.result(q.h), q.nbytes);
  send_or_die(wfd, ipc::Msg::apply, id, w.buf);
}

void handle_supports(int wfd, std::uint32_t id, const ropecheck_plugin* d,
                     const std::vector<char>& req) {
  ipc::Reader r(req);
  WireSpec s;
  std::int32_t dtype = 0;
  if (!get_spec(r, s) || !r.get(dtype)) die_quietly();
  ipc::Writer out;
  out.put<std::int32_t>(d->supports(&s.c, dtype, d->user) ? 1 : 0);
  send_or_die(wfd, ipc::Msg::supports, id, out.buf);
}

[[noreturn]] void load_error(int wfd, const std::string& m) {
  ipc::Writer w;
  w.put_string(m);
  if (ipc::send(wfd, ipc::Msg::load_error, 0, w.buf, kNoDeadline) != ipc::IoResult::ok) _exit(0);
  _exit(0);
}

// dlopen + entry point + the descriptor's sanity; any failure is a load_error message.
// Requests until quit (clean) or until the pipe ends.
void serve_requests(int rfd, int wfd, const ropecheck_plugin* d, const ErrorHook& take_error) {
  std::vector<char> req;
  CallBuffers buffers;
  for (;;) {
    ipc::Msg t{};
    std::uint32_t id = 0;
    const ipc::IoResult r = ipc::recv(rfd, t, id, req, kMaxRequest, kNoDeadline);
    if (r == ipc::IoResult::eof || (r == ipc::IoResult::ok && t == ipc::Msg::quit))
      throw StopServing{true};
    if (r != ipc::IoResult::ok) die_quietly();
    if (t == ipc::Msg::supports)
      handle_supports(wfd, id, d, req);
    else if (t == ipc::Msg::apply)
      handle_apply(wfd, id, d, req, buffers, take_error, false);
    else if (t == ipc::Msg::apply_backward && d->abi_version >= 3 && d->apply_backward)
      handle_apply(wfd, id, d, req, buffers, take_error, true);
    else
      die_quietly();
  }
}

void limit_address_space(std::uint64_t limit) {
  if (limit == 0) return;
  unsigned long long pages = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%llu", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  const std::uint64_t now = pages * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  const std::uint64_t cap = now + limit + limit / 4;
  rlimit as{cap, cap};
  setrlimit(RLIMIT_AS, &as);
}

const ropecheck_plugin* load_plugin(int wfd, const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) load_error(wfd, std::string("cannot load plugin: ") + dlerror());
  auto entry =
      reinterpret_cast<ropecheck_plugin_entry_fn>(dlsym(handle, ROPECHECK_PLUGIN_ENTRY_SYMBOL));
  if (!entry)
    load_error(wfd, "'" + path +
                        "' does not export " ROPECHECK_PLUGIN_ENTRY_SYMBOL
                        " (a ropecheck plugin defines it with ROPECHECK_PLUGIN_EXPORT, see "
                        "ropecheck/plugin.h)");
  const ropecheck_plugin* d = entry(ROPECHECK_PLUGIN_ABI_VERSION);
  if (!d) load_error(wfd, ROPECHECK_PLUGIN_ENTRY_SYMBOL "() returned NULL");
  // ABI 2 descriptors have the same layout; their reserved bytes (0) read as ABI 3's defaults.
  if (d->abi_version < ROPECHECK_PLUGIN_ABI_VERSION_MIN ||
      d->abi_version > ROPECHECK_PLUGIN_ABI_VERSION)
    load_error(wfd, "plugin was built for ABI version " + std::to_string(d->abi_version) +
                        "; this ropecheck speaks ABI version " +
                        std::to_string(ROPECHECK_PLUGIN_ABI_VERSION) + " (and loads ABI " +
                        std::to_string(ROPECHECK_PLUGIN_ABI_VERSION_MIN) +
                        " plugins); rebuild it against this ropecheck/plugin.h");
  if (d->struct_size < sizeof(ropecheck_plugin))
    load_error(wfd, "descriptor struct_size " + std::to_string(d->struct_size) + " < " +
                        std::to_string(sizeof(ropecheck_plugin)) + " (header mismatch)");
  if (!d->apply) load_error(wfd, "descriptor has no apply function");
  if (!d->name || !*d->name) load_error(wfd, "descriptor has no name");
  if (d->n_head_dims < 0 || (d->n_head_dims > 0 && !d->head_dims) || d->n_head_dims > 100000)
    load_error(wfd, "descriptor head_dims/n_head_dims inconsistent");
  return d;
}

// Msg::hello: the descriptor, field by field (read back by plugin_kernel.cpp,
// read_descriptor_fields).
void send_hello(int wfd, const ropecheck_plugin* d) {
  ipc::Writer w;
  w.put<std::uint32_t>(d->abi_version);
  w.put_string(std::string(d->name, strnlen(d->name, 256)));
  w.put_string(d->description ? std::string(d->description, strnlen(d->description, 4096)) : "");
  w.put<std::uint32_t>(d->dtypes);
  w.put<std::uint32_t>(d->layouts);
  w.put<std::int32_t>(d->supports ? 1 : 0);
  w.put<std::int32_t>(d->n_head_dims);
  for (int i = 0; i < d->n_head_dims; ++i) w.put<std::int64_t>(d->head_dims[i]);
  for (int i = 0; i < ROPECHECK_DTYPE_COUNT; ++i) w.put(d->policies[i]);
  w.put<std::uint32_t>(d->scalings);
  w.put<std::uint32_t>(d->flags);
  w.put<std::int64_t>(d->min_position);
  w.put<std::int64_t>(d->max_position);
  w.put<std::int32_t>(d->abi_version >= 3 && d->apply_backward ? 1 : 0);
  send_or_die(wfd, ipc::Msg::hello, 0, w.buf);
}

// Closes every descriptor but 0-2, rfd and wfd: the worker inherited all of the host's (a forked
// child keeps them; O_CLOEXEC acts only at exec), among them the pipes of validate's runner
// processes, which a plugin writing on every descriptor would otherwise corrupt.
void keep_only(int rfd, int wfd) {
  const int lo = std::min(rfd, wfd), hi = std::max(rfd, wfd);
  const auto close_from_to = [](int a, int b) {  // [a, b]
    if (a > b) return;
    if (syscall(SYS_close_range, static_cast<unsigned>(a), static_cast<unsigned>(b), 0) == 0)
      return;
    for (long fd = a; fd <= std::min<long>(b, 65535); ++fd) close(static_cast<int>(fd));
  };
  close_from_to(3, lo - 1);
  close_from_to(lo + 1, hi - 1);
  close_from_to(hi + 1, std::numeric_limits<int>::max());
}

// RLIMIT_AS at the size the worker has now plus the limit and a quarter of it: the host's watch
// of the resident size (limit) names out_of_memory first when the memory is used; this is the
// backstop when it is reserved faster than the watch looks. Not under AddressSanitizer, whose
// allocator and shadow reserve terabytes at start and must grow inside them.
void limit_memory(std::uint64_t limit) {
#if defined(__SANITIZE_ADDRESS__)
  (void)limit;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  (void)limit;
#else
  limit_address_space(limit);
#endif
#else
  limit_address_space(limit);
#endif
}

}  // namespace

// The worker is the forked child's whole life: it leaves only through _exit (die_quietly,
// load_error), never by returning into the oracle's code or through std::exit (which would run
// the oracle's atexit handlers and flush its stdio buffers a second time).
[[noreturn]] void worker_main(int rfd, int wfd, int logfd, const std::string& path,
                              std::uint64_t memory_limit) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // an orphaned hung worker must not outlive the oracle
  setpgid(0, 0);
  rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);  // crashes are expected here; don't spend seconds on cores
  // Whatever the plugin prints must not corrupt the oracle's tables or JSON on stdout, nor flood
  // its stderr: both go to the pipe the host drains.
  dup2(logfd, STDOUT_FILENO);
  dup2(logfd, STDERR_FILENO);
  keep_only(rfd, wfd);
  signal(SIGPIPE, SIG_DFL);
  limit_memory(memory_limit);

  const ropecheck_plugin* d = load_plugin(wfd, path);
  try {
    send_hello(wfd, d);
    serve_requests(rfd, wfd, d, {});
  } catch (const StopServing&) {
  }
  _exit(0);
}

void serve(int rfd, int wfd, const ropecheck_plugin& desc,
           const std::function<std::string()>& take_error) {
  try {
    send_hello(wfd, &desc);
    serve_requests(rfd, wfd, &desc, take_error);
  } catch (const StopServing& s) {
    if (!s.clean) throw std::runtime_error("ropecheck worker: the pipe to ropecheck broke");
  }
}

}  // namespace ropecheck::plugin
