/// @file registry.cpp
#include "harness/registry.hpp"

#include <algorithm>
#include <stdexcept>

namespace ft {

namespace {
// Function-local statics: ready whenever a chapter's static initializer first registers,
// whatever the order in which the library's files are initialized.
std::vector<RegisteredForward>& forwards() {
  static std::vector<RegisteredForward> list;
  return list;
}
std::vector<RegisteredBackward>& backwards() {
  static std::vector<RegisteredBackward> list;
  return list;
}

/// Adds `entry` keeping the list in chapter order (stable: a chapter's own order stays).
template <class Entry>
void add(std::vector<Entry>& list, Entry entry, const char* pass) {
  for (const Entry& e : list)
    if (e.name == entry.name || (!entry.alias.empty() && e.alias == entry.alias))
      throw std::logic_error(std::string(pass) + " implementation " + entry.name +
                             " registered twice (or its alias " + entry.alias + ")");
  const auto at = std::upper_bound(list.begin(), list.end(), entry, [](const Entry& a, const Entry& b) {
    return a.impl.chapter < b.impl.chapter;
  });
  list.insert(at, std::move(entry));
}

template <class Entry>
const Entry* find(const std::vector<Entry>& list, const std::string& name) {
  for (const Entry& e : list)
    if (e.name == name || (!e.alias.empty() && e.alias == name)) return &e;
  return nullptr;
}
}  // namespace

std::string impl_name(const std::string& chapter, const std::string& variant) {
  return "ch" + chapter + "_" + variant;
}

void register_forward(const ForwardImpl& impl, bool headline, bool tour, bool decode) {
  const Listing listing{headline, tour, decode, ""};
  add(forwards(),
      RegisteredForward{impl, listing, impl_name(impl.chapter, impl.variant),
                        listing.headline ? "ch" + impl.chapter : ""},
      "forward");
}

void register_backward(const BackwardImpl& impl, const std::string& pairs_with, bool headline,
                       bool tour) {
  const Listing listing{headline, tour, false, pairs_with};
  if (listing.pairs_with.empty())
    throw std::logic_error("backward " + impl_name(impl.chapter, impl.variant) +
                           " registered without the forward it pairs with");
  add(backwards(),
      RegisteredBackward{impl, listing, impl_name(impl.chapter, impl.variant),
                         listing.headline ? "ch" + impl.chapter : ""},
      "backward");
}

const std::vector<RegisteredForward>& registered_forwards() { return forwards(); }
const std::vector<RegisteredBackward>& registered_backwards() { return backwards(); }

const RegisteredForward* find_forward(const std::string& name) { return find(forwards(), name); }
const RegisteredBackward* find_backward(const std::string& name) { return find(backwards(), name); }

}  // namespace ft
