#include "worker.hpp"

#include <dlfcn.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <sstream>
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

class Guarded {
 public:
  Guarded(std::size_t n, unsigned char canary) : n_(n), canary_(canary) {
    page_ = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    inner_ = (kCanary + n + kCanary + page_ - 1) / page_ * page_;
    len_ = page_ + inner_ + page_;
    void* m = mmap(nullptr, len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      map_ = nullptr;
      return;
    }
    map_ = static_cast<unsigned char*>(m);
    mprotect(map_, page_, PROT_NONE);
    mprotect(map_ + page_ + inner_, page_, PROT_NONE);
    std::memset(map_ + page_, canary_, inner_);
  }
  ~Guarded() {
    if (map_) munmap(map_, len_);
  }
  Guarded(const Guarded&) = delete;
  Guarded& operator=(const Guarded&) = delete;
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
  std::size_t n_, page_ = 0, inner_ = 0, len_ = 0;
  unsigned char* map_ = nullptr;
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

[[noreturn]] void die_quietly() { _exit(0); }

void send_or_die(int wfd, ipc::Msg t, const std::vector<char>& p) {
  if (ipc::send(wfd, t, p, kNoDeadline) != ipc::IoResult::ok) die_quietly();
}

void handle_apply(int wfd, const ropecheck_plugin* desc, const std::vector<char>& req) {
  ipc::Reader r(req);
  ApplyHeader h{};
  WireSpec ws;
  if (!r.get(h) || !get_spec(r, ws)) die_quietly();
  const int eb = element_bytes(h.dtype);
  // int64 or double: 8 bytes per position either way.
  const std::size_t pos_bytes = static_cast<std::size_t>(h.n_tokens * h.n_axes) * 8;
  const auto* pos_src = r.take(pos_bytes);
  const char* f64 = nullptr;
  const char* f32 = nullptr;
  if (h.has_inv_freq) {
    f64 = r.take(static_cast<std::size_t>(h.n_pairs) * 8);
    f32 = r.take(static_cast<std::size_t>(h.n_pairs) * 4);
  }
  const std::size_t nbytes = static_cast<std::size_t>(h.extent_elems) * eb;
  const auto* in_src = reinterpret_cast<const unsigned char*>(r.take(nbytes));
  if (!pos_src || !in_src || (h.has_inv_freq && (!f64 || !f32))) die_quietly();

  const View v{h.n_tokens,    h.n_heads, h.token_stride, h.head_stride,
               ws.c.head_dim, h.min_off, h.extent_elems};
  Guarded in(nbytes, kInCanary), out(h.inplace ? 0 : nbytes, kOutCanary);
  Guarded pos(pos_bytes, kInCanary);
  Guarded tf64(static_cast<std::size_t>(h.n_pairs) * 8, kInCanary),
      tf32(static_cast<std::size_t>(h.n_pairs) * 4, kInCanary);
  if (!in.ok() || !out.ok() || !pos.ok() || !tf64.ok() || !tf32.ok()) die_quietly();
  std::memcpy(in.data(), in_src, nbytes);
  std::memcpy(pos.data(), pos_src, pos_bytes);
  if (h.has_inv_freq) {
    std::memcpy(tf64.data(), f64, static_cast<std::size_t>(h.n_pairs) * 8);
    std::memcpy(tf32.data(), f32, static_cast<std::size_t>(h.n_pairs) * 4);
  }
  if (!h.inplace) fill_sentinel(out.data(), h.extent_elems, h.dtype);

  ropecheck_tensor t{};
  t.struct_size = sizeof(ropecheck_tensor);
  t.dtype = h.dtype;
  t.n_tokens = h.n_tokens;
  t.n_heads = h.n_heads;
  t.token_stride = h.token_stride;
  t.head_stride = h.head_stride;
  t.n_axes = h.n_axes;
  if (h.has_real_positions)
    t.real_positions = reinterpret_cast<const double*>(pos.data());
  else
    t.positions = reinterpret_cast<const std::int64_t*>(pos.data());
  // The view origin sits -min_off elements into the extent.
  unsigned char* in_origin = in.data() - h.min_off * eb;
  t.in = in_origin;
  t.out = h.inplace ? in_origin : out.data() - h.min_off * eb;
  t.inv_freq_f64 = h.has_inv_freq ? reinterpret_cast<const double*>(tf64.data()) : nullptr;
  t.inv_freq_f32 = h.has_inv_freq ? reinterpret_cast<const float*>(tf32.data()) : nullptr;

  const int status = desc->apply(&ws.c, &t, desc->user);

  // Guards, most severe first: writes outside the views, then writes to inputs, then holes.
  FaultKind fault = FaultKind::none;
  std::string detail;
  std::int64_t where = 0;
  const auto mask = v.mask();
  const unsigned char* result = h.inplace ? in.data() : out.data();
  if (!h.inplace && !out.canary_intact(where)) {
    fault = FaultKind::out_of_bounds_write;
    detail = canary_text("output", where, static_cast<std::int64_t>(nbytes), eb);
  } else if (!in.canary_intact(where)) {
    fault = FaultKind::out_of_bounds_write;
    detail =
        canary_text(h.inplace ? "in-place" : "input", where, static_cast<std::int64_t>(nbytes), eb);
  } else if (!pos.canary_intact(where) || !tf64.canary_intact(where) ||
             !tf32.canary_intact(where)) {
    fault = FaultKind::out_of_bounds_write;
    detail = "write outside the positions or inv_freq arrays";
  }
  if (fault == FaultKind::none) {
    // Gaps of a strided view belong to nobody: they must keep what they held.
    const std::uint64_t s = sentinel_bits(h.dtype);
    for (std::int64_t i = 0; i < h.extent_elems && fault == FaultKind::none; ++i) {
      if (mask[i]) continue;
      const bool changed = h.inplace ? !equal_elem(result + i * eb, in_src + i * eb, eb)
                                     : load_bits(result + i * eb, eb) != s;
      if (changed) {
        fault = FaultKind::out_of_bounds_write;
        detail = "write " + v.locate(i) + " of the output";
      }
    }
  }
  if (fault == FaultKind::none && !h.inplace) {
    std::int64_t n_changed = 0, first = -1;
    for (std::int64_t i = 0; i < h.extent_elems; ++i)
      if (!equal_elem(in.data() + i * eb, in_src + i * eb, eb)) {
        if (first < 0) first = i;
        ++n_changed;
      }
    if (n_changed) {
      fault = FaultKind::input_modified;
      detail = "out-of-place call changed " + std::to_string(n_changed) +
               " input element(s), first " + v.locate(first);
    }
  }
  if (fault == FaultKind::none && std::memcmp(pos.data(), pos_src, pos_bytes) != 0) {
    fault = FaultKind::input_modified;
    detail = "the call changed the positions array";
  }
  if (fault == FaultKind::none && !h.inplace && status == ROPECHECK_OK) {
    // A pass-through element copied from an input that happens to hold the sentinel pattern is
    // written, not a hole: only sentinel outputs over non-sentinel inputs count.
    const std::uint64_t s = sentinel_bits(h.dtype);
    std::int64_t n_holes = 0, first = -1;
    for (std::int64_t i = 0; i < h.extent_elems; ++i)
      if (mask[i] && load_bits(result + i * eb, eb) == s && load_bits(in_src + i * eb, eb) != s) {
        if (first < 0) first = i;
        ++n_holes;
      }
    if (n_holes) {
      fault = FaultKind::unwritten_output;
      detail =
          std::to_string(n_holes) + " output element(s) left unwritten, first " + v.locate(first);
    }
  }

  ipc::Writer w;
  ApplyReply rep{status, static_cast<std::int32_t>(fault), detail.size(), nbytes};
  w.put(rep);
  w.put_bytes(detail.data(), detail.size());
  w.put_bytes(result, nbytes);
  send_or_die(wfd, ipc::Msg::apply, w.buf);
}

}  // namespace

[[noreturn]] void worker_main(int rfd, int wfd, const std::string& path) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // an orphaned hung worker must not outlive the oracle
  rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);  // crashes are expected here; don't spend seconds on cores
  // Whatever the plugin prints must not corrupt the oracle's tables or JSON on stdout.
  dup2(STDERR_FILENO, STDOUT_FILENO);
  signal(SIGPIPE, SIG_DFL);

  auto load_error = [&](const std::string& m) {
    ipc::Writer w;
    w.put_string(m);
    send_or_die(wfd, ipc::Msg::load_error, w.buf);
    _exit(0);
  };

  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) load_error(std::string("cannot load plugin: ") + dlerror());
  auto entry =
      reinterpret_cast<ropecheck_plugin_entry_fn>(dlsym(handle, ROPECHECK_PLUGIN_ENTRY_SYMBOL));
  if (!entry)
    load_error(
        "'" + path +
        "' does not export " ROPECHECK_PLUGIN_ENTRY_SYMBOL
        " (a ropecheck plugin defines it with ROPECHECK_PLUGIN_EXPORT, see ropecheck/plugin.h)");
  const ropecheck_plugin* d = entry(ROPECHECK_PLUGIN_ABI_VERSION);
  if (!d) load_error(ROPECHECK_PLUGIN_ENTRY_SYMBOL "() returned NULL");
  // ABI 2 descriptors have the same layout; their reserved bytes (0) read as ABI 3's defaults.
  if (d->abi_version < ROPECHECK_PLUGIN_ABI_VERSION_MIN ||
      d->abi_version > ROPECHECK_PLUGIN_ABI_VERSION)
    load_error("plugin was built for ABI version " + std::to_string(d->abi_version) +
               "; this ropecheck speaks ABI version " +
               std::to_string(ROPECHECK_PLUGIN_ABI_VERSION) + " (and loads ABI " +
               std::to_string(ROPECHECK_PLUGIN_ABI_VERSION_MIN) +
               " plugins); rebuild it against this ropecheck/plugin.h");
  if (d->struct_size < sizeof(ropecheck_plugin))
    load_error("descriptor struct_size " + std::to_string(d->struct_size) + " < " +
               std::to_string(sizeof(ropecheck_plugin)) + " (header mismatch)");
  if (!d->apply) load_error("descriptor has no apply function");
  if (!d->name || !*d->name) load_error("descriptor has no name");
  if (d->n_head_dims < 0 || (d->n_head_dims > 0 && !d->head_dims) || d->n_head_dims > 100000)
    load_error("descriptor head_dims/n_head_dims inconsistent");

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
  send_or_die(wfd, ipc::Msg::hello, w.buf);

  std::vector<char> req;
  for (;;) {
    ipc::Msg t{};
    if (ipc::recv(rfd, t, req, kMaxRequest, kNoDeadline) != ipc::IoResult::ok) die_quietly();
    if (t == ipc::Msg::quit) die_quietly();
    if (t == ipc::Msg::supports) {
      ipc::Reader r(req);
      WireSpec s;
      std::int32_t dtype = 0;
      if (!get_spec(r, s) || !r.get(dtype)) die_quietly();
      ipc::Writer out;
      out.put<std::int32_t>(d->supports(&s.c, dtype, d->user) ? 1 : 0);
      send_or_die(wfd, ipc::Msg::supports, out.buf);
    } else if (t == ipc::Msg::apply) {
      handle_apply(wfd, d, req);
    } else {
      die_quietly();
    }
  }
}

}  // namespace ropecheck::plugin
