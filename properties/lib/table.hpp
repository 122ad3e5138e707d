// The property table: one row per property, in the order of properties.hpp's enum (checked at
// compile time). Everything that enumerates the properties reads it: the per-dtype check
// (check.hpp: the generator a RapidCheck run calls, the needs that decide not_applicable), the
// public list, names and kinds (properties.cpp: all_properties(), name(), is_backward_property(),
// forward_counterpart(), is_multi_axis_property()), and through them the GTest registration
// (tests/property_main.cpp), `ropecheck validate` and the zoo.
//
// Columns: the property (its enum value, whose name is the property's name), its family (the file
// that defines it), what it needs of the declared domain (row.hpp Needs), its generator, the
// forward property a backward row runs on backward_view(k), and its claim (the full claim with
// its bound: properties/README.md). Adding a property: properties/README.md, "Adding".
#pragma once

#include "algebraic.hpp"
#include "backward.hpp"
#include "layout_shift.hpp"
#include "multi_axis.hpp"
#include "reference_bound.hpp"
#include "row.hpp"
#include "structure.hpp"

namespace ropecheck::properties::detail {

template <Dtype D>
const Table& table() {
#define ROW(id, family, needs, generator, forward, claim) \
  Row { Property::id, #id, Family::family, Needs::needs, generator, forward, claim }
  // clang-format off
  static constexpr Table rows = {
  //  property                             family           needs
  //      generator                                  forward (backward_view)
  //      claim
  ROW(PreservesNorm,                       algebraic,       nothing,
          preserves_norm<D>,                         std::nullopt,
          "per pair | ||K(x,m)_p|| - s||x_p|| | within the pair bound without its angle term; "
          "K's matrix M has M^T M = s^2 I within s (D_j + D_k) + D_j D_k"),
  ROW(ZeroPositionIsIdentity,              algebraic,       position_zero,
          zero_position_is_identity<D>,              std::nullopt,
          "K(x,0) = x bit for bit when s = 1 (special values: algebraic.hpp); s x within the "
          "pair bound at m = 0 otherwise"),
  ROW(ComposesAdditively,                  algebraic,       nothing,
          composes_additively<D>,                    std::nullopt,
          "K(K(x,a),b) = s K(x,a+b), incl. negative b, within the composition bound plus s "
          "times the pair bound at a+b"),
  ROW(LayoutsArePermutations,              layout_shift,    both_layouts,
          layouts_are_permutations<D>,               std::nullopt,
          "K_half(P x) = P K_interleaved(x): bit for bit when declared layouts_bitwise_symmetric, "
          "else within twice the pair bound"),
  ROW(ScoresDependOnlyOnOffset,            layout_shift,    nothing,
          scores_depend_only_on_offset<D>,           std::nullopt,
          "<K(q,m),K(k,n)> and <K(q,m+d),K(k,n+d)> within the score bound of the exact "
          "s^2 q^T R_{n-m} k"),
  ROW(MatchesReferenceWithinBound,         reference_bound, nothing,
          matches_reference_within_bound<D>,         std::nullopt,
          "per pair ||got - exact|| within the pair bound, per element faithfully rounded "
          "(P + ulp/2), pass-through bit for bit"),
  ROW(PassThroughIsExact,                  structure,       partial_rotary,
          pass_through_is_exact<D>,                  std::nullopt,
          "dims >= rotary_dim hold any bit pattern and come out bit for bit (a NaN stays NaN)"),
  ROW(InputUntouched,                      structure,       nothing,
          input_untouched<D>,                        std::nullopt,
          "out-of-place leaves the input bit for bit and writes nothing in gaps or guard regions"),
  ROW(InPlaceEqualsOutOfPlace,             structure,       in_place,
          in_place_equals_out_of_place<D>,           std::nullopt,
          "out == in gives the out-of-place result bit for bit and leaves the gaps alone"),
  ROW(TokensAreIndependent,                structure,       nothing,
          tokens_are_independent<D>,                 std::nullopt,
          "a batch equals its tokens and heads alone, permuting tokens permutes the results: bit "
          "for bit (declared batch-variant: within twice the pair bound)"),
  ROW(InverseUndoes,                       algebraic,       opposite_positions,
          inverse_undoes<D>,                         std::nullopt,
          "K(K(x,m),-m) = s^2 x within the composition bound; pass-through bit for bit"),
  ROW(ComposesAdditivelyPerAxis,           multi_axis,      multi_axis,
          composes_additively_per_axis<D>,           std::nullopt,
          "per-axis p, q (t != h != w): K(K(x,p),q) within the composition bound of "
          "s^2 R(p+q) x, K(x,p+q) within the pair bound of s R(p+q) x"),
  ROW(ScoresDependOnlyOnAxisOffsets,       multi_axis,      multi_axis,
          scores_depend_only_on_axis_offsets<D>,     std::nullopt,
          "<K(q,p+d),K(k,p'+d)> for d = 0 and a per-axis shift d within the score bound of the "
          "exact s^2 q^T R(p'-p) k"),
  ROW(EqualAxesReduceToOneDimensional,     multi_axis,      mrope_and_half,
          equal_axes_reduce_to_one_dimensional<D>,   std::nullopt,
          "mrope / imrope at t = h = w = m equals 1-D half RoPE at m bit for bit (declared "
          "batch-variant: within twice the pair bound)"),
  ROW(BackwardMatchesReferenceWithinBound, backward,        backward,
          nullptr,                                   Property::MatchesReferenceWithinBound,
          "B(g,m) against the exact s R(-m) g: the differential of the backward"),
  ROW(BackwardIsAdjoint,                   backward,        backward,
          backward_is_adjoint<D>,                    std::nullopt,
          "<F(x,m), g> = <x, B(g,m)> within the sum of both calls' pair bounds and the MP sums' "
          "rounding"),
  ROW(BackwardUndoesForward,               backward,        backward,
          backward_undoes_forward<D>,                std::nullopt,
          "B(F(x,m),m) = s^2 x within the composition bound; pass-through bit for bit"),
  ROW(BackwardZeroPositionIsIdentity,      backward,        backward,
          nullptr,                                   Property::ZeroPositionIsIdentity,
          "ZeroPositionIsIdentity of B(g,m) as the rotation by -m"),
  ROW(BackwardComposesAdditively,          backward,        backward,
          nullptr,                                   Property::ComposesAdditively,
          "ComposesAdditively of B(g,m) as the rotation by -m"),
  ROW(BackwardPassThroughIsExact,          backward,        backward,
          nullptr,                                   Property::PassThroughIsExact,
          "the pass-through gradient is copied, not written"),
  ROW(BackwardInputUntouched,              backward,        backward,
          nullptr,                                   Property::InputUntouched,
          "InputUntouched of apply_backward"),
  ROW(BackwardInPlaceEqualsOutOfPlace,     backward,        backward,
          nullptr,                                   Property::InPlaceEqualsOutOfPlace,
          "InPlaceEqualsOutOfPlace of apply_backward"),
  ROW(BackwardTokensAreIndependent,        backward,        backward,
          nullptr,                                   Property::TokensAreIndependent,
          "TokensAreIndependent of apply_backward"),
  ROW(BackwardComposesAdditivelyPerAxis,   backward,        backward,
          nullptr,                                   Property::ComposesAdditivelyPerAxis,
          "ComposesAdditivelyPerAxis of B(g,m) as the rotation by -m"),
  };
  // clang-format on
#undef ROW
  static_assert(well_formed(rows), "rows out of the enum's order, or a row with nothing to run");
  return rows;
}

}  // namespace ropecheck::properties::detail
