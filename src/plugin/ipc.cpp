#include "ipc.hpp"

#include <poll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <ctime>

namespace ropecheck::plugin::ipc {

double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

namespace {
// Reads what the worker printed (drain_fd): the first `cap` bytes go to our stderr, the rest is
// dropped. Non-blocking: only what poll said is there.
void drain(const Watch& w) {
  char buf[65536];
  const ssize_t k = ::read(w.drain_fd, buf, sizeof buf);
  if (k <= 0) return;
  const std::uint64_t before = *w.drained;
  *w.drained += static_cast<std::uint64_t>(k);
  if (before < w.cap) {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(w.cap - before, k));
    [[maybe_unused]] const ssize_t r = ::write(STDERR_FILENO, buf, n);
    if (*w.drained >= w.cap) {
      static const char note[] = "\n[ropecheck: the plugin's further output is discarded]\n";
      [[maybe_unused]] const ssize_t r2 = ::write(STDERR_FILENO, note, sizeof note - 1);
    }
  }
}

// Waits until fd is ready for `events` or the deadline passes; with a Watch, drains the worker's
// output meanwhile and runs its check every kWatchPeriod.
IoResult wait_fd(int fd, short events, double deadline, const Watch* w = nullptr) {
  const bool draining = w && w->drain_fd >= 0 && w->drained;
  for (;;) {
    double left = deadline - now_s();
    if (left <= 0) return IoResult::timeout;
    if (w && w->check) left = std::min(left, kWatchPeriod);
    pollfd p[2] = {{fd, events, 0}, {draining ? w->drain_fd : -1, POLLIN, 0}};
    const int ms = static_cast<int>(std::min(left * 1000.0 + 1.0, 2.0e9));
    const int r = poll(p, draining ? 2 : 1, ms);
    if (r < 0) {
      if (errno == EINTR) continue;
      return IoResult::error;
    }
    if (draining && p[1].revents) drain(*w);
    // Readable, writable, or HUP/ERR: the read/write below tells which.
    if (p[0].revents != 0) return IoResult::ok;
    if (w && w->check && !w->check(w->ctx)) return IoResult::stopped;
    // else re-check the deadline
  }
}

// Without a deadline (the worker's side) a blocking read/write needs no poll first: it waits by
// itself, and a HUP/ERR shows in its result as it would after poll. A non-blocking descriptor
// answers EAGAIN, and the loop then polls. With a deadline, poll always comes first.
bool forever(double deadline) { return deadline >= 1e299; }
}  // namespace

IoResult write_all(int fd, const void* data, std::size_t n, double deadline) {
  const char* p = static_cast<const char*>(data);
  bool wait = !forever(deadline);
  while (n > 0) {
    if (wait)
      if (auto w = wait_fd(fd, POLLOUT, deadline); w != IoResult::ok) return w;
    wait = !forever(deadline);
    const ssize_t k = ::write(fd, p, n);
    if (k < 0) {
      if (errno == EAGAIN) wait = true;
      if (errno == EINTR || errno == EAGAIN) continue;
      return errno == EPIPE ? IoResult::eof : IoResult::error;
    }
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return IoResult::ok;
}

IoResult read_all(int fd, void* data, std::size_t n, double deadline, const Watch* watch,
                  std::size_t* done) {
  char* p = static_cast<char*>(data);
  bool wait = !forever(deadline);
  while (n > 0) {
    if (done) *done = static_cast<std::size_t>(p - static_cast<char*>(data));
    if (wait)
      if (auto w = wait_fd(fd, POLLIN, deadline, watch); w != IoResult::ok) return w;
    wait = !forever(deadline);
    const ssize_t k = ::read(fd, p, n);
    if (k < 0) {
      if (errno == EAGAIN) wait = true;
      if (errno == EINTR || errno == EAGAIN) continue;
      return IoResult::error;
    }
    if (k == 0) return IoResult::eof;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  if (done) *done = static_cast<std::size_t>(p - static_cast<char*>(data));
  return IoResult::ok;
}

// Header and payload in one writev: the reader, woken by the first bytes, then finds the whole
// message in the pipe (two writes cost it a second wake-up per message, and with it a context
// switch each way: most of a validate run's system time went there).
IoResult send(int fd, Msg type, std::uint32_t id, const std::vector<char>& payload, double deadline,
              const Watch* watch) {
  char head[kHeaderBytes];
  const auto t = static_cast<std::uint32_t>(type);
  const std::uint64_t len = payload.size();
  std::memcpy(head, &t, 4);
  std::memcpy(head + 4, &id, 4);
  std::memcpy(head + 8, &len, 8);
  iovec v[2] = {{head, sizeof head}, {const_cast<char*>(payload.data()), payload.size()}};
  int first = 0;  // v[first..1] is what is left to write
  bool wait = !forever(deadline);
  while (first < 2) {
    if (wait)
      if (auto w = wait_fd(fd, POLLOUT, deadline, watch); w != IoResult::ok) return w;
    wait = !forever(deadline);
    const ssize_t k = ::writev(fd, v + first, 2 - first);
    if (k < 0) {
      if (errno == EAGAIN) wait = true;
      if (errno == EINTR || errno == EAGAIN) continue;
      return errno == EPIPE ? IoResult::eof : IoResult::error;
    }
    auto done = static_cast<std::size_t>(k);
    while (first < 2 && done >= v[first].iov_len) done -= v[first++].iov_len;
    if (first < 2) {
      v[first].iov_base = static_cast<char*>(v[first].iov_base) + done;
      v[first].iov_len -= done;
    }
  }
  return IoResult::ok;
}

IoResult recv(int fd, Msg& type, std::uint32_t& id, std::vector<char>& payload,
              std::uint64_t max_len, double deadline) {
  char head[kHeaderBytes];
  if (auto r = read_all(fd, head, sizeof head, deadline); r != IoResult::ok) return r;
  std::uint32_t t = 0;
  std::uint64_t len = 0;
  std::memcpy(&t, head, 4);
  std::memcpy(&id, head + 4, 4);
  std::memcpy(&len, head + 8, 8);
  if (len > max_len) return IoResult::error;
  type = static_cast<Msg>(t);
  payload.resize(len);
  return read_all(fd, payload.data(), len, deadline);
}

namespace {
// Whatever else is readable right now (after a bad header): counted and dropped.
std::uint64_t drain_now(int fd) {
  std::uint64_t n = 0;
  char buf[65536];
  while (n < (1u << 20)) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0 || !(p.revents & POLLIN)) break;
    const ssize_t k = ::read(fd, buf, sizeof buf);
    if (k <= 0) break;
    n += static_cast<std::uint64_t>(k);
  }
  return n;
}

std::string header_problem(const Expect& e, std::uint32_t t, std::uint32_t id, std::uint64_t len) {
  const bool type_ok = t == static_cast<std::uint32_t>(e.type) ||
                       (e.or_load_error && t == static_cast<std::uint32_t>(Msg::load_error));
  if (!type_ok)
    return "message type " + std::to_string(t) + " where the reply has type " +
           std::to_string(static_cast<std::uint32_t>(e.type));
  if (id != e.id)
    return "a reply to request " + std::to_string(id) + " where request " + std::to_string(e.id) +
           " was asked";
  if (t == static_cast<std::uint32_t>(Msg::load_error))
    return len <= (1u << 16) ? "" : "a long load error";
  if (len < e.min_len || len > e.max_len)
    return "a length of " + std::to_string(len) + " bytes where the request can produce " +
           (e.min_len == e.max_len
                ? std::to_string(e.max_len)
                : std::to_string(e.min_len) + " to " + std::to_string(e.max_len));
  return "";
}
}  // namespace

Reply recv_reply(int fd, const Expect& e, double deadline, const Watch* w) {
  Reply r;
  unsigned char head[kHeaderBytes];
  std::size_t got = 0;
  r.io = read_all(fd, head, sizeof head, deadline, w, &got);
  r.first.assign(head, head + got);
  r.bytes = got;
  if (r.io != IoResult::ok) {
    // Part of a header and then nothing: not a reply either.
    if (got > 0 && r.io == IoResult::timeout) {
      r.io = IoResult::violation;
      r.why = "a header cut short, then nothing until the deadline";
    }
    return r;
  }
  std::uint32_t t = 0, id = 0;
  std::uint64_t len = 0;
  std::memcpy(&t, head, 4);
  std::memcpy(&id, head + 4, 4);
  std::memcpy(&len, head + 8, 8);
  if (std::string why = header_problem(e, t, id, len); !why.empty()) {
    r.io = IoResult::violation;
    r.why = std::move(why);
    r.bytes += drain_now(fd);
    return r;
  }
  r.type = static_cast<Msg>(t);
  r.payload.resize(static_cast<std::size_t>(len));  // len <= e.max_len, checked above
  r.io = read_all(fd, r.payload.data(), r.payload.size(), deadline, w, &got);
  r.bytes += got;
  for (std::size_t i = 0; i < got && r.first.size() < 16; ++i)
    r.first.push_back(static_cast<unsigned char>(r.payload[i]));
  if (r.io == IoResult::timeout) {
    r.io = IoResult::violation;
    r.why = "a header announcing " + std::to_string(len) + " bytes, then " + std::to_string(got) +
            " of them and nothing more until the deadline";
  }
  return r;
}

std::string not_a_reply(const Reply& r) {
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (std::size_t i = 0; i < r.first.size() && i < 16; ++i) {
    if (i) hex += ' ';
    hex += digits[r.first[i] >> 4];
    hex += digits[r.first[i] & 15];
  }
  std::string m = "the plugin's process sent " + std::to_string(r.bytes) +
                  " bytes that are not a reply: " + (hex.empty() ? "(none)" : hex);
  if (!r.why.empty()) m += " (" + r.why + ")";
  return m;
}

}  // namespace ropecheck::plugin::ipc
