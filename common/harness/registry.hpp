/// @file registry.hpp
/// @brief The one list of every implementation the chapters teach. Each chapter registers
/// its own, from its own folder (FT_REGISTER below); the tour, the C API (flashtut.h:
/// ft_impl_count, ft_forward, ...), and through it the Python package and the comparison
/// script read this list, so that adding a chapter touches its folder and nothing else that
/// names it.
///
/// An implementation's name is `ch<chapter>_<variant>` ("ch07_fastest"), the name the
/// results files use; a chapter may also give one forward and one backward a short alias,
/// `ch<chapter>` ("ch07"), for the one it recommends.
#pragma once

#include <string>
#include <vector>

#include "harness/harness.hpp"

namespace ft {

/// What the registry keeps of one implementation beside the impl itself.
struct Listing {
  bool headline = false;  ///< the chapter's recommended one: also listed as `ch<chapter>`
  bool tour = false;      ///< a step of the tour's staircase (in the registry's order)
  /// A step of the tour's decoding, after the staircase: the tour's sequences each decode one
  /// new token (one query row) against their N cached keys (chapter 11).
  bool decode = false;
  /// A backward: the name of the forward it pairs with (the one whose O and lse it reads
  /// and, for the materializing baseline, whose workspace holds P). Empty for a forward.
  std::string pairs_with;
};

struct RegisteredForward {
  ForwardImpl impl;
  Listing listing;
  std::string name;   ///< ch07_fastest
  std::string alias;  ///< ch07 (headline), else empty
};
struct RegisteredBackward {
  BackwardImpl impl;
  Listing listing;
  std::string name;
  std::string alias;
};

/// "ch07_fastest": the name an implementation is registered, listed and reported under.
std::string impl_name(const std::string& chapter, const std::string& variant);

/// Adds implementations to the registry (at static initialization: see FT_REGISTER):
/// `headline` (the chapter's recommended one, also listed as ch<chapter>), `tour` (a step of
/// the tour's staircase), `decode` (a step of the tour's decoding); a backward names the
/// forward it pairs with. Throws std::logic_error on a name registered twice.
void register_forward(const ForwardImpl& impl, bool headline = false, bool tour = false, bool decode = false);
void register_backward(const BackwardImpl& impl, const std::string& pairs_with,
                       bool headline = false, bool tour = false);

/// Every registered implementation, in chapter order, then in the order each chapter
/// registered them.
const std::vector<RegisteredForward>& registered_forwards();
const std::vector<RegisteredBackward>& registered_backwards();

/// The implementation registered as `name` (or with that alias); nullptr if none.
const RegisteredForward* find_forward(const std::string& name);
const RegisteredBackward* find_backward(const std::string& name);

}  // namespace ft

/// Registers a chapter's implementations when the library loads: in the chapter's .cu,
/// `FT_REGISTER(ch07) { ft::register_forward(...); ... }` (the body runs once, before main).
#define FT_REGISTER(tag)                                          \
  static void ft_register_##tag();                                \
  namespace {                                                     \
  [[maybe_unused]] const bool ft_registered_##tag = (ft_register_##tag(), true); \
  }                                                               \
  static void ft_register_##tag()
