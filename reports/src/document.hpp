// Internal: the document — report.json assembled from the executed units (document.cpp; its
// figures in document_figures.cpp, the headline in document_headline.cpp, the checks in
// document_checks.cpp). merge() rebuilds the same statistics from shard reports and writes them
// with the same functions, so a merged sharded report is the unsharded one
// (reports/report.schema.json describes the layout).
#pragma once

#include "executor.hpp"
#include "ropecheck/reports/stats.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace ropecheck::reports::detail {

// Numbers in report.json: NaN and the infinities as the strings "nan", "inf", "-inf".
nlohmann::json num(double v);
// The inverse of num(): nullopt for anything else.
std::optional<double> number(const nlohmann::json& j);
// number(), NaN for anything else.
double dbl_of(const nlohmann::json& j);

// A spec as report.json writes it (specs[], a worst case's spec, a variant's spec).
nlohmann::json spec_json(const RopeSpec& s);
// A value's bit pattern in the dtype, "0x3c00".
std::string hex_bits(double v, Dtype d);

// The statistics of one kernel x dtype of the main sweep, accumulated over its units.
struct ResultStats {
  std::array<ErrorStats, kNumBuckets> buckets;
  std::array<OctaveStats, kOctaves> octaves;
  std::array<std::int64_t, kUlpBins> hist{};  // over every bucket
  std::int64_t specs_supported = 0;           // specs the kernel ran on
  // Sampled positions the kernel refused although it supports the spec (past its cache), and the
  // smallest (INT64_MAX: none): the headline has no figure for a context from there on.
  std::int64_t refused = 0, refused_min = std::numeric_limits<std::int64_t>::max();
  struct Fp8 {
    Fp8Format format;
    std::array<Fp8Stats, kNumBuckets> buckets;
  };
  std::vector<Fp8> fp8;  // per Options::fp8 format (empty: no FP8 section)
  void merge(const ResultStats& later);
};

// A bucket's worst case as JSON (null when none): run() renders it from the WorstCase and its
// setup; merge() copies the one the shard that swept that spec wrote.
using WorstJson = std::function<nlohmann::json(int bucket, const WorstCase& w, bool pair_case)>;

// A worst case of setup S in dtype d with its `ropecheck eval` reproduction (null when none).
nlohmann::json worst_json(const WorstCase& w, const Setup& S, Dtype d, bool pair_case);

// The non-empty buckets in bucket order. merge_state: add what `report --merge` needs (shard
// reports only; most of their size).
nlohmann::json buckets_json(const std::array<ErrorStats, kNumBuckets>& buckets,
                            const WorstJson& worst, bool merge_state);
// Sets r's "specs_supported", "buckets", "ulp_histogram", "octaves" and (with FP8 formats) "fp8".
void put_result_figures(nlohmann::json& r, const ResultStats& s, const WorstJson& worst,
                        bool merge_state);

// The report document of an executed plan (environment included; wall_seconds left to run()).
nlohmann::json document(const Plan& plan, const Executed& ex);

// Derives doc["checks"] and doc["summary"] from doc["results"], doc["variants"] and
// doc["special_values"], then add_headline(); run() and merge() both call it, so they cannot
// disagree.
void add_checks(nlohmann::json& doc);
// doc["headline"] from doc["results"] (per-octave maxima, per-bucket angle shares): per kernel x
// dtype the max per-pair error at context lengths 4k, 32k, 128k, 1M, where it first exceeds 2x,
// 8x, 64x the storage rounding, what limits it, one conclusion per dtype and a verdict sentence.
// Not in a shard's report (its sweep is partial): `report --merge` adds it to the merged one.
void add_headline(nlohmann::json& doc);

// Where each dim of a head stored in spec's layout sits when the same spec is stored in layout
// `run` (pair i to pair i, pass-through dims in place): the exact storage permutation the atlas
// uses to run an engine in its own layout (atlas.cpp, atlas_model.cpp).
std::vector<std::int64_t> layout_index_map(const RopeSpec& spec, Layout run);

}  // namespace ropecheck::reports::detail
