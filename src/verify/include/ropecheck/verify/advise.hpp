// ropecheck::verify advice: the hint a failing run ends with, given only when it holds.
//
// A hint names either a declaration (a policy) under which the WHOLE run passes, or a spec
// mismatch (another base, position, layout, rotary_dim, sin sign) under which the whole run passes
// with the declared policy -- the latter named as what it usually is, a bug. Every candidate is a
// re-check of every recorded vector of the run with the same verify machinery (check_vector
// against the candidate's derived bound); a hint that does not make every vector pass is never
// printed. Of the declarations that pass, the smallest change of the declared policy (fewest
// fields), then the narrowest bound, is named, with what it means and how much wider its bound is
// than the declared one.
//
// Map (advise.cpp): the candidates (spec hypotheses, then policies), the screen on the vectors
// that failed first, the confirmation on every vector, the choice and its sentence.
#pragma once

#include "ropecheck/verify/verify.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ropecheck::verify {

// positions (as checked: one per axis, or one for every axis), x and got (head_dim values each).
// Returns false to stop the visit.
using VectorVisitor = std::function<bool(const std::vector<std::int64_t>& positions,
                                         const double* x, const double* got)>;

// The vectors of a run that share one spec and dtype: a tensor pair of a dump, one directed spec
// of a validate configuration.
struct RecordedVectors {
  RopeSpec spec;  // normalized, as checked
  Dtype dtype = Dtype::f32;
  // The vectors are a backward's: the positions visited are the negated ones the check used
  // (R(-m)); candidates stated in the forward's terms (position m+1, sin negated) are mapped.
  bool backward = false;
  std::int64_t vectors = 0;  // how many for_each visits (the re-check budget)
  // Every checked vector (finite input), in the run's order, until the visitor returns false.
  std::function<void(const VectorVisitor&)> for_each;
  // A few vectors that failed under the declaration, visited first as a cheap screen (may be
  // empty: the screen is then the run's first vectors).
  std::function<void(const VectorVisitor&)> failing;
};

// Vectors held in memory: vector v is x + v * head_dim -> got + v * head_dim at positions
// pos + (v / heads) * axes (axes values; heads vectors share a token's positions). failing: the
// indices of vectors that failed (the screen). Every pointer must outlive the advise() call.
RecordedVectors recorded_in_memory(const RopeSpec& spec, Dtype d, std::int64_t n,
                                   std::int64_t heads, const std::int64_t* pos, std::int64_t axes,
                                   const double* x, const double* got,
                                   std::vector<std::int64_t> failing, bool backward = false);

// The indices of the first `keep` vectors of an in-memory set that fail under checker c (no
// failure: empty), for recorded_in_memory's screen.
std::vector<std::int64_t> failing_in_memory(const PairChecker& c, std::int64_t n,
                                            std::int64_t heads, const std::int64_t* pos,
                                            std::int64_t axes, const double* x, const double* got,
                                            std::size_t keep = 8);

struct Advice {
  enum class Kind { none, declaration, spec_mismatch, passthrough };
  Kind kind = Kind::none;
  std::string text;  // the hint, "" for none
  // The spec keys (`check` --spec / __metadata__) that apply the named declaration, or that
  // describe the spec the outputs match (empty when no key states it: a position offset, a sign).
  std::vector<std::pair<std::string, std::string>> keys;
  std::string skipped;  // why the candidates were not confirmed (the re-check budget), or ""
  std::int64_t candidates = 0;     // candidates tried
  std::int64_t vector_checks = 0;  // check_vector calls spent
};

struct AdviseOptions {
  // Confirmation costs (vectors of the run) x (candidates that survived the screen) vector
  // checks; beyond this no hint is given (never an unconfirmed one) and Advice::skipped says so.
  std::int64_t max_vector_checks = std::int64_t{1} << 22;
};

// The hint for a run that failed under `declared` (every group checked with it). Empty advice
// when nothing but the declaration's own bound explains the outputs, or when a vector has a
// non-finite output (no candidate bound is about those).
Advice advise(const Policy& declared, const std::vector<RecordedVectors>& run,
              const AdviseOptions& options = {});

// The toward-zero rule: a declaration of truncation is named only when, over every checked
// element of the run whose exact value is not tiny, at least kTowardZeroLean of the outputs lie
// below the exact magnitude (round-to-nearest puts about half on each side).
inline constexpr double kTowardZeroLean = 7.0 / 8.0;

}  // namespace ropecheck::verify
