/* Records one tinyrope call the way an engine would dump tensors from a debug run: x (input),
 * y (tinyrope's output) and positions, with the spec and the kernel's precision policy as
 * safetensors __metadata__ strings (the keys `ropecheck check` reads). Usage: tinyrope_dump OUT.
 *
 * The file is small (8 tokens x 2 heads x 64 dims, ~8 KiB). Positions include 0, the
 * power-of-two boundaries 4095/4096 and a long-context 65537, where f32 angles are least exact. */
#include <stdio.h>
#include <string.h>

#include "tinyrope.h"

enum { T = 8, H = 2, D = 64 };

static int write_all(FILE* f, const void* p, size_t n) { return fwrite(p, 1, n, f) == n; }

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: tinyrope_dump OUT.safetensors\n");
    return 2;
  }
  /* safetensors stores little-endian; this writer copies memory as is. */
  const uint16_t probe = 1;
  if (*(const unsigned char*)&probe != 1) {
    fprintf(stderr, "tinyrope_dump: big-endian host not supported\n");
    return 2;
  }
  static float x[T * H * D], y[T * H * D];
  const int64_t pos[T] = {0, 1, 2, 7, 100, 4095, 4096, 65537};
  /* Inputs in [-2, 2) from a fixed LCG: exact in f32 (24-bit numerators over 2^22). */
  uint32_t state = 12345u;
  for (int i = 0; i < T * H * D; ++i) {
    state = state * 1664525u + 1013904223u;
    x[i] = (float)((int32_t)(state >> 8) - (1 << 23)) / (float)(1 << 22);
  }
  const tinyrope_config cfg = {D, D, 10000.0, 1.0, 1};
  if (tinyrope_f32(&cfg, pos, T, H, H * D, D, x, y) != 0) {
    fprintf(stderr, "tinyrope_dump: kernel failed\n");
    return 1;
  }

  const size_t nx = sizeof x, np = sizeof pos;
  char header[1024];
  int len = snprintf(header, sizeof header,
                     "{\"__metadata__\":{\"layout\":\"half\",\"head_dim\":\"%d\",\"rotary_dim\":"
                     "\"%d\",\"base\":\"10000\",\"tensor_layout\":\"thd\",\"angle_precision\":"
                     "\"f32\",\"table_precision\":\"f32\",\"arithmetic_precision\":\"f32\","
                     "\"angle_recipe\":\"hf_f32\",\"fused\":\"false\"},"
                     "\"x\":{\"dtype\":\"F32\",\"shape\":[%d,%d,%d],\"data_offsets\":[0,%zu]},"
                     "\"y\":{\"dtype\":\"F32\",\"shape\":[%d,%d,%d],\"data_offsets\":[%zu,%zu]},"
                     "\"positions\":{\"dtype\":\"I64\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}}",
                     D, D, T, H, D, nx, T, H, D, nx, 2 * nx, T, 2 * nx, 2 * nx + np);
  if (len < 0 || (size_t)len >= sizeof header - 8) return 1;
  while (len % 8 != 0) header[len++] = ' '; /* the format allows trailing spaces (alignment) */
  const uint64_t hlen = (uint64_t)len;

  FILE* f = fopen(argv[1], "wb");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  const int ok = write_all(f, &hlen, 8) && write_all(f, header, (size_t)len) &&
                 write_all(f, x, nx) && write_all(f, y, nx) && write_all(f, pos, np);
  if (fclose(f) != 0 || !ok) {
    fprintf(stderr, "tinyrope_dump: cannot write %s\n", argv[1]);
    remove(argv[1]);
    return 1;
  }
  return 0;
}
