// `check`'s spec keys (safetensors __metadata__ strings, or --spec JSON values; --spec wins) ->
// the spec, the declared policy and the fused FP8 chain, each key parsed strictly (UsageError
// naming the key); shared with `validate --spec` (cli.hpp: read_spec_arg, resolve_check_spec).
//
// Spec keys (safetensors __metadata__ strings, or --spec JSON values; --spec wins). Or
// --hf-config config.json for the RoPE spec (layout ... sections below; if the keys also give a
// layout, the spec they describe must equal the config's, else exit 2):
//   layout           interleaved | half | proportional | mrope | imrope | axial   (required)
//   head_dim         default: the last dimension of x
//   rotary_dim       default: head_dim rounded down to even
//   base             default 10000
//   scale            magnitude scale s, default 1 (the variant's attention factor multiplies it)
//   sections         mrope/imrope: mrope_section "t,h,w" in pairs (e.g. "16,24,24");
//                    axial: pairs per axis. Comma-separated integers (a JSON array in --spec).
//   scaling          none (default) | linear | dynamic | yarn | llama3 | freq_factors | longrope
//   Scaling parameters (the spec.hpp Scaling fields, same names and defaults; each used only by
//   the kinds listed):
//     factor                              linear, dynamic, yarn, llama3        (default 1)
//     original_max_position_embeddings    yarn, llama3, longrope
//     max_position_embeddings             dynamic (L0), longrope
//     seq_len                             dynamic, longrope: the current sequence length;
//                                         default max(position) + 1 (transformers' run-time
//                                         length), a smaller one exits 2; also taken with
//                                         --hf-config when --seq-len is not given
//     beta_fast, beta_slow                yarn (32, 1)
//     truncate                            yarn: true (default) | false
//     mscale, mscale_all_dim              yarn (DeepSeek), default 0 = not given
//     attention_factor                    yarn, longrope: explicit (default: derived)
//     low_freq_factor, high_freq_factor   llama3 (1, 4)
//     short_factor, long_factor           longrope: rotary_dim/2 comma-separated numbers each
//     freq_factors                        freq_factors (GGUF rope_freqs): rotary_dim/2 numbers
//   tensor_layout    td | thd | bhtd | bthd (b batch, h heads, t tokens, d head_dim);
//                    default by rank: 2 -> td, 3 -> thd, 4 -> bhtd (HF's [batch, heads, seq, dim])
//   angle_precision, table_precision, arithmetic_precision   f64|f32|f16|bf16, default f32
//   angle_recipe     hf_f32 (default: HF/vLLM inv_freq and f32(m) * inv_freq) | pow_product |
//                    ladder_f32 (ggml/llama.cpp CPU: f32 theta *= powf(base, -2/dim) per pair) |
//                    inv_freq_f64 (gemma.cpp: inv_freq in f64 rounded once, angle product) |
//                    fast_powf_f32 (CUDA -use_fast_math __powf, FlashInfer) |
//                    fast_powf_ladder_f32 (llama.cpp CUDA: __powf(theta_scale, i)) |
//                    vllm_f32 (vLLM's scaled classes: the scaling formulas in f32)
//                    (the list: kAllAngleRecipes in ropecheck/policy.hpp)
//   trig_argument    exact (default) | turns_f32 (CUDA __sinf/__cosf/__sincosf: the argument
//                    scaled into turns in f32 before the hardware sine)
//   fused            true | false (default false)
// The defaults describe the common production recipe (HF rotate_half in f32): declaring a
// tighter policy than the kernel really has makes honest results fail, a looser one hides bugs.
#pragma once

#include "ropecheck/scan/fused.hpp"
#include "ropecheck/spec.hpp"
#include "ropecheck/tensorio/tensorio.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace ropecheck::cli {

using Keys = std::map<std::string, std::string>;

// The spec, policy and tensor layout the keys (and --hf-config) give.
struct Resolved {
  RopeSpec spec;
  Policy policy;
  std::string tensor_layout;
  std::string seq_len_from;             // where an explicit seq_len came from; empty: none given
  bool seq_len_from_positions = false;  // none given: max(position) + 1 (runtime_seq_len)
};

// The keys for tensors whose last dimension is last_dim and rank is rank; hf: --hf-config's spec
// (keys that give a layout must describe it). keys_seq_len_from: how messages name the keys'
// seq_len (its file). Unknown keys are noted on stderr.
Resolved resolve(const Keys& keys, std::int64_t last_dim, std::size_t rank,
                 const std::optional<RopeSpec>& hf = std::nullopt,
                 const std::string& keys_seq_len_from = "the spec keys");

// Dynamic NTK and LongRoPE: seq_len = max(position) + 1 over every element of the positions
// tensor (all tokens, batch rows and axes) unless one is given, which must not be smaller.
RopeSpec runtime_seq_len(const RopeSpec& spec, const tensorio::TensorRef& pos,
                         const std::string& seq_len_from);

// The declared chain of a fused cache dump from the keys (fused.hpp); a missing or unknown value
// is a usage error.
scan::FusedChain fused_chain(const Keys& k);

}  // namespace ropecheck::cli
