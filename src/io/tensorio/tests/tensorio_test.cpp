// Readers: round trips, and every malformed input ends in a located FormatError (never a crash).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "ropecheck/tensorio/tensorio.hpp"

using namespace ropecheck::tensorio;

namespace {

std::vector<unsigned char> bytes(const std::string& s) { return {s.begin(), s.end()}; }

std::vector<unsigned char> st_file(const std::string& header, std::size_t data_bytes) {
  std::vector<unsigned char> f(8);
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) f[i] = static_cast<unsigned char>(n >> (8 * i));
  f.insert(f.end(), header.begin(), header.end());
  f.resize(f.size() + data_bytes, 0);
  return f;
}

std::string error_of(const std::vector<unsigned char>& f, bool npy = false, Limits lim = {}) {
  try {
    if (npy)
      parse_npy(f.data(), f.size(), "in", lim);
    else
      parse_safetensors(f.data(), f.size(), "in", lim);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

std::string tmp(const std::string& n) {
  return testing::TempDir() + "/ropecheck_tio_" + std::to_string(::getpid()) + "_" + n;
}

void write_bytes(const std::string& path, const std::vector<unsigned char>& b) {
  FILE* fp = std::fopen(path.c_str(), "wb");
  ASSERT_NE(fp, nullptr);
  if (!b.empty()) std::fwrite(b.data(), 1, b.size(), fp);
  std::fclose(fp);
}

std::vector<unsigned char> file_bytes(const std::string& path) {
  FILE* fp = std::fopen(path.c_str(), "rb");
  std::vector<unsigned char> b(1 << 16);
  b.resize(std::fread(b.data(), 1, b.size(), fp));
  std::fclose(fp);
  return b;
}

// The error of the streaming reader on f (written to a file) must be the in-memory reader's.
void expect_same_error(const std::vector<unsigned char>& f, bool npy) {
  const auto p = tmp(npy ? "same.npy" : "same.safetensors");
  write_bytes(p, f);
  std::string parsed, opened;
  try {
    if (npy)
      parse_npy(f.data(), f.size(), p);
    else
      parse_safetensors(f.data(), f.size(), p);
  } catch (const FormatError& e) {
    parsed = e.what();
  }
  try {
    if (npy)
      open_npy(p);
    else
      open_safetensors(p);
  } catch (const FormatError& e) {
    opened = e.what();
  }
  std::remove(p.c_str());
  EXPECT_EQ(opened, parsed) << f.size() << " bytes";
}

}  // namespace

TEST(TensorIO, SafetensorsRoundTrip) {
  TensorFile f;
  f.metadata["layout"] = "half";
  f.tensors.push_back(make_tensor("x", ElemType::bf16, {2, 3}, {1, -2, 0.5, 3, 1e30, -0.0}));
  f.tensors.push_back(make_tensor("y", ElemType::f16, {2, 3}, {1, -2, 0.5, 3, 65504, -0.0}));
  f.tensors.push_back(make_int_tensor("positions", ElemType::i32, {2}, {7, -3}));
  const auto p = tmp("rt.safetensors");
  write_safetensors(p, f);
  const auto g = read_safetensors(p);
  EXPECT_EQ(g.metadata.at("layout"), "half");
  ASSERT_NE(g.find("x"), nullptr);
  EXPECT_EQ(g.find("x")->shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(g.find("x")->data, f.tensors[0].data);
  EXPECT_EQ(g.find("y")->get(4), 65504.0);
  EXPECT_EQ(g.find("positions")->get_int(1), -3);
  std::remove(p.c_str());
}

TEST(TensorIO, NpyRoundTrip) {
  for (auto ty : {ElemType::f64, ElemType::f32, ElemType::f16}) {
    const auto t = make_tensor("a", ty, {3, 2}, {1, 2, 3, 4, 5, -6});
    const auto p = tmp("rt.npy");
    write_npy(p, t);
    const auto u = read_npy(p);
    EXPECT_EQ(u.type, ty);
    EXPECT_EQ(u.shape, t.shape);
    EXPECT_EQ(u.data, t.data);
    std::remove(p.c_str());
  }
  const auto t = make_int_tensor("p", ElemType::i64, {4}, {0, 1, -5, 1LL << 40});
  const auto p = tmp("p.npy");
  write_npy(p, t);
  EXPECT_EQ(read_npy(p).get_int(3), 1LL << 40);
  std::remove(p.c_str());
}

TEST(TensorIO, SafetensorsMalformed) {
  auto has = [](const std::string& e, const std::string& s) {
    return e.find(s) != std::string::npos;
  };
  EXPECT_TRUE(has(error_of(bytes("abc")), "truncated"));
  {  // header length beyond the file
    auto f = st_file("{}", 0);
    f[0] = 200;
    EXPECT_TRUE(has(error_of(f), "runs past the end")) << error_of(f);
  }
  EXPECT_TRUE(has(error_of(st_file("{not json", 0)), "malformed"));
  EXPECT_TRUE(has(error_of(st_file("[1,2]", 0)), "not an object"));
  EXPECT_TRUE(has(error_of(st_file(R"({"x":{"dtype":"Q9","shape":[1],"data_offsets":[0,4]}})", 4)),
                  "unknown dtype 'Q9'"));
  EXPECT_TRUE(
      has(error_of(st_file(R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4)),
          "negative or overflows"));
  EXPECT_TRUE(
      has(error_of(st_file(
              R"({"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4)),
          "negative or overflows"));
  EXPECT_TRUE(has(error_of(st_file(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4)),
                  "byte count 4 != shape [2]"));
  EXPECT_TRUE(has(error_of(st_file(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}})", 4)),
                  "past the data section"));
  EXPECT_TRUE(has(error_of(st_file(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4)),
                  "begin 4 > end 0"));
  EXPECT_TRUE(has(
      error_of(st_file(
          R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
          8)),
      "overlap"));
  EXPECT_TRUE(has(error_of(st_file(R"({"__metadata__":{"base":10000}})", 0)), "must be a string"));
  EXPECT_TRUE(has(error_of(st_file(R"({"x":{"dtype":"F32","shape":[1]}})", 4)), "data_offsets"));
  Limits small;
  small.max_bytes = 16;
  EXPECT_TRUE(has(error_of(st_file("{}", 64), false, small), "memory limit"));
  // Every prefix of a valid file is rejected cleanly.
  TensorFile ok;
  ok.tensors.push_back(make_tensor("x", ElemType::f32, {2}, {1, 2}));
  const auto p = tmp("ok.safetensors");
  write_safetensors(p, ok);
  FILE* fp = std::fopen(p.c_str(), "rb");
  std::vector<unsigned char> full(4096);
  full.resize(std::fread(full.data(), 1, full.size(), fp));
  std::fclose(fp);
  std::remove(p.c_str());
  for (std::size_t k = 0; k < full.size(); ++k) {
    std::vector<unsigned char> pre(full.begin(), full.begin() + k);
    EXPECT_NE(error_of(pre), "") << "prefix " << k;
  }
}

TEST(TensorIO, NpyMalformed) {
  auto npy = [](const std::string& dict, std::size_t data) {
    std::string h = "\x93NUMPY";
    h += '\x01';
    h += '\x00';
    h += static_cast<char>(dict.size() & 0xFF);
    h += static_cast<char>(dict.size() >> 8);
    h += dict;
    std::vector<unsigned char> f(h.begin(), h.end());
    f.resize(f.size() + data, 0);
    return f;
  };
  auto has = [](const std::string& e, const std::string& s) {
    return e.find(s) != std::string::npos;
  };
  EXPECT_EQ(error_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8), true),
            "");
  EXPECT_TRUE(has(error_of(bytes("NUMPY......"), true), "bad magic"));
  EXPECT_TRUE(
      has(error_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 8), true),
          "needs 12"));
  EXPECT_TRUE(
      has(error_of(npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8), true),
          "big-endian"));
  EXPECT_TRUE(
      has(error_of(npy("{'descr': '<u1', 'fortran_order': False, 'shape': (2,), }", 2), true),
          "unsupported npy dtype"));
  EXPECT_TRUE(
      has(error_of(npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16), true),
          "Fortran"));
  EXPECT_TRUE(
      has(error_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 8), true),
          "negative"));
  EXPECT_TRUE(has(
      error_of(
          npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 8),
          true),
      "too large"));
  EXPECT_TRUE(has(error_of(npy("{'descr': '<f4', 'shape': (2,), }", 8), true), "lacks"));
  EXPECT_TRUE(
      has(error_of(npy("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", 8), true),
          "True or False"));
  auto f = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8);
  for (std::size_t k = 0; k + 1 < f.size(); ++k) {
    std::vector<unsigned char> pre(f.begin(), f.begin() + k);
    EXPECT_NE(error_of(pre, true), "") << "prefix " << k;
  }
}

// ---- streaming (open_*) ------------------------------------------------------------------------

TEST(TensorIO, OpenReadsWhatReadReads) {
  TensorFile f;
  f.metadata["layout"] = "half";
  f.tensors.push_back(make_tensor("x", ElemType::bf16, {2, 3}, {1, -2, 0.5, 3, 1e30, -0.0}));
  f.tensors.push_back(make_tensor("y", ElemType::f64, {3}, {1.5, -2, 1e-300}));
  f.tensors.push_back(make_int_tensor("positions", ElemType::i32, {2}, {7, -3}));
  const auto p = tmp("open.safetensors");
  write_safetensors(p, f);
  const TensorFileRef r = open_safetensors(p);
  EXPECT_EQ(r.metadata, f.metadata);
  ASSERT_EQ(r.tensors.size(), 3u);
  for (const Tensor& t : f.tensors) {
    const TensorRef* u = r.find(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    EXPECT_EQ(u->type, t.type);
    EXPECT_EQ(u->shape, t.shape);
    std::vector<unsigned char> all(t.data.size());
    u->read(0, u->numel(), all.data());
    EXPECT_EQ(all, t.data) << t.name;
    const int eb = elem_bytes(t.type);
    std::vector<unsigned char> mid(eb);  // one element from the middle
    u->read(1, 1, mid.data());
    EXPECT_EQ(decode(t.type, mid.data()), t.get(1));
    EXPECT_THROW(u->read(1, u->numel(), all.data()), FormatError);  // past its end
    EXPECT_THROW(u->read(-1, 1, all.data()), FormatError);
  }
  std::remove(p.c_str());

  const auto q = tmp("open.npy");
  const auto t = make_tensor("a", ElemType::f16, {3, 2}, {1, 2, 3, 4, 5, -6});
  write_npy(q, t);
  const TensorRef u = open_npy(q);
  EXPECT_EQ(u.shape, t.shape);
  std::vector<unsigned char> all(t.data.size());
  u.read(0, 6, all.data());
  EXPECT_EQ(all, t.data);
  std::remove(q.c_str());
}

// Every malformed input the in-memory reader refuses, the streaming one refuses with the same
// message: the same checks, the file's size standing in for the byte count.
TEST(TensorIO, OpenRefusesWhatParseRefuses) {
  const char* headers[] = {
      "{not json",
      "[1,2]",
      R"({"x":{"dtype":"Q9","shape":[1],"data_offsets":[0,4]}})",
      R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})",
      R"({"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})",
      R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})",
      R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}})",
      R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})",
      R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      R"({"__metadata__":{"base":10000}})",
      R"({"x":{"dtype":"F32","shape":[1]}})",
  };
  for (const char* h : headers) expect_same_error(st_file(h, 8), false);
  auto big = st_file("{}", 0);
  big[0] = 200;
  expect_same_error(big, false);
  TensorFile ok;
  ok.tensors.push_back(make_tensor("x", ElemType::f32, {2}, {1, 2}));
  const auto p = tmp("ok2.safetensors");
  write_safetensors(p, ok);
  const auto full = file_bytes(p);
  std::remove(p.c_str());
  for (std::size_t k = 0; k < full.size(); ++k)
    expect_same_error({full.begin(), full.begin() + k}, false);

  const auto q = tmp("ok2.npy");
  write_npy(q, make_tensor("a", ElemType::f32, {2}, {1, 2}));
  const auto npy = file_bytes(q);
  std::remove(q.c_str());
  for (std::size_t k = 0; k < npy.size(); ++k)
    expect_same_error({npy.begin(), npy.begin() + k}, true);
  auto v9 = npy;
  v9[6] = 9;  // unsupported version
  expect_same_error(v9, true);
}

// Limits::max_bytes bounds what the streaming reader holds, the header; the data may be larger.
TEST(TensorIO, OpenLimitsTheHeaderNotTheData) {
  TensorFile f;
  f.tensors.push_back(make_tensor("x", ElemType::f32, {1024}, std::vector<double>(1024, 1.0)));
  const auto p = tmp("limit.safetensors");
  write_safetensors(p, f);
  Limits lim;
  lim.max_bytes = 1024;  // the file is ~4.1 KB, its header < 100 bytes
  EXPECT_THROW(read_safetensors(p, lim), FormatError);
  EXPECT_EQ(open_safetensors(p, lim).tensors.at(0).numel(), 1024);
  lim.max_bytes = 16;
  try {
    open_safetensors(p, lim);
    ADD_FAILURE() << "a header over the limit was accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("larger than the memory limit of 16 bytes"),
              std::string::npos)
        << e.what();
  }
  std::remove(p.c_str());
}

// A file that shrinks after it was opened (validated) is a FormatError when read, not a crash.
TEST(TensorIO, FileShrinkingAfterOpenIsAFormatError) {
  TensorFile f;
  f.tensors.push_back(make_tensor("x", ElemType::f32, {256}, std::vector<double>(256, 2.0)));
  const auto p = tmp("shrink.safetensors");
  write_safetensors(p, f);
  const TensorFileRef r = open_safetensors(p);
  ASSERT_EQ(::truncate(p.c_str(), 200), 0);
  std::vector<unsigned char> buf(1024);
  try {
    r.tensors.at(0).read(0, 256, buf.data());
    ADD_FAILURE() << "read past the new end of the file";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("truncated while being read"), std::string::npos)
        << e.what();
  }
  std::remove(p.c_str());
}
