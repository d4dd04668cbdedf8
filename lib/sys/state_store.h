// SPDX-License-Identifier: LGPL-2.1-or-later
//
// What memprotd changed, so that it can be put back: the prior
// MemoryLow/MemoryMin of every unit, recorded before the first write to it
// and kept in <runtime_dir>/state.json across crash-restarts
// (RuntimeDirectoryPreserve=yes). Writes are atomic (tmp file, fsync,
// rename, fsync of the directory), so a crash leaves the old or the new
// record, never half of one.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "actuator.h"
#include "plan.h"
#include "result.h"

namespace memprotd {

class StateStore {
public:
    struct Entry {
        std::string unit;
        UnitProtection prior;
        uint64_t seq = 0;  // order of recording, from 1
    };

    explicit StateStore(std::string runtime_dir = "/run/memprotd");

    // Reads state.json. A missing file is an empty record. A file that does
    // not parse or does not match the schema is renamed to state.json.corrupt
    // and the record starts empty (nothing is restored from garbage); the
    // error names the path and the reason.
    Status load();

    [[nodiscard]] bool has(const std::string& unit) const;
    [[nodiscard]] const std::vector<Entry>& entries() const { return entries_; }

    // Records `prior` for `unit` unless it is already recorded (the first
    // prior is the one to restore) and persists before returning: the caller
    // must not write the unit unless this succeeded.
    Status record(const std::string& unit, const UnitProtection& prior);

    // Drops `unit`'s record without restoring it (another writer owns the
    // unit now) and persists; on a failure the record stays as it was.
    Status forget(const std::string& unit);

    // Puts the prior values back for every recorded unit that `which`
    // accepts (all when empty), deepest slice first (the most dashes in the
    // name) and among equals the most recently recorded first, so a parent
    // is never lowered below its children. Restored units leave the record;
    // failed ones stay for a later attempt. Returns the failures.
    std::vector<Error> restore(Actuator& actuator,
                               const std::function<bool(const std::string&)>& which = {});

    [[nodiscard]] std::string path() const { return dir_ + "/state.json"; }

private:
    Status save();

    std::string dir_;
    std::vector<Entry> entries_;
    uint64_t next_seq_ = 1;
};

}  // namespace memprotd
