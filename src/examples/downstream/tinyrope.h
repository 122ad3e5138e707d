/* tinyrope: the "downstream" RoPE kernel library of the example project. It stands for the kernel
 * of an inference engine that adopts ropecheck in its CI; it knows nothing of ropecheck. */
#ifndef TINYROPE_H
#define TINYROPE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tinyrope_config {
  int64_t head_dim;   /* elements per head vector */
  int64_t rotary_dim; /* even, <= head_dim; the remaining dims pass through */
  double base;        /* theta_i = base^(-2i/rotary_dim) */
  double scale;       /* magnitude scale applied with cos/sin (1 for plain RoPE) */
  int neox;           /* 1: pairs (i, i + rotary_dim/2) (HF rotate_half); 0: pairs (2i, 2i+1) */
} tinyrope_config;

/* Rotates n_tokens x n_heads vectors of f32; element (t, h, j) is at t * token_stride +
 * h * head_stride + j in both in and out. out may equal in. Returns 0, or -1 when out of memory or
 * when the config is invalid. */
int tinyrope_f32(const tinyrope_config* cfg, const int64_t* positions, int64_t n_tokens,
                 int64_t n_heads, int64_t token_stride, int64_t head_stride, const float* in,
                 float* out);

#ifdef __cplusplus
}
#endif

#endif
