// SPDX-License-Identifier: LGPL-2.1-or-later
#include "model.h"

namespace memprotd {

std::optional<uint64_t> MemoryStat::find(std::string_view key) const {
    for (size_t i = 0; i < size_; ++i)
        if (entries_[i].key == key)
            return entries_[i].value;
    return std::nullopt;
}

void MemoryStat::append(std::string_view key, uint64_t value) {
    if (size_ < entries_.size()) {
        entries_[size_].key.assign(key);  // reuses the string's capacity
        entries_[size_].value = value;
    } else {
        entries_.push_back({std::string(key), value});
    }
    ++size_;
}

int Snapshot::find_unit(std::string_view unit) const {
    for (size_t i = 0; i < cgroups.size(); ++i)
        if (cgroups[i].unit == unit)
            return static_cast<int>(i);
    return -1;
}

}  // namespace memprotd
