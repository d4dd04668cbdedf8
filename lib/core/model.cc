// SPDX-License-Identifier: LGPL-2.1-or-later
#include "model.h"

namespace memprotd {

std::optional<uint64_t> MemoryStat::find(std::string_view key) const {
    for (size_t i = 0; i < size_; ++i)
        if (entries_[i].key == key)
            return entries_[i].value;
    return std::nullopt;
}

std::optional<StatKey> known_stat_key(std::string_view key) {
    // By length first: most of the ~50 keys a kernel prints are rejected
    // without comparing a byte.
    using K = StatKey;
    switch (key.size()) {
        case 4:
            if (key == "anon")
                return K::Anon;
            if (key == "file")
                return K::File;
            break;
        case 7:
            if (key == "pgsteal")
                return K::Pgsteal;
            break;
        case 10:
            if (key == "file_dirty")
                return K::FileDirty;
            break;
        case 11:
            if (key == "file_mapped")
                return K::FileMapped;
            break;
        case 13:
            if (key == "inactive_anon")
                return K::InactiveAnon;
            if (key == "inactive_file")
                return K::InactiveFile;
            break;
        case 14:
            if (key == "file_writeback")
                return K::FileWriteback;
            break;
        case 16:
            if (key == "slab_reclaimable")
                return K::SlabReclaimable;
            break;
        case 23:
            if (key == "workingset_refault_anon")
                return K::WorkingsetRefaultAnon;
            if (key == "workingset_refault_file")
                return K::WorkingsetRefaultFile;
            if (key == "workingset_restore_anon")
                return K::WorkingsetRestoreAnon;
            if (key == "workingset_restore_file")
                return K::WorkingsetRestoreFile;
            break;
        case 24:
            if (key == "workingset_activate_anon")
                return K::WorkingsetActivateAnon;
            if (key == "workingset_activate_file")
                return K::WorkingsetActivateFile;
            break;
        default:
            break;
    }
    return std::nullopt;
}

std::string_view stat_key_name(StatKey k) {
    static constexpr std::array<std::string_view, static_cast<size_t>(StatKey::Count)> kNames = {
        "anon",
        "file",
        "inactive_anon",
        "inactive_file",
        "file_mapped",
        "file_dirty",
        "file_writeback",
        "slab_reclaimable",
        "workingset_refault_anon",
        "workingset_refault_file",
        "workingset_activate_anon",
        "workingset_activate_file",
        "workingset_restore_anon",
        "workingset_restore_file",
        "pgsteal",
    };
    return kNames[static_cast<size_t>(k)];
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

}  // namespace memprotd
