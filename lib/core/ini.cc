// SPDX-License-Identifier: LGPL-2.1-or-later
#include "ini.h"

#include <fmt/format.h>

#include "text.h"

namespace memprotd {

namespace {

// Everything from a '#' that follows whitespace on; no value memprotd
// understands can contain " #", so this loses nothing.
std::string_view strip_trailing_comment(std::string_view s) {
    for (size_t i = 1; i < s.size(); ++i) {
        if (s[i] == '#' && is_space(s[i - 1]))
            return s.substr(0, i);
    }
    return s;
}

void lex_logical_line(std::string_view logical, int line, std::string_view path, std::vector<IniItem>& out,
                      std::vector<Error>& errors) {
    std::string_view t = trim(logical);
    if (t.empty())
        return;
    if (t.front() == '[') {
        if (t.back() != ']' || t.size() < 3) {
            errors.push_back({std::string(path), line, {},
                              fmt::format("malformed section header \"{}\": expected \"[Name]\"", t)});
            return;
        }
        out.push_back({IniItem::Kind::Section, line, std::string(t.substr(1, t.size() - 2)), {}});
        return;
    }
    size_t eq = t.find('=');
    if (eq == std::string_view::npos) {
        errors.push_back({std::string(path), line, {},
                          fmt::format("malformed line \"{}\": expected \"Key=Value\" or \"[Section]\"", t)});
        return;
    }
    std::string_view key = trim(t.substr(0, eq));
    if (key.empty()) {
        errors.push_back(
            {std::string(path), line, {}, fmt::format("malformed line \"{}\": the key before '=' is empty", t)});
        return;
    }
    out.push_back({IniItem::Kind::Assignment, line, std::string(key), std::string(trim(t.substr(eq + 1)))});
}

}  // namespace

std::vector<IniItem> ini_lex(std::string_view path, std::string_view text, std::vector<Error>& errors) {
    std::vector<IniItem> items;
    std::string pending;
    int pending_line = 0;
    bool continuing = false;
    int number = 0;
    while (!text.empty()) {
        size_t nl = text.find('\n');
        std::string_view raw = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
        ++number;

        std::string_view l = trim(raw);
        if (!l.empty() && (l.front() == '#' || l.front() == ';'))
            continue;
        if (!continuing && l.empty())
            continue;
        l = trim_right(strip_trailing_comment(l));
        if (!continuing)
            pending_line = number;
        // Errors carry the line where the continued key started.
        if (!l.empty() && l.back() == '\\') {
            pending += l.substr(0, l.size() - 1);
            pending += ' ';
            continuing = true;
            continue;
        }
        pending += l;
        continuing = false;
        lex_logical_line(pending, pending_line, path, items, errors);
        pending.clear();
    }
    if (continuing)
        lex_logical_line(pending, pending_line, path, items, errors);
    return items;
}

bool ini_is_extension_section(std::string_view name) { return name.size() > 2 && name.substr(0, 2) == "X-"; }

}  // namespace memprotd
