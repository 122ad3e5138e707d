// Framing between the oracle and the plugin worker: [u32 type][u32 id][u64 length][payload]. The
// worker is a fork of the same binary, so plain structs travel as bytes. The host reads the worker
// as untrusted input: the plugin runs inside the worker and can write anything on its pipe, so
// every reply is checked (recv_reply: type, id, length against what the request can produce)
// before anything is allocated or indexed. The id pairs a reply with its request: the host numbers
// its requests 1, 2, ... per worker (0: the greeting) and the worker echoes the number.
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
  // host -> worker: as apply, for the descriptor's apply_backward; the reply is a Msg::apply one
  apply_backward,
};

// stopped: the Watch asked to stop waiting; violation: bytes that are not the reply expected.
enum class IoResult { ok, eof, timeout, error, stopped, violation };

inline constexpr std::size_t kHeaderBytes = 16;

// While the host waits on the worker: its stdout/stderr pipe is drained (the first `cap` bytes
// forwarded to our stderr, the rest discarded, so a plugin printing 100 MB neither blocks on a
// full pipe nor floods the terminal), and `check` runs every kWatchPeriod seconds of waiting
// (false: stop waiting, IoResult::stopped; the caller knows why, e.g. the memory limit).
struct Watch {
  int drain_fd = -1;
  std::uint64_t* drained = nullptr;  // bytes read from drain_fd so far (forwarded up to cap)
  std::uint64_t cap = 64 << 10;
  bool (*check)(void* ctx) = nullptr;
  void* ctx = nullptr;
};
inline constexpr double kWatchPeriod = 0.02;

// Deadline-bounded full read/write on a pipe (poll + read/write; EINTR retried). A deadline
// >= 1e299 is none: the call blocks without polling first (the worker's side).
// `done` (if set) counts the bytes moved, also when the call fails part way.
IoResult write_all(int fd, const void* data, std::size_t n, double deadline);
IoResult read_all(int fd, void* data, std::size_t n, double deadline, const Watch* w = nullptr,
                  std::size_t* done = nullptr);
double now_s();  // monotonic clock, seconds

IoResult send(int fd, Msg type, std::uint32_t id, const std::vector<char>& payload, double deadline,
              const Watch* w = nullptr);
// The worker's side: the host's requests (refuses payloads larger than max_len).
IoResult recv(int fd, Msg& type, std::uint32_t& id, std::vector<char>& payload,
              std::uint64_t max_len, double deadline);

// The host's side: the one reply a request can have.
struct Expect {
  Msg type;
  bool or_load_error = false;  // the greeting: hello or load_error
  std::uint32_t id = 0;
  std::uint64_t min_len = 0, max_len = 0;  // payload bytes the request can produce
};
struct Reply {
  IoResult io = IoResult::ok;
  Msg type{};
  std::vector<char> payload;         // io == ok: the checked payload
  std::string why;                   // io == violation: what was wrong with it
  std::vector<unsigned char> first;  // the first bytes received (header included), up to 16
  std::uint64_t bytes = 0;           // bytes received for this reply (and drained after it)
};
// Reads a header, checks it against `e` (type, id, length) and only then allocates and reads the
// payload. A header that is not the reply, or a payload cut short by the deadline, is a violation;
// what is immediately readable after a bad header is drained (up to 1 MiB) into `bytes`.
Reply recv_reply(int fd, const Expect& e, double deadline, const Watch* w = nullptr);
// "the plugin's process sent N bytes that are not a reply: <first bytes in hex> (<why>)"
std::string not_a_reply(const Reply& r);

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
  bool at_end() const { return pos_ == buf_.size(); }
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
