// SPDX-License-Identifier: LGPL-2.1-or-later
//
// What memprotd changed, so that it can be put back: the prior
// MemoryLow/MemoryMin of every unit, recorded before the first write to it
// and kept in <runtime_dir>/state.json across crash-restarts
// (RuntimeDirectoryPreserve=yes). Writes are atomic (tmp file, fsync,
// rename, fsync of the directory), so a crash leaves the old or the new
// record, never half of one.
//
// systemd keeps each runtime property write as a drop-in under
// /run/systemd/system.control/UNIT.d/ (50-MemoryLow.conf, 50-MemoryMin.conf)
// until reboot, restores included. Which of those drop-ins exist only because
// of memprotd (none was there before its first write) is kept too, and once
// a unit is restored, listed in <runtime_dir>/restored-dropins as lines
// "UNIT KEY=VALUE" (the value restored, as systemd writes it): the package's
// purge removes a listed drop-in that still says exactly that (debian/postrm).
// A unit left to another writer (forget) keeps what memprotd's writes made:
// its drop-ins are that writer's now.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "actuator.h"
#include "plan.h"
#include "result.h"

namespace memprotd {

class StateStore {
public:
    // The drop-ins of a unit that memprotd's writes made (none was there
    // before its first write), by key.
    struct MadeDropins {
        bool memory_low = false;
        bool memory_min = false;
        bool operator==(const MadeDropins&) const = default;
    };
    struct Entry {
        std::string unit;
        UnitProtection prior;
        uint64_t seq = 0;  // order of recording, from 1
        MadeDropins made;
    };
    // A unit restored whose drop-ins memprotd made: what they say now.
    struct Restored {
        std::string unit;
        UnitProtection values;
        MadeDropins made;
    };

    explicit StateStore(std::string runtime_dir = "/run/memprotd",
                        std::string control_dir = "/run/systemd/system.control");

    // Reads state.json. A missing file is an empty record. A file that does
    // not parse or does not match the schema is renamed to state.json.corrupt
    // and the record starts empty (nothing is restored from garbage); the
    // error names the path and the reason.
    Status load();

    [[nodiscard]] bool has(const std::string& unit) const;
    [[nodiscard]] const std::vector<Entry>& entries() const { return entries_; }
    [[nodiscard]] const std::vector<Restored>& restored() const { return restored_; }

    // Records `prior` for `unit` unless it is already recorded (the first
    // prior is the one to restore) and persists before returning: the caller
    // must not write the unit unless this succeeded. Which of its drop-ins
    // memprotd makes: those missing now, or for a unit restored before,
    // those it had made then.
    Status record(const std::string& unit, const UnitProtection& prior);

    // Drops `unit`'s record without restoring it (another writer owns the
    // unit now) and persists; on a failure the record stays as it was.
    Status forget(const std::string& unit);

    // Puts the prior values back for every recorded unit that `which`
    // accepts (all when empty), deepest slice first (the most dashes in the
    // name) and among equals the most recently recorded first, so a parent
    // is never lowered below its children. Restored units leave the record;
    // failed ones stay for a later attempt, and a restored unit with
    // drop-ins memprotd made joins restored(). Returns the failures.
    std::vector<Error> restore(Actuator& actuator,
                               const std::function<bool(const std::string&)>& which = {});

    [[nodiscard]] std::string path() const { return dir_ + "/state.json"; }
    [[nodiscard]] std::string restored_dropins_path() const { return dir_ + "/restored-dropins"; }
    // Why restored-dropins could not be written at the last save, if so (the
    // record itself was saved).
    [[nodiscard]] const std::optional<Error>& list_error() const { return list_error_; }

private:
    Status save();
    void save_restored_dropins();
    [[nodiscard]] std::string dropin_line(const std::string& unit, const char* key) const;
    [[nodiscard]] MadeDropins made_by_us(const std::string& unit) const;

    std::string dir_;
    std::string control_dir_;
    std::vector<Entry> entries_;
    std::vector<Restored> restored_;
    std::optional<Error> list_error_;
    uint64_t next_seq_ = 1;
};

}  // namespace memprotd
