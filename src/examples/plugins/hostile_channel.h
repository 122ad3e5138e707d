/* Hostile plugins against the worker's channel (included by c_rope.c, PLUGIN_MODE >= 20): each
 * misbehaves only in calls on f64 data and is the correct c_rope kernel otherwise, so a run with
 * --dtypes f64,f32 has a hostile configuration and, after it, a healthy one that must pass on a
 * fresh worker. The plugin runs inside the worker process, so it can write on the pipe the host
 * reads replies from; the host must classify every one of these and carry on.
 *
 *   CH_RANDOM_FDS     4 KiB of pseudo-random bytes on every descriptor 3..63  -> protocol_violation
 *   CH_HUGE_HEADER    a reply header announcing 2^40 bytes                    -> protocol_violation
 *   CH_TRUNCATED_HANG a valid header, half the body, then a hang              -> protocol_violation
 *   CH_UNASKED_TYPE   a well-formed supports() answer to an apply() request   -> protocol_violation
 *   CH_UNASKED_ID     a well-formed apply() reply to a request not yet asked  -> protocol_violation
 *   CH_WRONG_SHAPE    a well-formed apply() reply with one element too many   -> protocol_violation
 *   CH_FORK_HOLD      forks a child that keeps the pipes open, then exits     -> exited
 *   CH_STDERR_FLOOD   100 MB on stderr (once), then computes correctly        -> pass
 *   CH_ALLOC_FOREVER  allocates and touches memory until it is stopped        -> out_of_memory
 *   CH_SUPPORTS_HANG  supports() spins for f64                                -> timeout
 *   CH_CLOSE_FDS      closes descriptors 3..63 and returns                     -> exited
 *
 * The wire format is ropecheck's (src/plugin/ipc.hpp, worker.hpp), typed here by hand as a
 * hostile plugin would: header [u32 type][u32 id][u64 length], apply = 4, supports = 3; the host
 * numbers its requests 1, 2, ... per worker (this plugin has no supports(), so its n-th apply()
 * call answers request n). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define CH_RANDOM_FDS 20
#define CH_HUGE_HEADER 21
#define CH_TRUNCATED_HANG 22
#define CH_UNASKED_TYPE 23
#define CH_UNASKED_ID 24
#define CH_WRONG_SHAPE 25
#define CH_FORK_HOLD 26
#define CH_STDERR_FLOOD 27
#define CH_ALLOC_FOREVER 28
#define CH_SUPPORTS_HANG 29
#define CH_CLOSE_FDS 30

static uint32_t ch_calls; /* apply() calls of this worker: the id of the current request */

static inline void ch_write_all_fds(const void* p, size_t n) {
  for (int fd = 3; fd < 64; ++fd) {
    const ssize_t k = write(fd, p, n);
    (void)k;
  }
}

/* [type][id][len] then the ApplyReply fields {status, fault_kind, detail_len, result_bytes}. */
static inline size_t ch_reply_head(unsigned char* b, uint32_t type, uint32_t id, uint64_t len,
                            uint64_t result_bytes) {
  const int32_t status = 0, fault = 0;
  const uint64_t detail = 0;
  memcpy(b, &type, 4);
  memcpy(b + 4, &id, 4);
  memcpy(b + 8, &len, 8);
  memcpy(b + 16, &status, 4);
  memcpy(b + 20, &fault, 4);
  memcpy(b + 24, &detail, 8);
  memcpy(b + 32, &result_bytes, 8);
  return 40;
}

/* The bytes of the call's result extent (positive strides: the view starts at element 0). */
static inline uint64_t ch_result_bytes(const ropecheck_spec* s, const ropecheck_tensor* t) {
  const int eb = t->dtype == ROPECHECK_DTYPE_F64 ? 8 : 4;
  return (uint64_t)((t->n_tokens - 1) * t->token_stride + (t->n_heads - 1) * t->head_stride +
                    s->head_dim) *
         (uint64_t)eb;
}

static inline void ch_spin(void) {
  for (;;) sleep(1000);
}

/* A well-formed apply() reply (type, id, result_bytes chosen by the caller) on every descriptor. */
static inline void ch_fake_reply(uint32_t type, uint32_t id, uint64_t result_bytes) {
  unsigned char head[40];
  const uint64_t len = 24 + result_bytes;
  ch_reply_head(head, type, id, len, result_bytes);
  unsigned char* body = (unsigned char*)calloc(1, 40 + result_bytes);
  if (!body) return;
  memcpy(body, head, 40);
  ch_write_all_fds(body, 40 + result_bytes);
  free(body);
}

static void ch_misbehave(const ropecheck_spec* s, const ropecheck_tensor* t) {
  ++ch_calls;
  if (t->dtype != ROPECHECK_DTYPE_F64) return;
  const uint64_t rb = ch_result_bytes(s, t);
  (void)rb;
#if PLUGIN_MODE == CH_RANDOM_FDS
  unsigned char junk[4096];
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < sizeof junk; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    junk[i] = (unsigned char)(x >> 56);
  }
  ch_write_all_fds(junk, sizeof junk);
#elif PLUGIN_MODE == CH_HUGE_HEADER
  unsigned char head[16];
  const uint32_t type = 4;
  const uint64_t len = (uint64_t)1 << 40;
  memcpy(head, &type, 4);
  memcpy(head + 4, &ch_calls, 4);
  memcpy(head + 8, &len, 8);
  ch_write_all_fds(head, sizeof head);
#elif PLUGIN_MODE == CH_TRUNCATED_HANG
  unsigned char head[40];
  ch_reply_head(head, 4, ch_calls, 24 + rb, rb);
  ch_write_all_fds(head, sizeof head);
  unsigned char half[64] = {0};
  ch_write_all_fds(half, rb / 2 < sizeof half ? rb / 2 : sizeof half);
  ch_spin();
#elif PLUGIN_MODE == CH_UNASKED_TYPE
  unsigned char msg[20];
  const uint32_t type = 3, one = 1;
  const uint64_t len = 4;
  memcpy(msg, &type, 4);
  memcpy(msg + 4, &ch_calls, 4);
  memcpy(msg + 8, &len, 8);
  memcpy(msg + 16, &one, 4);
  ch_write_all_fds(msg, sizeof msg);
#elif PLUGIN_MODE == CH_UNASKED_ID
  ch_fake_reply(4, ch_calls + 1000, rb);
#elif PLUGIN_MODE == CH_WRONG_SHAPE
  ch_fake_reply(4, ch_calls, rb + 8);
#elif PLUGIN_MODE == CH_FORK_HOLD
  if (fork() == 0) ch_spin(); /* the child holds every descriptor of the worker */
  _exit(0);
#elif PLUGIN_MODE == CH_STDERR_FLOOD
  static int flooded;
  if (!flooded) {
    flooded = 1;
    static char line[1 << 20];
    memset(line, 'x', sizeof line);
    for (int i = 0; i < 100; ++i) {
      const ssize_t k = write(2, line, sizeof line);
      (void)k;
    }
  }
#elif PLUGIN_MODE == CH_ALLOC_FOREVER
  static void* volatile kept; /* a chain through every block: the allocations cannot be elided */
  for (;;) {
    char* p = (char*)malloc(16u << 20);
    if (p) {
      memset(p, 1, 16u << 20);
      memcpy(p, (const void*)&kept, sizeof(void*));
      kept = p;
    } else {
      usleep(1000);
    }
  }
#elif PLUGIN_MODE == CH_CLOSE_FDS
  for (int fd = 3; fd < 64; ++fd) close(fd);
#endif
}

#if PLUGIN_MODE == CH_SUPPORTS_HANG
static int ch_supports(const ropecheck_spec* s, int32_t dtype, void* user) {
  (void)s;
  (void)user;
  if (dtype == ROPECHECK_DTYPE_F64)
    for (volatile int spin = 1; spin;) {
    }
  return 1;
}
#define PLUGIN_SUPPORTS ch_supports
#endif
