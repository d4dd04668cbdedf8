// SPDX-License-Identifier: LGPL-2.1-or-later
//
// ASCII character classes and trimming, shared by the kernel-file parsers
// (parse.cc) and the config parsers. Locale-independent, unlike <cctype>.
#pragma once

#include <algorithm>
#include <string_view>

namespace memprotd {

// The C locale's isspace() set: ' ', '\t', '\n', '\v', '\f', '\r'. '\r' is
// included so that a file that went through a CRLF editor still parses.
constexpr bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
constexpr bool is_digit(char c) { return c >= '0' && c <= '9'; }
constexpr bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
constexpr char ascii_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// `s` without leading / trailing / both is_space() characters.
constexpr std::string_view trim_left(std::string_view s) {
    while (!s.empty() && is_space(s.front()))
        s.remove_prefix(1);
    return s;
}
constexpr std::string_view trim_right(std::string_view s) {
    while (!s.empty() && is_space(s.back()))
        s.remove_suffix(1);
    return s;
}
constexpr std::string_view trim(std::string_view s) { return trim_right(trim_left(s)); }

// Equal ignoring ASCII case.
constexpr bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return ascii_lower(x) == ascii_lower(y); });
}

}  // namespace memprotd
