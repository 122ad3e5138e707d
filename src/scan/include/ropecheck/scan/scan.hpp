// ropecheck::scan — the streamed, parallel scan behind `ropecheck check` and the Python module's
// `check`: one recorded tensor pair (x -> y) read from its file
// in chunks, each chunk checked by one thread against the two-tier oracle into its own
// verify::Summary, the summaries merged in chunk order. The result (counts, the first findings,
// each maximum and its location, ties to the first) is the one a single thread gives, for any
// thread count and chunk size.
//
// Inputs are tensorio::TensorRefs: file tensors (open_safetensors / open_npy) or in-memory ones
// (memory_tensor), so both front ends run the same engine.
//
// Map (scan.cpp):
//   Geometry       where each head vector lies in x and y (element strides per tensor_layout)
//   PositionIndex  where a token's positions lie in the positions tensor
//   Chunking       the work list: runs of whole tokens (all heads), or runs of heads of one token
//                  when a token alone is bigger than a chunk
//   scan_pair      the workers: read a chunk (pread), per token one oracle Rotation, per head one
//                  ExactVector and one verify::add_vector; the in-order merge
// Memory: per thread one chunk of x and y as stored (chunk_vectors x head_dim elements each), one
// head vector of each as doubles and the positions of its tokens; finished chunks wait for their
// turn to be merged in a window of 4 x threads chunks, each holding at most max_failures findings.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "ropecheck/reference/oracle.hpp"
#include "ropecheck/tensorio/tensorio.hpp"
#include "ropecheck/verify/advise.hpp"
#include "ropecheck/verify/verify.hpp"

namespace ropecheck::scan {

// Bad input (a shape, rank, layout or dtype the scan cannot take); the CLI maps it to exit 2.
class ScanError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct Geometry {
  std::int64_t B = 1, T = 0, H = 1, D = 0;
  std::int64_t sb = 0, st = 0, sh = 0;  // element strides of batch row, token and head
  std::int64_t offset(std::int64_t b, std::int64_t t, std::int64_t h) const {
    return b * sb + t * st + h * sh;
  }
};
// tensor_layout td | thd | bhtd | bthd (ScanError for another, or a rank that does not fit).
Geometry geometry(const std::vector<std::int64_t>& shape, const std::string& name,
                  const std::string& tensor_layout);

struct ScanOptions {
  unsigned threads = 1;
  std::int64_t chunk_vectors = 1024;  // head vectors per chunk (>= 1)
  int max_failures = 10;              // findings kept
  // x is an upstream gradient g and y the backward's grad_x = s R(m)^T g = s R(-m) g: every
  // position is negated before the oracle and the bound see it (and in the findings, which name
  // the negated positions).
  bool backward = false;
};

struct PairResult {
  std::string name;  // "x -> y"
  std::int64_t vectors = 0, skipped_nonfinite = 0;
  verify::Summary summary;  // of the checked vectors (finite input)
  // The verdict: every checked pair within its bound, and something checked at all (nothing
  // checked is not a pass: verify::nothing_checked).
  bool passed() const { return summary.vectors > 0 && summary.passed(); }
  // "" when something was checked, else the coverage failure's sentence.
  std::string coverage() const;
  // "FAIL x -> y token 3 (position 4096), head 1, pair 5 (elements 5, 37): ...", then
  // "hint (x -> y): ..." when the front end set summary.hint (verify::advise); or
  // "FAIL coverage: ..." when nothing was checked.
  std::vector<std::string> located() const;
};

// x and y: same dtype (f64/f32/f16/bf16) and shape; positions: int64/int32, [T], [B, T], or one
// per axis [A, T] / [A, B, T] (ScanError otherwise). Read errors (a file that shrank while being
// read) throw tensorio::FormatError; the first error of any worker is rethrown here.
PairResult scan_pair(const std::string& label, const tensorio::TensorRef& x,
                     const tensorio::TensorRef& y, const tensorio::TensorRef& positions,
                     const std::string& tensor_layout, const verify::PairChecker& checker,
                     const reference::Oracle& oracle, const ScanOptions& options);

// The vectors of one scanned pair, for verify::advise: every vector with a finite input in scan
// order (read again from the tensors, one thread), and the screen: the vectors of result's
// findings. x, y and positions must outlive the returned closures; backward as ScanOptions.
verify::RecordedVectors recorded_vectors(const PairResult& result, const tensorio::TensorRef& x,
                                         const tensorio::TensorRef& y,
                                         const tensorio::TensorRef& positions,
                                         const std::string& tensor_layout,
                                         const verify::PairChecker& checker, bool backward);

}  // namespace ropecheck::scan
