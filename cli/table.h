// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Aligned text tables for memprotctl's human output. Numbers right-aligned,
// text left-aligned; the header is bold only when writing to a terminal.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace memprotd {

class Table {
public:
    // A column whose name starts with '>' is right-aligned ('>' not shown).
    explicit Table(std::vector<std::string> columns);
    void add_row(std::vector<std::string> cells);
    [[nodiscard]] std::string render(bool color) const;

private:
    std::vector<std::string> columns_;
    std::vector<bool> right_;
    std::vector<std::vector<std::string>> rows_;
};

// True when `f` is a terminal and NO_COLOR is not set.
bool use_color(FILE* f);

}  // namespace memprotd
