// The streamed, parallel scan of `check` (see scan.hpp for the map and the contract).
#include "ropecheck/scan/scan.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

namespace ropecheck::scan {

namespace ref = ropecheck::reference;
namespace tio = ropecheck::tensorio;

Geometry geometry(const std::vector<std::int64_t>& s, const std::string& name,
                  const std::string& tl) {
  Geometry g;
  auto need = [&](std::size_t r) {
    if (s.size() != r)
      throw ScanError("tensor '" + name + "' has rank " + std::to_string(s.size()) +
                      ", tensor_layout '" + tl + "' needs rank " + std::to_string(r));
  };
  if (tl == "td") {
    need(2), g.T = s[0], g.D = s[1];
  } else if (tl == "thd") {
    need(3), g.T = s[0], g.H = s[1], g.D = s[2];
  } else if (tl == "bhtd") {
    need(4), g.B = s[0], g.H = s[1], g.T = s[2], g.D = s[3];
  } else if (tl == "bthd") {
    need(4), g.B = s[0], g.T = s[1], g.H = s[2], g.D = s[3];
  } else {
    throw ScanError("tensor_layout must be td, thd, bhtd or bthd (got '" + tl + "')");
  }
  g.sh = g.D;
  g.st = g.H * g.D;
  if (tl == "bhtd") g.st = g.D, g.sh = g.T * g.D;
  g.sb = g.T * g.H * g.D;
  return g;
}

std::string PairResult::coverage() const {
  if (summary.vectors > 0) return "";
  return verify::nothing_checked(
      vectors == 0 ? name + " holds no head vector (a dimension of its shape is 0)"
                   : "every one of the " + std::to_string(vectors) + " head vector(s) of " + name +
                         " has a non-finite input");
}

std::vector<std::string> PairResult::located() const {
  std::vector<std::string> l;
  if (summary.vectors == 0) l.push_back("FAIL " + coverage());
  for (const auto& f : summary.findings) l.push_back("FAIL " + name + " " + f.message());
  if (!summary.hint.empty()) l.push_back("hint (" + name + "): " + summary.hint);
  return l;
}

namespace {

// The positions tensor: [T] or [B, T] (every axis at that position), or one per axis, axis-major
// as HF's position_ids: [A, T] or [A, B, T]. With A == 1 the per-axis shapes are the 1-D ones, so
// they are only taken for multi-axis specs.
class PositionIndex {
 public:
  PositionIndex(const tio::TensorRef& pos, const Geometry& g, std::int64_t n_axes)
      : pos_(pos), g_(g) {
    if (pos.type != tio::ElemType::i64 && pos.type != tio::ElemType::i32)
      throw ScanError("positions must be int64 or int32, is " + pos.type_name);
    const auto& ps = pos.shape;
    const std::int64_t A = n_axes, B = g.B, T = g.T;
    axes_t_ = A > 1 && ps.size() == 2 && ps[0] == A && ps[1] == T;
    axes_bt_ = A > 1 && ps.size() == 3 && ps[0] == A && ps[1] == B && ps[2] == T;
    per_batch_ = !axes_t_ && ps.size() == 2 && ps[0] == B && ps[1] == T;
    if (!(ps.size() == 1 && ps[0] == T) && !per_batch_ && !axes_t_ && !axes_bt_)
      throw ScanError("positions must have shape [" + std::to_string(T) + "] or [" +
                      std::to_string(B) + ", " + std::to_string(T) + "]" +
                      (A > 1 ? " (or, one per axis, [" + std::to_string(A) + ", " +
                                   std::to_string(T) + "] or [" + std::to_string(A) + ", " +
                                   std::to_string(B) + ", " + std::to_string(T) + "])"
                             : std::string()));
    axes_ = axes_t_ || axes_bt_ ? A : 1;
  }
  // Positions per token: one per axis, or the one of every axis.
  std::int64_t axes() const { return axes_; }
  // The positions of tokens [t0, t1) of batch row b, axis-major: out[a * (t1 - t0) + t - t0].
  void read(std::int64_t b, std::int64_t t0, std::int64_t t1, std::vector<std::int64_t>& out,
            std::vector<unsigned char>& bytes) const {
    const std::int64_t n = t1 - t0, eb = tio::elem_bytes(pos_.type);
    out.resize(static_cast<std::size_t>(axes_ * n));
    bytes.resize(static_cast<std::size_t>(n * eb));
    for (std::int64_t a = 0; a < axes_; ++a) {
      pos_.read(start(a, b) + t0, n, bytes.data());
      for (std::int64_t i = 0; i < n; ++i)
        out[a * n + i] = tio::decode_int(pos_.type, bytes.data() + i * eb);
    }
  }

 private:
  // The element of token 0 of batch row b on axis a.
  std::int64_t start(std::int64_t a, std::int64_t b) const {
    if (axes_t_) return a * g_.T;
    if (axes_bt_) return (a * g_.B + b) * g_.T;
    return per_batch_ ? b * g_.T : 0;
  }
  const tio::TensorRef& pos_;
  const Geometry& g_;
  std::int64_t axes_ = 1;
  bool axes_t_ = false, axes_bt_ = false, per_batch_ = false;
};

// Chunk i covers tokens [t0, t1) x heads [h0, h1) of batch row b; chunks in index order visit the
// vectors in the order (batch, token, head).
struct Chunk {
  std::int64_t b, t0, t1, h0, h1;
};

class Chunking {
 public:
  Chunking(const Geometry& g, std::int64_t chunk_vectors) : g_(g) {
    if (g.H <= chunk_vectors) {
      tokens_ = std::max<std::int64_t>(1, chunk_vectors / std::max<std::int64_t>(1, g.H));
      heads_ = std::max<std::int64_t>(1, g.H);
    } else {  // one token is bigger than a chunk: split its heads
      tokens_ = 1;
      heads_ = chunk_vectors;
    }
    hsplit_ = (g.H + heads_ - 1) / heads_;
    per_row_ = (g.T + tokens_ - 1) / tokens_ * hsplit_;
    count_ = g.B * per_row_;
  }
  std::int64_t size() const { return count_; }
  Chunk operator[](std::int64_t i) const {
    const std::int64_t r = i % per_row_, tc = r / hsplit_, hc = r % hsplit_;
    return {i / per_row_, tc * tokens_, std::min(g_.T, (tc + 1) * tokens_), hc * heads_,
            std::min(g_.H, (hc + 1) * heads_)};
  }

 private:
  const Geometry& g_;
  std::int64_t tokens_ = 1, heads_ = 1, hsplit_ = 1, per_row_ = 0, count_ = 0;
};

// Element strides of a chunk as read by read_chunk.
struct Local {
  std::int64_t st, sh;
};
// One pread per contiguous run: the whole chunk when a token's heads are contiguous and the
// chunk has them all (td, thd, bthd), else one run per token (heads split) or per head (bhtd:
// a head's tokens are contiguous).
Local read_chunk(const tio::TensorRef& x, const tio::TensorRef& y, const Geometry& g,
                 const Chunk& c, std::vector<unsigned char>& xb, std::vector<unsigned char>& yb) {
  const std::int64_t nt = c.t1 - c.t0, nh = c.h1 - c.h0, D = g.D;
  const std::int64_t eb = tio::elem_bytes(x.type);
  const auto bytes = static_cast<std::size_t>(nt * nh * D * eb);
  xb.resize(bytes);
  yb.resize(bytes);
  auto run = [&](std::int64_t first, std::int64_t count, std::int64_t local) {
    x.read(first, count, xb.data() + local * eb);
    y.read(first, count, yb.data() + local * eb);
  };
  if (g.sh == D) {  // heads of a token contiguous
    if (nh == g.H && g.st == g.H * D) {
      run(g.offset(c.b, c.t0, 0), nt * nh * D, 0);
    } else {
      for (std::int64_t t = c.t0; t < c.t1; ++t)
        run(g.offset(c.b, t, c.h0), nh * D, (t - c.t0) * nh * D);
    }
    return {nh * D, D};
  }
  for (std::int64_t h = c.h0; h < c.h1; ++h)  // tokens of a head contiguous (g.st == D)
    run(g.offset(c.b, c.t0, h), nt * D, (h - c.h0) * nt * D);
  return {D, nt * D};
}

struct ChunkResult {
  std::int64_t vectors = 0, skipped_nonfinite = 0;
  verify::Summary summary;
};

// Folds the result of the chunks after `into`'s into it (verify::Summary::append: the same
// figures as one pass in order).
void merge_later(PairResult& into, const ChunkResult& later) {
  into.vectors += later.vectors;
  into.skipped_nonfinite += later.skipped_nonfinite;
  into.summary.append(later.summary);
}

// One thread's reusable buffers.
struct Scratch {
  std::vector<unsigned char> x, y, pos_bytes;
  std::vector<std::int64_t> pos;
  std::vector<double> xv, yv;
  ref::Rotation rot;
  ref::ExactVector exact;
  std::vector<bounds::PairBound> bounds;
  verify::VectorCheck check;
};

// Everything a chunk needs, read-only and shared by the workers.
class ChunkChecker {
 public:
  ChunkChecker(const tio::TensorRef& x, const tio::TensorRef& y, const Geometry& g,
               const PositionIndex& pos, const verify::PairChecker& checker,
               const ref::Oracle& oracle, std::size_t keep, bool negate)
      : x_(x),
        y_(y),
        g_(g),
        pos_(pos),
        checker_(checker),
        oracle_(oracle),
        keep_(keep),
        negate_(negate) {}

  ChunkResult run(const Chunk& c, Scratch& s) const {
    const Local l = read_chunk(x_, y_, g_, c, s.x, s.y);
    pos_.read(c.b, c.t0, c.t1, s.pos, s.pos_bytes);
    const std::int64_t nt = c.t1 - c.t0, D = g_.D, eb = tio::elem_bytes(x_.type);
    s.xv.resize(static_cast<std::size_t>(D));
    s.yv.resize(static_cast<std::size_t>(D));
    ChunkResult r;
    r.summary.keep = keep_;
    verify::Location at;
    at.batch = g_.B > 1 ? c.b : -1;
    at.position.resize(static_cast<std::size_t>(pos_.axes()));
    for (std::int64_t t = c.t0; t < c.t1; ++t) {
      at.token = t;
      for (std::int64_t a = 0; a < pos_.axes(); ++a) {
        const std::int64_t m = s.pos[a * nt + t - c.t0];
        // |m| < 2^62 for the oracle: INT64_MIN is outside its contract either way.
        at.position[a] = negate_ && m != std::numeric_limits<std::int64_t>::min() ? -m : m;
      }
      // Every head of the token shares its cos/sin and its pair bounds.
      oracle_.at(at.position, s.rot);
      checker_.bounds_at(at.position, s.bounds);
      for (std::int64_t h = c.h0; h < c.h1; ++h) {
        ++r.vectors;
        const std::int64_t off = ((t - c.t0) * l.st + (h - c.h0) * l.sh) * eb;
        for (std::int64_t j = 0; j < D; ++j) {
          s.xv[j] = tio::decode(x_.type, s.x.data() + off + j * eb);
          s.yv[j] = tio::decode(y_.type, s.y.data() + off + j * eb);
        }
        // No relative error exists for a non-finite input.
        if (!std::all_of(s.xv.begin(), s.xv.end(), [](double e) { return std::isfinite(e); })) {
          ++r.skipped_nonfinite;
          continue;
        }
        at.head = h;
        s.rot.apply(s.xv.data(), s.exact);
        verify::check_vector(s.check, checker_, s.bounds, s.xv.data(), s.yv.data(), s.exact);
        verify::add_vector(r.summary, checker_, s.check, at, s.xv.data(), s.yv.data(), s.exact);
      }
    }
    return r;
  }

 private:
  const tio::TensorRef& x_;
  const tio::TensorRef& y_;
  const Geometry& g_;
  const PositionIndex& pos_;
  const verify::PairChecker& checker_;
  const ref::Oracle& oracle_;
  std::size_t keep_;
  bool negate_;
};

// The workers: an atomic counter hands out chunks; a finished chunk waits in `pending_` until
// every earlier one is merged. A worker starts chunk i only when i < merged + window, so a slow
// chunk holds back at most `window` finished ones (no deadlock: the chunk being waited for was
// handed out earlier, and its worker never waits for it).
class Pool {
 public:
  Pool(const ChunkChecker& check, const Chunking& chunks, PairResult& total, std::int64_t window)
      : check_(check), chunks_(chunks), total_(total), window_(window) {}

  void worker() {
    Scratch s;
    for (;;) {
      const std::int64_t i = next_++;
      if (i >= chunks_.size()) return;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || i < merged_ + window_; });
        if (stop_) return;
      }
      ChunkResult r;
      try {
        r = check_.run(chunks_[i], s);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_) error_ = std::current_exception();
        stop_ = true;
        cv_.notify_all();
        return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      pending_.emplace(i, std::move(r));
      while (!pending_.empty() && pending_.begin()->first == merged_) {
        merge_later(total_, pending_.begin()->second);
        pending_.erase(pending_.begin());
        ++merged_;
      }
      cv_.notify_all();
    }
  }
  void rethrow() const {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  const ChunkChecker& check_;
  const Chunking& chunks_;
  PairResult& total_;
  const std::int64_t window_;
  std::atomic<std::int64_t> next_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::int64_t merged_ = 0;  // chunks [0, merged_) are in total_
  std::map<std::int64_t, ChunkResult> pending_;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace

verify::RecordedVectors recorded_vectors(const PairResult& result, const tio::TensorRef& x,
                                         const tio::TensorRef& y, const tio::TensorRef& positions,
                                         const std::string& tensor_layout,
                                         const verify::PairChecker& checker, bool backward) {
  verify::RecordedVectors r;
  r.spec = checker.spec();
  r.dtype = checker.dtype();
  r.backward = backward;
  r.vectors = result.summary.vectors;
  const Geometry g = geometry(x.shape, x.name, tensor_layout);
  const std::int64_t axes_of_spec = r.spec.n_axes();
  // Decodes one vector at (b, t, h) of a read chunk; false: a non-finite input (not checked).
  const auto negated = [backward](std::vector<std::int64_t>& p) {
    if (backward)
      for (auto& m : p)
        if (m != std::numeric_limits<std::int64_t>::min()) m = -m;
  };
  r.for_each = [&x, &y, &positions, g, axes_of_spec, negated](const verify::VectorVisitor& f) {
    const PositionIndex pos(positions, g, axes_of_spec);
    const Chunking chunks(g, 1024);
    std::vector<unsigned char> xb, yb, pb;
    std::vector<std::int64_t> ps, at(static_cast<std::size_t>(pos.axes()));
    std::vector<double> xv(static_cast<std::size_t>(g.D)), yv(xv.size());
    const std::int64_t eb = tio::elem_bytes(x.type);
    for (std::int64_t i = 0; i < chunks.size(); ++i) {
      const Chunk c = chunks[i];
      const Local l = read_chunk(x, y, g, c, xb, yb);
      pos.read(c.b, c.t0, c.t1, ps, pb);
      const std::int64_t nt = c.t1 - c.t0;
      for (std::int64_t t = c.t0; t < c.t1; ++t) {
        for (std::int64_t a = 0; a < pos.axes(); ++a) at[a] = ps[a * nt + t - c.t0];
        negated(at);
        for (std::int64_t h = c.h0; h < c.h1; ++h) {
          const std::int64_t off = ((t - c.t0) * l.st + (h - c.h0) * l.sh) * eb;
          bool finite = true;
          for (std::int64_t j = 0; j < g.D; ++j) {
            xv[j] = tio::decode(x.type, xb.data() + off + j * eb);
            yv[j] = tio::decode(y.type, yb.data() + off + j * eb);
            finite = finite && std::isfinite(xv[j]);
          }
          if (finite && !f(at, xv.data(), yv.data())) return;
        }
      }
    }
  };
  std::vector<Chunk> failing;  // one vector each, in finding order, no repeats
  for (const auto& fd : result.summary.findings) {
    const Chunk c{std::max<std::int64_t>(0, fd.where.batch), fd.where.token, fd.where.token + 1,
                  fd.where.head, fd.where.head + 1};
    if (c.t0 < 0 || c.h0 < 0) continue;
    if (std::none_of(failing.begin(), failing.end(),
                     [&](const Chunk& o) { return o.b == c.b && o.t0 == c.t0 && o.h0 == c.h0; }))
      failing.push_back(c);
  }
  r.failing = [&x, &y, &positions, g, axes_of_spec, negated,
               failing](const verify::VectorVisitor& f) {
    const PositionIndex pos(positions, g, axes_of_spec);
    std::vector<unsigned char> xb, yb, pb;
    std::vector<std::int64_t> ps;
    std::vector<double> xv(static_cast<std::size_t>(g.D)), yv(xv.size());
    const std::int64_t eb = tio::elem_bytes(x.type);
    for (const Chunk& c : failing) {
      read_chunk(x, y, g, c, xb, yb);
      pos.read(c.b, c.t0, c.t1, ps, pb);
      negated(ps);
      for (std::int64_t j = 0; j < g.D; ++j) {
        xv[j] = tio::decode(x.type, xb.data() + j * eb);
        yv[j] = tio::decode(y.type, yb.data() + j * eb);
      }
      if (!f(ps, xv.data(), yv.data())) return;
    }
  };
  return r;
}

PairResult scan_pair(const std::string& label, const tio::TensorRef& x, const tio::TensorRef& y,
                     const tio::TensorRef& positions, const std::string& tensor_layout,
                     const verify::PairChecker& checker, const ref::Oracle& oracle,
                     const ScanOptions& o) {
  if (y.type != x.type || y.shape != x.shape)
    throw ScanError("tensor '" + y.name + "' must have the dtype and shape of '" + x.name + "'");
  const Geometry g = geometry(x.shape, x.name, tensor_layout);
  const PositionIndex pos(positions, g, checker.spec().n_axes());
  const Chunking chunks(g, std::max<std::int64_t>(1, o.chunk_vectors));
  const ChunkChecker check(x, y, g, pos, checker, oracle,
                           static_cast<std::size_t>(std::max(0, o.max_failures)), o.backward);
  PairResult res;
  res.name = label;
  res.summary.keep = static_cast<std::size_t>(std::max(0, o.max_failures));
  const auto threads = static_cast<unsigned>(
      std::max<std::int64_t>(1, std::min<std::int64_t>(o.threads, chunks.size())));
  Pool pool(check, chunks, res, 4 * static_cast<std::int64_t>(threads));
  {
    std::vector<std::thread> workers;
    for (unsigned t = 1; t < threads; ++t) workers.emplace_back([&pool] { pool.worker(); });
    pool.worker();
    for (auto& w : workers) w.join();
  }
  pool.rethrow();
  return res;
}

}  // namespace ropecheck::scan
