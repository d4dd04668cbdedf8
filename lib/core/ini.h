// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The lexer for systemd-style INI files: text in, a flat list of section
// headers and Key=Value assignments out, each with its 1-based line. It knows
// nothing about which sections or keys exist; see config.h for that.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "result.h"

namespace memprotd {

struct IniItem {
    enum class Kind { Section, Assignment };
    Kind kind;
    int line;           // where the logical line started
    std::string name;   // section name or key, trimmed
    std::string value;  // for Assignment: trimmed, possibly empty
};

// systemd's config_parse() rules: leading/trailing whitespace dropped, lines
// starting with '#' or ';' are comments, a trailing backslash continues the
// logical line on the next one (joined with a space; comment lines inside a
// continuation are skipped). One extension: a '#' that follows whitespace
// starts a comment ("Mode=enforce   # or dry-run"); a '#' glued to text
// ("a#b") stays part of the value. Malformed lines (a header without ']',
// a line without '=', an empty key) are appended to `errors` with `path` and
// the line and left out of the result.
std::vector<IniItem> ini_lex(std::string_view path, std::string_view text, std::vector<Error>& errors);

// Sections named X-... are left to other tools, as systemd does.
bool ini_is_extension_section(std::string_view name);

}  // namespace memprotd
