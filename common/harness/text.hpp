/// @file text.hpp
/// @brief Free text in the fixed-width columns of the tables the programs and the tour print:
/// its width on a terminal, and a cut at a word boundary with an ellipsis.
#pragma once

#include <cstddef>
#include <string>

namespace ft {

/// The columns `text` takes on a terminal: its UTF-8 code points ("N×N" is 3 columns and 4
/// bytes; the tables' texts hold no wide or combining characters).
size_t display_width(const std::string& text);

/// `text` in a column `width` wide, padded with spaces to exactly `width` columns: as it is
/// when it fits; else its words that fit before an ellipsis ("…"), the separator before the
/// cut (space, comma, colon, dash) dropped. Only a first word wider than the column is cut
/// inside the word.
std::string fit_column(const std::string& text, size_t width);

}  // namespace ft
