// The headline's definitions on synthetic results (document_headline.cpp add_headline): a context L
// is positions < L, crossings are read off the per-octave maxima, every supported row carries a
// figure or an explicit ">= L", the angle share comes from the bucket holding L - 1, shards get
// none.
#include "../src/document.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace {

using nlohmann::json;
using ropecheck::reports::detail::add_headline;

// A result whose per-octave max is max_u(position_lo); every bucket has the given angle share.
template <class F>
json result(const std::string& kernel, const std::string& dtype, double u, F max_u, double share,
            const char* recipe = "pow_product") {
  json r{
      {"kernel", kernel},
      {"dtype", dtype},
      {"unit_roundoff", u},
      {"specs_supported", 1},
      {"policy", {{"angle", "f64"}, {"table", "f64"}, {"arithmetic", "f64"}, {"recipe", recipe}}},
      {"octaves", json::array()},
      {"buckets", json::array()}};
  for (int q = 0; q <= 21; ++q) {
    const std::int64_t lo = q == 0 ? 0 : std::int64_t{1} << (q - 1);
    r["octaves"].push_back({{"position_lo", lo}, {"n_pairs", 10}, {"max_pair_u", max_u(lo)}});
  }
  for (const char* b : {"0", "1-255", "256-4095", "4096-65535", "65536-2^20"})
    r["buckets"].push_back({{"bucket", b}, {"angle_vs_rotation", {{"angle_share", share}}}});
  return r;
}

json doc_with(std::vector<json> results, std::int64_t max_position = std::int64_t{1} << 20) {
  json d{{"options", {{"max_position", max_position}, {"dtypes", json::array()}}},
         {"results", results}};
  for (const auto& r : results)
    if (std::find(d["options"]["dtypes"].begin(), d["options"]["dtypes"].end(), r["dtype"]) ==
        d["options"]["dtypes"].end())
      d["options"]["dtypes"].push_back(r["dtype"]);
  return d;
}

TEST(Headline, ContextsCrossingsAndLimits) {
  // f64: error = position (an f64 angle's rounding grows with m); f32: 0.9 u flat.
  json d = doc_with({result(
                         "k", "f64", std::ldexp(1.0, -53), [](double lo) { return lo; }, 0.99),
                     result(
                         "k", "f32", std::ldexp(1.0, -24), [](double) { return 0.9; }, 0.0)});
  add_headline(d);
  const json& h = d.at("headline");
  ASSERT_EQ(h["contexts"].size(), 4u);
  EXPECT_EQ(h["contexts"][0]["label"], "4k");
  EXPECT_EQ(h["contexts"][3]["label"], "1M");
  const json& f64 = h["rows"][0];
  // Positions < 4096: octaves up to [2048, 4096), whose max here is its start 2048.
  EXPECT_EQ(f64["at"][0]["max_pair_u"].get<double>(), 2048);
  EXPECT_EQ(f64["at"][0]["n_pairs"].get<int>(), 13 * 10);
  EXPECT_EQ(f64["at"][3]["max_pair_u"].get<double>(), 524288);  // 2^20 itself is not < 1M
  EXPECT_DOUBLE_EQ(f64["at"][3]["relative"].get<double>(), 524288 * std::ldexp(1.0, -53));
  EXPECT_EQ(f64["at"][0]["angle_share_bucket"], "256-4095");
  EXPECT_EQ(f64["at"][1]["angle_share_bucket"], "4096-65535");
  EXPECT_EQ(f64["at"][3]["limited_by"], "angle");
  // > 2 u first in octave [4, 8): context 8; > 8 u in [16, 32): 32; > 64 u in [128, 256): 256.
  EXPECT_EQ(f64["exceeds"][0]["context"], 8);
  EXPECT_EQ(f64["exceeds"][1]["context"], 32);
  EXPECT_EQ(f64["exceeds"][2]["context"], 256);
  const json& f32 = h["rows"][1];
  EXPECT_EQ(f32["at"][3]["limited_by"], "storage");
  for (const auto& e : f32["exceeds"]) {
    EXPECT_TRUE(e["context"].is_null());
    EXPECT_EQ(e["label"], ">= 1M");
  }
  EXPECT_NE(h["conclusions"][0]["text"].get<std::string>().find("f64: k angle-limited at 1M"),
            std::string::npos)
      << h["conclusions"][0];
  EXPECT_NE(h["conclusions"][0]["text"].get<std::string>().find("above 2 u from context 8"),
            std::string::npos);
  EXPECT_NE(h["conclusions"][1]["text"].get<std::string>().find("storage-limited to 1M"),
            std::string::npos)
      << h["conclusions"][1];
  EXPECT_NE(h["verdict"].get<std::string>().find("1 of 2"), std::string::npos) << h["verdict"];
}

TEST(Headline, F32AngleGetsTheF64Advice) {
  json d = doc_with({result(
      "t", "f32", std::ldexp(1.0, -24), [](double lo) { return lo / 100; }, 1.0, "hf_f32")});
  add_headline(d);
  const std::string c = d["headline"]["conclusions"][0]["text"];
  EXPECT_NE(c.find("compute the angle m*theta in f64"), std::string::npos) << c;
}

TEST(Headline, RotationLimitedAndNaN) {
  json d = doc_with({result(
                         "r", "f32", std::ldexp(1.0, -24), [](double) { return 2.3; }, 0.1),
                     result(
                         "n", "f32", std::ldexp(1.0, -24),
                         [](double lo) { return lo > 1000 ? json("nan") : json(0.5); }, 0.1)});
  add_headline(d);
  const json& rows = d["headline"]["rows"];
  EXPECT_EQ(rows[0]["at"][3]["limited_by"], "rotation");
  EXPECT_EQ(rows[0]["exceeds"][0]["context"], 1);  // position 0 already: a context of 1 token
  EXPECT_EQ(rows[1]["at"][0]["max_pair_u"], "nan");
  EXPECT_EQ(rows[1]["at"][3]["limited_by"], "non-finite");
  EXPECT_EQ(rows[1]["exceeds"][0]["context"], 2048);
}

TEST(Headline, ShortSweepEndsOnItsOwnContextAndShardsHaveNone) {
  json d = doc_with({result(
                        "k", "bf16", std::ldexp(1.0, -8), [](double) { return 1.0; }, 0.0)},
                    70000);
  add_headline(d);
  const json& c = d["headline"]["contexts"];
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[2]["label"], "64k");
  EXPECT_EQ(d["headline"]["rows"][0]["exceeds"][0]["label"], ">= 64k");
  d["shard"] = {{"index", 0}, {"total", 2}};
  add_headline(d);
  EXPECT_FALSE(d.contains("headline"));
}

TEST(Headline, UnsupportedIsSaidSo) {
  json r = result(
      "u", "f16", std::ldexp(1.0, -11), [](double) { return 1.0; }, 0.0);
  r["specs_supported"] = 0;
  json d = doc_with({r});
  add_headline(d);
  EXPECT_FALSE(d["headline"]["rows"][0]["supported"].get<bool>());
  EXPECT_NE(d["headline"]["conclusions"][0]["text"].get<std::string>().find("unsupported"),
            std::string::npos);
}

// A kernel that refused the sampled positions from 65536 on (vLLM's YaRN cache of ceil(orig *
// factor) rows, which its declared domain cannot say): no octave or bucket past 65535. The
// contexts whose L - 1 falls there carry no figure -- the max over the positions it ran is not the
// error at L -- and the crossings it never reached are not ">= 1M".
TEST(Headline, RefusedPositionsAreNotRunNotAFigure) {
  json r = result(
      "v", "f32", std::ldexp(1.0, -24), [](double lo) { return lo < 8 ? 1.0 : 4.0; }, 1.0,
      "vllm_f32");
  json oct = json::array(), buckets = json::array();
  for (const auto& o : r["octaves"])
    if (o["position_lo"].get<std::int64_t>() < 65536) oct.push_back(o);
  for (const auto& b : r["buckets"])
    if (b["bucket"] != "65536-2^20") buckets.push_back(b);
  r["octaves"] = oct;
  r["buckets"] = buckets;
  json d = doc_with({r});
  add_headline(d);
  const json& row = d["headline"]["rows"][0];
  EXPECT_EQ(row["at"][1]["limited_by"], "angle");  // 32k: positions < 32768, all run
  for (int c : {2, 3}) {                           // 128k and 1M: L - 1 >= 65536
    EXPECT_EQ(row["at"][c]["limited_by"], "not run") << row["at"][c];
    EXPECT_TRUE(row["at"][c]["max_pair_u"].is_null());
  }
  EXPECT_EQ(row["exceeds"][0]["context"], 16);  // 4 u from octave [8, 16)
  EXPECT_TRUE(row["exceeds"][1]["context"].is_null());
  EXPECT_EQ(row["exceeds"][1]["label"], "not below 128k (not run past it)");
  const std::string c = d["headline"]["conclusions"][0]["text"];
  EXPECT_NE(c.find("not run at 1M"), std::string::npos) << c;
  EXPECT_EQ(c.find("compute the angle"), std::string::npos) << c;
}

}  // namespace
