// Unit tests of the report library: statistics, the validators, atomic writes, baseline comparison
// and determinism of a small report (the recipe-faithful reference: report_recipe_test.cpp).
#include "ropecheck/bounds.hpp"
#include "ropecheck/kernels/registry.hpp"
#include "ropecheck/kernels/simd_info.hpp"
#include "ropecheck/reference/reference.hpp"
#include "ropecheck/reports/report.hpp"
#include "ropecheck/reports/stats.hpp"
#include "skew.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>

namespace ropecheck::reports {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TEST(ReportStats, UlpBinsHaveTheDocumentedEdges) {
  EXPECT_EQ(ulp_bin(0.0), 0);
  EXPECT_EQ(ulp_bin(1e-300), 1);
  EXPECT_EQ(ulp_bin(0.5), 1);
  EXPECT_EQ(ulp_bin(std::nextafter(0.5, 1.0)), 2);
  EXPECT_EQ(ulp_bin(1.0), 2);
  EXPECT_EQ(ulp_bin(std::nextafter(1.0, 2.0)), 3);  // (1, 2]
  EXPECT_EQ(ulp_bin(2.0), 3);
  EXPECT_EQ(ulp_bin(3.0), 4);  // (2, 4]
  EXPECT_EQ(ulp_bin(std::ldexp(1.0, 20)), kUlpBins - 2);
  EXPECT_EQ(ulp_bin(std::ldexp(1.0, 20) * 1.5), kUlpBins - 1);
  EXPECT_EQ(ulp_bin(INFINITY), kUlpBins - 1);
  EXPECT_EQ(ulp_bin(NAN), kUlpBins - 1);
  EXPECT_EQ(ulp_bin_label(3), "(2^0, 2^1]");
}

TEST(ReportStats, NearestRankPercentiles) {
  std::vector<double> v;
  for (int i = 1; i <= 1000; ++i) v.push_back(i);
  EXPECT_EQ(percentile_sorted(v, 0.5), 500);
  EXPECT_EQ(percentile_sorted(v, 0.99), 990);
  EXPECT_EQ(percentile_sorted(v, 0.999), 999);
  EXPECT_EQ(percentile_sorted(v, 1.0), 1000);
  EXPECT_TRUE(std::isnan(percentile_sorted({}, 0.5)));
  EXPECT_EQ(octave_of(0), 0);
  EXPECT_EQ(octave_of(1), 1);
  EXPECT_EQ(octave_of(3), 2);
  EXPECT_EQ(octave_of(4), 3);
  EXPECT_EQ(octave_of(-4), 3);
}

TEST(ReportStats, SketchPercentilesAreWithinTheDocumentedResolution) {
  std::mt19937_64 rng(11);
  std::lognormal_distribution<double> ld(-1.0, 2.0);
  std::vector<double> v;
  QuantileSketch q;
  for (int i = 0; i < 20000; ++i) {
    const double x = i % 50 == 0 ? 0.0 : ld(rng);
    v.push_back(x);
    q.add(x);
  }
  std::sort(v.begin(), v.end());
  for (double p : {0.01, 0.02, 0.5, 0.9, 0.99, 0.999, 1.0}) {
    const double exact = percentile_sorted(v, p), got = q.percentile(p);
    EXPECT_GE(got, exact) << p;                          // upper edge: never below
    EXPECT_LE(got, exact * (1 + 1.0 / 256) + 0.0) << p;  // 256 bins per binade
  }
  EXPECT_EQ(q.percentile(0.01), 0.0);  // 2% zeros: exact
  q.add(INFINITY);
  EXPECT_EQ(q.percentile(1.0), INFINITY);
}

TEST(ReportStats, MergeEqualsOneAccumulatorAndKeepsTheFirstWorstCase) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> ud(0, 3);
  ErrorStats all, a, b;
  for (int i = 0; i < 200; ++i) {
    const double e = ud(rng);
    all.add_element(e);
    (i < 120 ? a : b).add_element(e);
  }
  a.worst_ulp.value = 2.5;
  a.worst_ulp.position = 1;
  b.worst_ulp.value = 2.5;  // tie: the earlier (a) must win
  b.worst_ulp.position = 2;
  a.merge(b);
  EXPECT_EQ(a.n_elements, all.n_elements);
  EXPECT_EQ(a.hist, all.hist);
  EXPECT_EQ(a.gt_1ulp, all.gt_1ulp);
  EXPECT_EQ(a.ulps.count(), all.ulps.count());
  for (double q : {0.5, 0.99, 0.999}) EXPECT_EQ(a.ulps.percentile(q), all.ulps.percentile(q));
  EXPECT_EQ(a.worst_ulp.position, 1);
  ErrorStats c;
  c.worst_ulp.value = 2.6;
  c.worst_ulp.position = 3;
  a.merge(c);
  EXPECT_EQ(a.worst_ulp.position, 3);
  // A tie goes to the lower spec index whatever the order: run() folds a bucket's units in spec
  // order, merge() folds shard reports in the order they were given.
  ErrorStats s3, s1;
  s3.worst_ulp.value = s1.worst_ulp.value = 2.0;
  s3.worst_ulp.spec_index = 3;
  s1.worst_ulp.spec_index = 1;
  ErrorStats fwd = s3, rev = s1;
  fwd.merge(s1);
  rev.merge(s3);
  EXPECT_EQ(fwd.worst_ulp.spec_index, 1);
  EXPECT_EQ(rev.worst_ulp.spec_index, 1);
}

// The exact rotation used by the reports agrees with the reference's own blocked product.
// Shard merges add exact sums: the result must not depend on grouping or order, and value() must
// be the once-rounded exact sum (cases where naive double summation is known to be wrong).
TEST(ReportStats, ExactSumIsExactAndOrderIndependent) {
  auto sum = [](std::initializer_list<double> v) {
    ExactSum s;
    for (double x : v) s += x;
    return s;
  };
  EXPECT_EQ(sum({1e100, 1.0, -1e100}).value(), 1.0);  // naive: 0
  ExactSum tenth;
  for (int i = 0; i < 10; ++i) tenth += 0.1;
  EXPECT_EQ(tenth.value(), 1.0);  // exact 1 + 5.55e-17 rounds to 1; naive gives 1 - 2^-53
  const double two53 = std::ldexp(1.0, 53);
  EXPECT_EQ(sum({two53, 1.0}).value(), two53);                            // tie -> even
  EXPECT_EQ(sum({two53, 1.0, std::ldexp(1.0, -30)}).value(), two53 + 2);  // above the tie
  EXPECT_EQ(sum({two53, 3.0}).value(), two53 + 4);                        // tie -> even (up)
  const double tiny = std::numeric_limits<double>::denorm_min();
  EXPECT_EQ(sum({tiny, tiny, tiny}).value(), 3 * tiny);
  EXPECT_EQ(sum({-2.5, 0.5}).value(), -2.0);
  EXPECT_EQ(sum({std::numeric_limits<double>::max(), std::numeric_limits<double>::max()}).value(),
            std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(
      sum({1.0, std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()})
          .value()));
  EXPECT_TRUE(std::isnan(sum({std::nan("")}).value()));
  EXPECT_EQ(sum({}).str(), "0");
  // Grouping and order: random magnitudes over 2^-60 .. 2^60, both signs.
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> ex(-60, 60);
  std::vector<double> v;
  for (int i = 0; i < 2000; ++i) v.push_back((i % 3 ? 1 : -1) * std::exp2(ex(rng)));
  ExactSum all, a, b, c;
  for (double x : v) all += x;
  for (std::size_t i = 0; i < v.size(); ++i) (i % 3 == 0 ? a : i % 3 == 1 ? b : c) += v[i];
  ExactSum ab = a;
  ab += b;
  ab += c;
  ExactSum cb = c;
  cb += b;
  cb += a;
  EXPECT_EQ(ab.str(), all.str());
  EXPECT_EQ(cb.str(), all.str());
  EXPECT_EQ(ab.value(), all.value());
  // Text round trip, and a naive sum close to the exact one (sanity of value()).
  EXPECT_EQ(ExactSum::parse(all.str()).str(), all.str());
  EXPECT_EQ(ExactSum::parse(all.str()).value(), all.value());
  long double naive = 0;
  for (double x : v) naive += x;
  EXPECT_NEAR(all.value(), static_cast<double>(naive),
              1e-9 * std::fabs(static_cast<double>(naive)));
  for (const char* bad : {"", "0x", "0xzzp0", "1.5", "0x1p", "0x1p-2000"})
    EXPECT_THROW(ExactSum::parse(bad), std::invalid_argument) << bad;
}

TEST(ReportSchema, ValidatorAcceptsAndRejects) {
  const json schema = json::parse(R"({
    "type": "object", "required": ["a", "n"], "additionalProperties": false,
    "properties": {"a": {"enum": ["x", "y"]}, "n": {"$ref": "#/definitions/num"},
                   "l": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}}},
    "definitions": {"num": {"anyOf": [{"type": "number"}, {"const": "inf"}]}}})");
  EXPECT_TRUE(validate_schema(schema, json::parse(R"({"a":"x","n":1.5,"l":[0,3]})")).empty());
  EXPECT_TRUE(validate_schema(schema, json::parse(R"({"a":"y","n":"inf"})")).empty());
  EXPECT_FALSE(validate_schema(schema, json::parse(R"({"a":"z","n":1})")).empty());
  EXPECT_FALSE(validate_schema(schema, json::parse(R"({"a":"x"})")).empty());
  EXPECT_FALSE(validate_schema(schema, json::parse(R"({"a":"x","n":"nan"})")).empty());
  EXPECT_FALSE(validate_schema(schema, json::parse(R"({"a":"x","n":1,"extra":0})")).empty());
  EXPECT_FALSE(validate_schema(schema, json::parse(R"({"a":"x","n":1,"l":[]})")).empty());
  EXPECT_FALSE(validate_schema(schema, json::parse(R"({"a":"x","n":1,"l":[-1]})")).empty());
  EXPECT_FALSE(validate_schema(schema, json::parse(R"({"a":"x","n":1,"l":[1.5]})")).empty());
  // A keyword the validator does not implement is an error, not silently ignored.
  EXPECT_FALSE(validate_schema(json::parse(R"({"pattern": "a+"})"), json("b")).empty());
}

TEST(ReportMarkup, CheckerRejectsMalformedDocuments) {
  EXPECT_TRUE(check_html("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"/><style>a<b"
                         "</style></head><body><p>a &amp; b</p><br><svg><path d=\"M0 0\"/></svg>"
                         "</body></html>")
                  .empty());
  EXPECT_FALSE(check_html("<html><body><p>x</body></html>").empty());               // unclosed <p>
  EXPECT_FALSE(check_html("<html><b><i>x</b></i></html>").empty());                 // bad nesting
  EXPECT_FALSE(check_html("<html>a & b</html>").empty());                           // bare &
  EXPECT_FALSE(check_html("<html><p class=x>y</p></html>").empty());                // unquoted
  EXPECT_FALSE(check_html("<html><img src=\"https://x/y.png\"/></html>").empty());  // network
  EXPECT_FALSE(check_html("<html></html><html></html>").empty());                   // two roots
  EXPECT_FALSE(check_xml("<a><br></a>").empty());  // no void elements in XML
  EXPECT_TRUE(check_xml("<?xml version=\"1.0\"?>\n<a x='1'><b/></a>\n").empty());
}

TEST(ReportIo, AtomicWriteReplacesWholeFilesAndLeavesNoTemporaries) {
  const fs::path dir = fs::temp_directory_path() / ("ropecheck_io_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string big(1 << 20, 'x');
  atomic_write(dir / "f.txt", big);
  atomic_write(dir / "f.txt", "short");
  std::ifstream in(dir / "f.txt");
  std::string got((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(got, "short");
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  // Missing directory: throws, creates nothing.
  EXPECT_THROW(atomic_write(dir / "missing" / "f.txt", "x"), std::runtime_error);
  EXPECT_FALSE(fs::exists(dir / "missing"));
  // Target is a directory: rename fails, the temporary is removed.
  fs::create_directories(dir / "d");
  fs::create_directories(dir / "d" / "sub");
  EXPECT_THROW(atomic_write(dir / "d" / "sub", "x"), std::runtime_error);
  int left = 0;
  for (const auto& e : fs::directory_iterator(dir / "d")) left += e.is_regular_file();
  EXPECT_EQ(left, 0);
  fs::remove_all(dir);
}

json tiny_report(double ulp_max, double pair_max) {
  return json{{"schema_version", kSchemaVersion},
              {"options", {{"seed", 1}}},
              {"checks", json::array()},
              {"results",
               {{{"kernel", "k"},
                 {"dtype", "f32"},
                 {"buckets",
                  {{{"bucket", "1-255"},
                    {"ulp", {{"max", ulp_max}}},
                    {"pair_error_u", {{"max", pair_max}}}}}}}}}};
}

TEST(ReportBaseline, FlagsGrowthBeyondTheFactorOnly) {
  auto now = tiny_report(1.0, 1.9);
  EXPECT_EQ(apply_baseline(now, tiny_report(0.6, 1.0), 2.0), 0);  // 1.9 <= 2 * 1.0
  EXPECT_EQ(exit_code(now), 0);
  now = tiny_report(1.0, 2.1);
  EXPECT_EQ(apply_baseline(now, tiny_report(0.6, 1.0), 2.0), 1);
  EXPECT_EQ(exit_code(now), 1);
  now = tiny_report(0.9, 0.9);  // floor: 0 -> 0.9 <= 2 * max(0, 0.5)
  EXPECT_EQ(apply_baseline(now, tiny_report(0.0, 0.0), 2.0), 0);
  auto nan_now = tiny_report(1.0, 1.0);
  nan_now["results"][0]["buckets"][0]["pair_error_u"]["max"] = "nan";
  EXPECT_EQ(apply_baseline(nan_now, tiny_report(1.0, 1.0), 2.0), 1);
  auto old = tiny_report(1, 1);
  old["schema_version"] = kSchemaVersion + 1;
  EXPECT_THROW(apply_baseline(now, old, 2.0), OptionsError);
}

Options small_options() {
  Options o;
  o.dtypes = {Dtype::f32, Dtype::bf16};
  o.head_dims = {8};
  o.bases = {10000};
  o.max_position = 70000;
  o.samples = 8;
  // As the CLI fills them (the reports do not link the kernels; the schema lists real paths).
  o.simd_path = simd_path();
  o.simd_best_path = simd_best_path();
  return o;
}

TEST(ReportRun, SameSeedSameJsonWhateverTheThreadCount) {
  auto o = small_options();
  o.threads = 1;
  auto a = run(o, builtin_kernels());
  o.threads = 2;
  auto b = run(o, builtin_kernels());
  o.seed = 2;
  auto c = run(o, builtin_kernels());
  a.erase("environment");
  b.erase("environment");
  c.erase("environment");
  EXPECT_EQ(a, b);
  EXPECT_NE(a["results"], c["results"]);
  // Structural sanity of the searches: the safe length is below the first failure.
  for (const auto& s : a["safe_context"])
    if (!s["first_failure"].is_null()) {
      EXPECT_LT(s["safe_length"].get<long long>(), s["first_failure"].get<long long>());
    }
}

TEST(ReportRun, ReportValidatesAgainstTheShippedSchema) {
  auto r = run(small_options(), builtin_kernels());
  std::ifstream in(ROPECHECK_REPORT_SCHEMA);
  ASSERT_TRUE(in) << ROPECHECK_REPORT_SCHEMA;
  const json schema = json::parse(in);
  const auto errs = validate_schema(schema, r);
  for (const auto& e : errs) ADD_FAILURE() << e;
  EXPECT_TRUE(check_html(render_html(r)).empty());
  EXPECT_TRUE(check_xml(render_junit(r)).empty());
  // A document missing a required key is rejected by the validator, and the renderers refuse it
  // with an exception rather than reading through a missing map entry (JSON_ASSERT throws, see
  // the top-level CMakeLists.txt; this used to be an intermittent SIGSEGV of this test).
  r["results"][0]["buckets"][0]["ulp"].erase("p99");
  EXPECT_FALSE(validate_schema(schema, r).empty());
  EXPECT_THROW(render_html(r), std::exception);
  EXPECT_THROW(render_markdown(r), std::exception);
}

// `validate --out`: a failed validation block makes every output say FAIL (and exit 1) even when
// every precision check of the sweep holds; a passed one changes nothing of the exit status.
TEST(ReportRun, ValidationBlockCarriesTheVerdictIntoEveryOutput) {
  auto r = run(small_options(), builtin_kernels());
  ASSERT_EQ(exit_code(r), 0);
  const json failed_case = {{"configuration", "f32 half"},
                            {"check", "Differential"},
                            {"passed", false},
                            {"skipped", false},
                            {"result", "unwritten output"},
                            {"message", "unwritten output: 12 element(s) left unwritten"},
                            {"reproduce", "ropecheck validate --plugin p.so --dtypes f32"}};
  const json skipped_case = {{"configuration", "f32 half"},
                             {"check", "PreservesNorm"},
                             {"passed", false},
                             {"skipped", true},
                             {"result", "not run"},
                             {"message", "configuration faulted"}};
  r["validation"] = {{"plugin", "p"},
                     {"passed", false},
                     {"classification", "unwritten_output"},
                     {"exit_code", 1},
                     {"first_failure", "[f32 half] Differential: unwritten output"},
                     {"reproduce", "ropecheck validate --plugin p.so --dtypes f32"},
                     {"cases", {failed_case, skipped_case}}};
  std::ifstream in(ROPECHECK_REPORT_SCHEMA);
  const json schema = json::parse(in);
  for (const auto& e : validate_schema(schema, r)) ADD_FAILURE() << e;
  EXPECT_EQ(exit_code(r), 1);
  const std::string md = render_markdown(r), html = render_html(r), junit = render_junit(r);
  EXPECT_EQ(md.find("# ropecheck precision report\n\n**Validation of plugin 'p': FAIL "
                    "(classification unwritten_output; 1 of 1 checks failed; exit 1)"),
            0u)
      << md.substr(0, 300);
  EXPECT_LT(md.find("First counterexample"), md.find("**Verdict on precision.**"));
  EXPECT_EQ(md.find("exit 0"), std::string::npos);
  EXPECT_EQ(html.find("exit 0"), std::string::npos);
  EXPECT_TRUE(check_html(html).empty());
  EXPECT_TRUE(check_xml(junit).empty());
  EXPECT_NE(junit.find("<testsuite name=\"validate\" tests=\"2\" failures=\"1\" errors=\"0\" "
                       "skipped=\"1\">"),
            std::string::npos)
      << junit;
  EXPECT_NE(junit.find("<failure message=\"unwritten output: 12 element(s)"), std::string::npos);
  r["validation"]["passed"] = true;
  r["validation"]["exit_code"] = 0;
  EXPECT_EQ(exit_code(r), 0);
}

// The scalar kernel with every f32 output scaled by 1 + 2^-6 (2^18 f32 ulps: far outside its
// bound, and enough to move an FP8 byte for a sizeable share of the outputs); other dtypes
// untouched.
class SkewedF32 : public Kernel {
 public:
  std::string name() const override { return "skewed_f32"; }
  std::string description() const override { return "scalar, f32 outputs x (1 + 2^-6)"; }
  Policy policy(Dtype d) const override { return inner().policy(d); }
  bool supports(const RopeSpec& s, Dtype d) const override { return inner().supports(s, d); }
  KernelStatus apply(const RopeSpec& spec, const TensorArgs& a) const override {
    const KernelStatus st = inner().apply(spec, a);
    if (st != KernelStatus::ok || a.dtype != Dtype::f32) return st;
    test::skew_f32_outputs(spec, a);
    return st;
  }

 private:
  static const Kernel& inner() { return *find_builtin_kernel("scalar"); }
};

Options fp8_options() {
  auto o = small_options();
  o.head_dims = {64};
  o.samples = 64;
  o.max_position = 1 << 20;
  o.variants = false;
  o.fp8 = {Fp8Format::e4m3fn, Fp8Format::e5m2};
  return o;
}

std::vector<const Kernel*> kernels_and_skewed() {
  static const SkewedF32 skewed;
  auto ks = builtin_kernels();
  ks.push_back(&skewed);
  return ks;
}

// report --fp8: every kernel x dtype carries the FP8 cache bytes per format and bucket, on exactly
// the elements of the main sweep; the built-in kernels keep every byte inside the chain image of
// their derived bound, the skewed kernel does not (its check fails and the exit status is 1);
// without --fp8 the document has no FP8 key at all.
TEST(ReportFp8, EveryKernelDescribedAndABrokenOneFails) {
  const json r = run(fp8_options(), kernels_and_skewed());
  std::ifstream in(ROPECHECK_REPORT_SCHEMA);
  const json schema = json::parse(in);
  for (const auto& e : validate_schema(schema, r)) ADD_FAILURE() << e;
  EXPECT_TRUE(check_html(render_html(r)).empty());
  EXPECT_TRUE(check_xml(render_junit(r)).empty());
  EXPECT_NE(render_markdown(r).find("## FP8 cache bytes"), std::string::npos);
  ASSERT_TRUE(r.contains("fp8"));
  int fp8_checks = 0, failed = 0;
  for (const auto& c : r["checks"]) {
    const std::string name = c["check"];
    if (name.rfind("Fp8BytesWithinBound[", 0) != 0) continue;
    ++fp8_checks;
    const bool broken = c["kernel"] == "skewed_f32" && c["dtype"] == "f32";
    EXPECT_EQ(c["passed"].get<bool>(), !broken) << c.dump();
    failed += !c["passed"].get<bool>();
  }
  EXPECT_EQ(fp8_checks, static_cast<int>(r["results"].size()) * 2);
  EXPECT_EQ(failed, 2);  // both formats
  EXPECT_EQ(r["summary"]["fp8_outside_kernel_dtypes"], 2);
  EXPECT_EQ(exit_code(r), 1);
  for (const auto& res : r["results"]) {
    ASSERT_EQ(res["fp8"].size(), 2u);
    for (const auto& f : res["fp8"]) {
      ASSERT_EQ(f["buckets"].size(), res["buckets"].size()) << res["kernel"];
      for (std::size_t b = 0; b < f["buckets"].size(); ++b) {
        const auto& fb = f["buckets"][b];
        EXPECT_EQ(fb["bucket"], res["buckets"][b]["bucket"]);
        EXPECT_EQ(fb["elements"], res["buckets"][b]["n_elements"]);
        EXPECT_LE(fb["differ"].get<long long>(), fb["elements"].get<long long>());
        EXPECT_LE(fb["undetermined"].get<long long>(), fb["elements"].get<long long>());
        if (res["kernel"] == "skewed_f32" && res["dtype"] == "f32" && fb["bucket"] != "0") {
          EXPECT_GT(fb["outside"].get<long long>(), 0) << fb.dump();
          // A shift by v 2^-6 crosses one of the format's rounding boundaries (spacing 2^-m of
          // v's binade, v in [1, 2) scaled) with probability 2^-6 v / 2^-m: at least 1/16 in
          // e5m2 (m = 2), 1/8 in e4m3fn, for outputs in the normal range (nearly all here).
          EXPECT_GT(fb["differ_share"].get<double>(), 0.05) << fb.dump();
        }
      }
    }
  }
  // The f32-angle recipe (table_f32) leaves more bytes open at long context than at short: its
  // derived bound grows with the position (the angle's f32 rounding).
  for (const auto& res : r["results"])
    if (res["kernel"] == "table_f32" && res["dtype"] == "f32") {
      const auto& b = res["fp8"][0]["buckets"];
      EXPECT_GT(b.back()["undetermined_share"].get<double>(),
                b[1]["undetermined_share"].get<double>() + 0.05)
          << b.dump();
    }
  auto o = fp8_options();
  o.fp8.clear();
  const json plain = run(o, builtin_kernels());
  EXPECT_FALSE(plain.contains("fp8"));
  EXPECT_FALSE(plain["summary"].contains("fp8_outside_kernel_dtypes"));
  EXPECT_FALSE(plain["results"][0].contains("fp8"));
}

// Shard reports carry the FP8 counts, and their merge is the unsharded report.
TEST(ReportFp8, ShardsMergeToTheUnshardedReport) {
  auto o = fp8_options();
  json whole = run(o, kernels_and_skewed());
  std::vector<json> shards;
  for (int i = 0; i < 3; ++i) {
    o.shard_index = i;
    o.shard_count = 3;
    shards.push_back(run(o, kernels_and_skewed()));
  }
  json merged = merge(shards);
  for (json* d : {&whole, &merged}) {
    d->erase("environment");
    d->erase("shard");
  }
  EXPECT_EQ(merged["results"], whole["results"]);
  EXPECT_EQ(merged["checks"], whole["checks"]);
  EXPECT_EQ(merged, whole);
  // Different FP8 options do not merge.
  shards[1]["options"]["fp8"]["scale"] = 2.0;
  EXPECT_THROW(merge(shards), OptionsError);
}

TEST(ReportFp8, RejectsBadOptions) {
  auto o = fp8_options();
  o.fp8_scale = 0;
  EXPECT_THROW(validate(o), OptionsError);
  o = fp8_options();
  o.fp8_scale = NAN;
  EXPECT_THROW(validate(o), OptionsError);
  o = fp8_options();
  o.fp8 = {Fp8Format::e5m2, Fp8Format::e5m2};
  EXPECT_THROW(validate(o), OptionsError);
  o = fp8_options();
  o.fp8_overflow = Fp8Overflow::inf;  // e4m3fn has no infinity
  EXPECT_THROW(validate(o), OptionsError);
  o.fp8 = {Fp8Format::e5m2};
  EXPECT_NO_THROW(validate(o));
}

TEST(ReportOptions, RejectsBadOptions) {
  auto o = small_options();
  o.samples = 0;
  EXPECT_THROW(validate(o), OptionsError);
  o = small_options();
  o.max_position = 0;
  EXPECT_THROW(validate(o), OptionsError);
  o = small_options();
  o.head_dims = {1};
  EXPECT_THROW(validate(o), OptionsError);
  o = small_options();
  o.bases = {1.0};
  EXPECT_THROW(validate(o), OptionsError);
  o = small_options();
  o.dtypes.clear();
  EXPECT_THROW(validate(o), OptionsError);
}

}  // namespace
}  // namespace ropecheck::reports
