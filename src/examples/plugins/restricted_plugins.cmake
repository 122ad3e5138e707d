# The restricted-domain plugins built from builtin_wrap.cpp, as data: read by
# src/examples/plugins/CMakeLists.txt (the targets) and src/plugin/tests/CMakeLists.txt (their
# `ropecheck validate` tests). Adding a restricted plugin is one name in the list and one
# _wrap_<name> line of knobs (documented at the top of builtin_wrap.cpp); adding a bug is one word
# in ROPECHECK_WRAP_BUGS (the knob ROPECHECK_WRAP_BUG_<WORD>). Every restricted plugin gets a
# broken twin <name>_bug_<bug> per bug.
set(ROPECHECK_RESTRICTED_PLUGINS
    restricted_hd64_128            # head dims 64, 128; everything else as builtin_scalar
    restricted_hd80_112_256_int32  # head dims 80, 112, 256; int32 positions
    restricted_nonneg_noscale_half # positions >= 0, scale 1, half layout, scaling none, f32+bf16
)
set(_wrap_restricted_hd64_128 ROPECHECK_WRAP_HEAD_DIMS=64,128)
set(_wrap_restricted_hd80_112_256_int32 ROPECHECK_WRAP_HEAD_DIMS=80,112,256
    ROPECHECK_WRAP_MIN_POSITION=INT32_MIN ROPECHECK_WRAP_MAX_POSITION=INT32_MAX)
set(_wrap_restricted_nonneg_noscale_half ROPECHECK_WRAP_MIN_POSITION=0
    ROPECHECK_WRAP_MAX_POSITION=INT64_MAX ROPECHECK_WRAP_NO_SCALE
    "ROPECHECK_WRAP_LAYOUTS=ROPECHECK_LAYOUT_BIT(ROPECHECK_LAYOUT_HALF)"
    "ROPECHECK_WRAP_SCALINGS=ROPECHECK_SCALING_BIT(ROPECHECK_SCALING_NONE)"
    "ROPECHECK_WRAP_DTYPES=ROPECHECK_DTYPE_BIT(ROPECHECK_DTYPE_F32)|ROPECHECK_DTYPE_BIT(ROPECHECK_DTYPE_BF16)")

# Bugs applied in the adapter around the correct kernel (ROPECHECK_WRAP_BUG_<BUG>).
set(ROPECHECK_WRAP_BUGS sin_sign position_off_by_one pass_through_zeroed first_position_broadcast
    last_pair_skipped)

# Regime bugs of the scaling kinds (ROPECHECK_WRAP_BUG_<WORD>, builtin_wrap.cpp section 3): each
# breaks one regime only; plugin regime_<word>, unrestricted otherwise.
set(ROPECHECK_REGIME_BUGS dynamic_below dynamic_at dynamic_above longrope_short longrope_long
    yarn_truncate_ignored yarn_never_truncate yarn_no_pair_factor_dropped yarn_pair_ignored
    yarn_explicit_factor_ignored llama3_smooth_inverted linear_factor_bf16)
