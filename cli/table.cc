// SPDX-License-Identifier: LGPL-2.1-or-later
#include "table.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace memprotd {

namespace {

// Display width: count UTF-8 lead bytes only, so "−" is one column.
size_t width(const std::string& s) {
    return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) {
        return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    }));
}

}  // namespace

Table::Table(std::vector<std::string> columns) {
    for (auto& c : columns) {
        const bool right = !c.empty() && c[0] == '>';
        right_.push_back(right);
        columns_.push_back(right ? c.substr(1) : c);
    }
}

void Table::add_row(std::vector<std::string> cells) {
    cells.resize(columns_.size());
    rows_.push_back(std::move(cells));
}

std::string Table::render(bool color) const {
    std::vector<size_t> w(columns_.size());
    for (size_t i = 0; i < columns_.size(); ++i) {
        w[i] = width(columns_[i]);
        for (const auto& r : rows_)
            w[i] = std::max(w[i], width(r[i]));
    }
    std::string out;
    auto emit = [&](const std::vector<std::string>& cells) {
        std::string line;
        for (size_t i = 0; i < cells.size(); ++i) {
            const std::string pad(w[i] - width(cells[i]), ' ');
            if (i)
                line += "  ";
            line += right_[i] ? pad + cells[i] : cells[i] + (i + 1 < cells.size() ? pad : "");
        }
        while (!line.empty() && line.back() == ' ')
            line.pop_back();
        return line;
    };
    const std::string header = emit(columns_);
    out += color ? "\033[1m" + header + "\033[0m\n" : header + "\n";
    for (const auto& r : rows_)
        out += emit(r) + "\n";
    return out;
}

bool use_color(FILE* f) {
    return isatty(fileno(f)) && std::getenv("NO_COLOR") == nullptr;
}

}  // namespace memprotd
