/// @file text.cpp
#include "harness/text.hpp"

#include <cstring>

namespace ft {

namespace {
/// A byte that continues a UTF-8 code point (10xxxxxx) rather than starting one.
bool continues(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

/// The bytes of the first `cols` code points of `s`.
size_t prefix_bytes(const std::string& s, size_t cols) {
  size_t i = 0;
  for (size_t n = 0; i < s.size(); ++i)
    if (!continues(s[i]) && n++ == cols) break;
  return i;
}

/// Drops what would dangle before an ellipsis: spaces, ",;:(" and the dashes "—", "–".
void trim_separators(std::string& s) {
  for (;;) {
    if (!s.empty() && std::strchr(" ,;:(", s.back()) != nullptr) {
      s.pop_back();
    } else if (s.size() >= 3 && (s.compare(s.size() - 3, 3, "—") == 0 ||
                                 s.compare(s.size() - 3, 3, "–") == 0)) {
      s.resize(s.size() - 3);  // both dashes are 3 bytes in UTF-8
    } else {
      return;
    }
  }
}
}  // namespace

size_t display_width(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += continues(c) ? 0 : 1;
  return n;
}

std::string fit_column(const std::string& text, size_t width) {
  if (width == 0) return "";
  std::string s = text;
  if (display_width(s) > width) {
    std::string head = s.substr(0, prefix_bytes(s, width - 1));  // one column for "…"
    const bool at_word_end = s[head.size()] == ' ';
    const size_t space = head.rfind(' ');
    if (!at_word_end && space != std::string::npos) head.resize(space);
    trim_separators(head);
    if (head.empty()) head = s.substr(0, prefix_bytes(s, width - 1));  // one long word
    s = head + "…";
  }
  return s + std::string(width - display_width(s), ' ');
}

}  // namespace ft
