// The head loop of every path: all heads of one token in one call, the target's head function
// inlined into it. One indirect call per token instead of one per head: per head of 128 elements
// the call, the loop set-up and the prefetch cost as much as a sizeable part of the arithmetic
// (measured: bf16 at T=2048, [T][32][128], 1.46-1.62 -> 1.06-1.30 x memcpy). Included by each body
// file inside its target region (isa.hpp), after target.hpp; internal linkage.

namespace ropecheck::kernels::simd {
namespace {

// A hint: never faults, also past the end of the input.
inline void prefetch_ahead(const void* x, std::int64_t bytes) {
#ifdef ROPECHECK_X86
  const char* ahead = static_cast<const char*>(x) + kPrefetchAhead;
  for (std::int64_t b = 0; b < bytes; b += 64) _mm_prefetch(ahead + b, _MM_HINT_T0);
#endif
}

// HeadsFn (target.hpp) over the head function F.
template <class T, HeadFn<T> F>
void heads(const T* x, T* y, std::int64_t n_heads, std::int64_t head_stride, std::int64_t rd,
           std::int64_t off, const arith_t<T>* C, const arith_t<T>* S,
           std::int64_t prefetch_bytes) {
  for (std::int64_t hd = 0; hd < n_heads; ++hd) {
    if (prefetch_bytes > 0) prefetch_ahead(x + hd * head_stride, prefetch_bytes);
    F(x + hd * head_stride, y + hd * head_stride, rd, off, C, S);
  }
}

}  // namespace
}  // namespace ropecheck::kernels::simd
