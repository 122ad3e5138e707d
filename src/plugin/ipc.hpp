// Framing between the oracle and the plugin worker: [u32 type][u64 length][payload]. The worker is
// a fork of the same binary, so plain structs travel as bytes; lengths are still checked because a
// plugin may scribble over the worker's memory before it answers.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace ropecheck::plugin::ipc {

enum class Msg : std::uint32_t {
  hello = 1,   // worker -> host: descriptor (load succeeded)
  load_error,  // worker -> host: message
  supports,    // host -> worker: spec + dtype;  worker -> host: int32
  apply,       // host -> worker: ApplyHeader + arrays; worker -> host: ApplyReply + bytes
  quit,        // host -> worker
};

enum class IoResult { ok, eof, timeout, error };

// Deadline-bounded full read/write on a pipe (poll + read/write; EINTR retried). A deadline
// >= 1e299 is none: the call blocks without polling first (the worker's side).
IoResult write_all(int fd, const void* data, std::size_t n, double deadline);
IoResult read_all(int fd, void* data, std::size_t n, double deadline);
double now_s();  // monotonic clock, seconds

IoResult send(int fd, Msg type, const std::vector<char>& payload, double deadline);
// Refuses payloads larger than max_len (a corrupted length must not make the host allocate 2^63).
IoResult recv(int fd, Msg& type, std::vector<char>& payload, std::uint64_t max_len,
              double deadline);

class Writer {
 public:
  template <class T>
  void put(const T& v) {
    put_bytes(&v, sizeof(T));
  }
  // resize + memcpy rather than vector::insert, which GCC 12 flags with a false
  // -Wstringop-overflow when inlined into a fresh Writer.
  void put_bytes(const void* p, std::size_t n) {
    if (n == 0) return;
    const std::size_t at = buf.size();
    buf.resize(at + n);
    std::memcpy(buf.data() + at, p, n);
  }
  void put_string(const std::string& s) {
    put<std::uint64_t>(s.size());
    put_bytes(s.data(), s.size());
  }
  std::vector<char> buf;
};

class Reader {
 public:
  explicit Reader(const std::vector<char>& b) : buf_(b) {}
  template <class T>
  bool get(T& v) {
    if (buf_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(&v, buf_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  const char* take(std::size_t n) {
    if (buf_.size() - pos_ < n) return nullptr;
    const char* p = buf_.data() + pos_;
    pos_ += n;
    return p;
  }
  bool get_string(std::string& s) {
    std::uint64_t n = 0;
    if (!get(n)) return false;
    const char* p = take(n);
    if (!p) return false;
    s.assign(p, n);
    return true;
  }

 private:
  const std::vector<char>& buf_;
  std::size_t pos_ = 0;
};

}  // namespace ropecheck::plugin::ipc
