// The one reader of the golden sets in golden/ (made by the real upstream code; README.md there
// gives each file's format): a record opens with a `case` line, and every following line up to
// the next `case` is a tag (pos, in, out, ff, params, cos, sin, short, long, ...) and its
// fields. Lines starting with '#' and blank lines are skipped. The tests turn records into their
// cases (engines_native_test, ggml_scaled_test).
#pragma once

#include "support.hpp"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef ROPECHECK_GOLDEN_DIR
#error "ROPECHECK_GOLDEN_DIR must name src/kernels/tests/golden"
#endif

namespace ropecheck::kernel_tests {

struct GoldenRecord {
  std::string line;               // the case line, for messages
  std::vector<std::string> head;  // its fields after "case"
  std::map<std::string, std::vector<std::string>> tags;
  // The fields of a tag line; a missing line is a malformed golden set.
  const std::vector<std::string>& at(const std::string& tag) const {
    const auto it = tags.find(tag);
    if (it == tags.end()) throw std::runtime_error("golden set: no '" + tag + "' line for " + line);
    return it->second;
  }
  bool has(const std::string& tag) const { return tags.count(tag) != 0; }
};

// The records of golden/<file>, in file order.
inline std::vector<GoldenRecord> read_golden_records(const std::string& file) {
  std::ifstream f(std::string(ROPECHECK_GOLDEN_DIR) + "/" + file);
  if (!f) throw std::runtime_error("cannot open golden set " + file);
  std::vector<GoldenRecord> records;
  std::string line, tag, field;
  while (std::getline(f, line)) {
    std::istringstream is(line);
    if (!(is >> tag) || tag[0] == '#') continue;
    if (tag == "case") {
      records.push_back({line, {}, {}});
      while (is >> field) records.back().head.push_back(field);
      continue;
    }
    if (records.empty()) throw std::runtime_error("golden set " + file + ": data before a case");
    std::vector<std::string>& fields = records.back().tags[tag];
    while (is >> field) fields.push_back(field);
  }
  return records;
}

// The first n fields as raw bit patterns (hex) of dtype d.
inline Bytes golden_bits(const std::vector<std::string>& fields, Dtype d, std::int64_t n) {
  if (static_cast<std::int64_t>(fields.size()) < n)
    throw std::runtime_error("golden set: short data line");
  Bytes b(static_cast<std::size_t>(n * bytes_of(d)));
  for (std::int64_t i = 0; i < n; ++i)
    set_raw(d, b, i, std::stoull(fields[static_cast<std::size_t>(i)], nullptr, 16));
  return b;
}

// An f32 given as its hex bit pattern.
inline float golden_f32(const std::string& hex) {
  const auto b = static_cast<std::uint32_t>(std::stoul(hex, nullptr, 16));
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Integer fields (positions).
inline std::vector<std::int64_t> golden_ints(const std::vector<std::string>& fields) {
  std::vector<std::int64_t> v;
  for (const std::string& s : fields) v.push_back(std::stoll(s));
  return v;
}

}  // namespace ropecheck::kernel_tests
