// SPDX-License-Identifier: LGPL-2.1-or-later
#include "model.h"

#include <charconv>
#include <cstring>
#include <utility>

namespace memprotd {

std::optional<uint64_t> MemoryStat::find(std::string_view key) const {
    for (size_t i = 0; i < size_; ++i)
        if (entries_[i].key == key)
            return entries_[i].value;
    return std::nullopt;
}

namespace {

// Bit n is set when some StatKey's name is n bytes long, so that most of the
// ~50 keys a kernel prints are rejected without comparing a byte.
constexpr uint64_t kNameLengths = [] {
    uint64_t lengths = 0;
    for (std::string_view name : kStatKeyNames)
        lengths |= uint64_t{1} << name.size();
    return lengths;
}();

// Compares `key` with each name, unrolled so that every comparison has a
// constant length.
template <size_t... I>
std::optional<StatKey> find_stat_key(std::string_view key, std::index_sequence<I...> /*unused*/) {
    std::optional<StatKey> found;
    (void)((key.size() == kStatKeyNames[I].size() &&
            std::memcmp(key.data(), kStatKeyNames[I].data(), kStatKeyNames[I].size()) == 0 &&
            (found = static_cast<StatKey>(I), true)) ||
           ...);
    return found;
}

}  // namespace

std::optional<StatKey> known_stat_key(std::string_view key) {
    if (key.size() >= 64 || ((kNameLengths >> key.size()) & 1) == 0)
        return std::nullopt;
    return find_stat_key(key, std::make_index_sequence<kStatKeyNames.size()>());
}

void MemoryStat::append(std::string_view key, uint64_t value) {
    if (const auto k = known_stat_key(key)) {
        const auto i = static_cast<size_t>(*k);
        if (!(seen_ & (1u << i))) {
            known_[i] = value;
            seen_ |= 1u << i;
        }
    }
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

bool kernel_at_least(std::string_view release, unsigned major, unsigned minor) {
    unsigned got_major = 0, got_minor = 0;
    const char* end = release.data() + release.size();
    auto [p, ec] = std::from_chars(release.data(), end, got_major);
    if (ec != std::errc{} || p == end || *p != '.')
        return false;
    auto [q, ec2] = std::from_chars(p + 1, end, got_minor);
    if (ec2 != std::errc{})
        return false;
    return got_major > major || (got_major == major && got_minor >= minor);
}

bool memory_low_defers(const KernelFeatures& features) {
    return features.mglru_enabled && kernel_at_least(features.kernel_release, 6, 3);
}

}  // namespace memprotd
