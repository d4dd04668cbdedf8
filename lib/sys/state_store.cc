// SPDX-License-Identifier: LGPL-2.1-or-later
#include "state_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "file_io.h"

namespace memprotd {

namespace {

using json = nlohmann::json;

constexpr int kSchemaVersion = 1;

// The DOM parser, but keeping the reason of a parse error instead of
// throwing it: lib/ does not throw.
struct QuietDomParser : nlohmann::detail::json_sax_dom_parser<json> {
    explicit QuietDomParser(json& out) : json_sax_dom_parser(out, /*allow_exceptions_=*/false) {}
    std::string reason;
    bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                     const nlohmann::detail::exception& ex) {
        reason = ex.what();
        return false;
    }
};

std::string errno_text(int err) { return std::strerror(err); }

int write_all(int fd, const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
        const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        off += static_cast<size_t>(n);
    }
    return 0;
}

// Slices nest by dashes ("a-b.slice" is in "a.slice"); other unit types sit
// inside slices, so they count as deeper than any slice.
int unit_depth(const std::string& unit) {
    if (!is_slice_unit(unit))
        return 1 << 20;
    return static_cast<int>(std::count(unit.begin(), unit.end(), '-'));
}

// A unit's record in state.json, or the reason it is not one.
// "made_low"/"made_min" are optional (records before them made nothing).
std::optional<std::string> parse_entry(const json& u, StateStore::Entry& e) {
    if (!u.is_object() || !u.contains("unit") || !u["unit"].is_string() || u["unit"].get_ref<const std::string&>().empty() ||
        !u.contains("memory_low") || !u["memory_low"].is_number_unsigned() || !u.contains("memory_min") ||
        !u["memory_min"].is_number_unsigned() || !u.contains("seq") || !u["seq"].is_number_unsigned())
        return "lacks a unit name, unsigned memory_low, memory_min or seq";
    e = {u["unit"].get<std::string>(), {u["memory_low"].get<uint64_t>(), u["memory_min"].get<uint64_t>()},
         u["seq"].get<uint64_t>(), {}};
    for (const auto& [key, flag] : {std::pair{"made_low", &e.made.memory_low}, {"made_min", &e.made.memory_min}}) {
        if (!u.contains(key))
            continue;
        if (!u[key].is_boolean())
            return std::string(key) + " is not a boolean";
        *flag = u[key].get<bool>();
    }
    return std::nullopt;
}

// The optional "restored" array: units restored whose drop-ins memprotd made.
std::optional<std::string> parse_restored(const json& doc, std::vector<StateStore::Restored>& out) {
    if (!doc.contains("restored"))
        return std::nullopt;
    if (!doc["restored"].is_array())
        return "\"restored\" is not an array";
    for (const json& u : doc["restored"]) {
        StateStore::Entry e;
        if (auto why = parse_entry(u, e))
            return "restored entry " + std::to_string(out.size()) + " " + *why;
        if (std::any_of(out.begin(), out.end(), [&](const StateStore::Restored& r) { return r.unit == e.unit; }))
            return "restored unit " + e.unit + " listed twice";
        out.push_back({e.unit, e.prior, e.made});
    }
    return std::nullopt;
}

json made_json(json j, const StateStore::MadeDropins& made) {
    j["made_low"] = made.memory_low;
    j["made_min"] = made.memory_min;
    return j;
}

// A value as systemd writes it in a drop-in: bytes, or "infinity".
std::string dropin_value(uint64_t v) { return v == kUnlimited ? "infinity" : std::to_string(v); }

// Writes `text` to `file` in `dir` (made 0700 if missing) through a
// temporary file, fsync and rename, then fsyncs the directory: a crash
// leaves the old or the new file.
Status write_atomically(const std::string& dir, const std::string& file, const std::string& text) {
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
        return Error{dir, 0, "", "cannot create: " + errno_text(errno)};
    const std::string tmp = file + ".tmp";
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!fd)
        return Error{tmp, 0, "", "cannot create: " + errno_text(errno)};
    if (const int err = write_all(fd.get(), text); err != 0)
        return Error{tmp, 0, "", "cannot write: " + errno_text(err)};
    if (::fsync(fd.get()) != 0)
        return Error{tmp, 0, "", "fsync: " + errno_text(errno)};
    fd.reset();
    if (std::rename(tmp.c_str(), file.c_str()) != 0)
        return Error{file, 0, "", "cannot rename " + tmp + " over it: " + errno_text(errno)};
    // The rename itself must reach the disk before we act on the promise.
    UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dfd)
        (void)::fsync(dfd.get());
    return Ok{};
}

}  // namespace

StateStore::StateStore(std::string runtime_dir, std::string control_dir)
    : dir_(std::move(runtime_dir)), control_dir_(std::move(control_dir)) {}

Status StateStore::load() {
    entries_.clear();
    restored_.clear();
    next_seq_ = 1;
    const std::string file = path();
    std::string text;
    if (const int err = read_file(file, text); err != 0) {
        if (err == ENOENT)
            return Ok{};
        return Error{file, 0, "", "cannot read: " + errno_text(err)};
    }

    json doc;
    QuietDomParser sax(doc);
    std::optional<std::string> reason;
    std::vector<Entry> loaded;
    std::vector<Restored> restored;
    if (!json::sax_parse(text, &sax) || doc.is_discarded()) {
        reason = sax.reason.empty() ? "not valid JSON" : sax.reason;
    } else if (!doc.is_object() || !doc.contains("version") || !doc["version"].is_number_integer()) {
        reason = "no integer \"version\" at top level";
    } else if (doc["version"].get<int64_t>() != kSchemaVersion) {
        reason = "unsupported version " + doc["version"].dump();
    } else if (!doc.contains("units") || !doc["units"].is_array()) {
        reason = "no \"units\" array";
    } else {
        for (const json& u : doc["units"]) {
            Entry e;
            if (auto why = parse_entry(u, e)) {
                reason = "entry " + std::to_string(loaded.size()) + " " + *why;
                break;
            }
            if (std::any_of(loaded.begin(), loaded.end(), [&](const Entry& x) { return x.unit == e.unit; })) {
                reason = "unit " + e.unit + " recorded twice";
                break;
            }
            loaded.push_back(std::move(e));
        }
        if (!reason)
            reason = parse_restored(doc, restored);
    }
    if (!reason)
        for (const Restored& r : restored)
            if (std::any_of(loaded.begin(), loaded.end(), [&](const Entry& e) { return e.unit == r.unit; }))
                reason = "unit " + r.unit + " both recorded and restored";
    if (!reason) {
        entries_ = std::move(loaded);
        restored_ = std::move(restored);
        for (const Entry& e : entries_)
            next_seq_ = std::max(next_seq_, e.seq + 1);
        // systemd drops a unit's drop-ins with the unit: nothing to list.
        std::erase_if(restored_, [&](const Restored& r) {
            return dropin_line(r.unit, "MemoryLow").empty() && dropin_line(r.unit, "MemoryMin").empty();
        });
        save_restored_dropins();
        return Ok{};
    }

    const std::string aside = file + ".corrupt";
    std::string how = "moved to " + aside;
    if (std::rename(file.c_str(), aside.c_str()) != 0)
        how = "could not be moved to " + aside + ": " + errno_text(errno);
    return Error{file, 0, "", "corrupt state (" + *reason + "); nothing restored from it; " + how};
}

bool StateStore::has(const std::string& unit) const {
    return std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.unit == unit; });
}

// What a drop-in says: its KEY= line ("MemoryLow=0"); "" when it is
// missing; "?" when it cannot be read or has no such line.
std::string StateStore::dropin_line(const std::string& unit, const char* key) const {
    std::string text;
    if (const int err = read_file(control_dir_ + "/" + unit + ".d/50-" + key + ".conf", text); err != 0)
        return err == ENOENT ? "" : "?";
    const std::string prefix = std::string(key) + "=";
    size_t at = 0;
    while (at < text.size()) {
        size_t end = text.find('\n', at);
        end = end == std::string::npos ? text.size() : end;
        if (text.compare(at, prefix.size(), prefix) == 0)
            return text.substr(at, end - at);
        at = end + 1;
    }
    return "?";
}

// A drop-in memprotd's writes make: one missing now, or one it made and
// restored before that still says what the restore wrote (one rewritten
// since is another writer's).
StateStore::MadeDropins StateStore::made_by_us(const std::string& unit) const {
    if (control_dir_.empty())
        return {};
    const auto was = std::find_if(restored_.begin(), restored_.end(), [&](const Restored& r) { return r.unit == unit; });
    const auto made = [&](const char* key, bool listed, uint64_t value) {
        const std::string line = dropin_line(unit, key);
        return line.empty() || (listed && line == std::string(key) + "=" + dropin_value(value));
    };
    if (was == restored_.end())
        return {made("MemoryLow", false, 0), made("MemoryMin", false, 0)};
    return {made("MemoryLow", was->made.memory_low, was->values.memory_low),
            made("MemoryMin", was->made.memory_min, was->values.memory_min)};
}

Status StateStore::record(const std::string& unit, const UnitProtection& prior) {
    if (has(unit))
        return Ok{};
    const std::vector<Restored> restored_before = restored_;
    entries_.push_back({unit, prior, next_seq_++, made_by_us(unit)});
    std::erase_if(restored_, [&](const Restored& r) { return r.unit == unit; });
    Status s = save();
    if (!s) {
        entries_.pop_back();  // not on disk, so not promised: the caller will not write
        restored_ = restored_before;
    }
    return s;
}

Status StateStore::forget(const std::string& unit) {
    const auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.unit == unit; });
    if (it == entries_.end())
        return Ok{};
    const Entry kept = *it;
    const auto at = it - entries_.begin();
    entries_.erase(it);
    Status s = save();
    if (!s)
        entries_.insert(entries_.begin() + at, kept);
    return s;
}

std::vector<Error> StateStore::restore(Actuator& actuator, const std::function<bool(const std::string&)>& which) {
    std::vector<size_t> order;
    for (size_t i = 0; i < entries_.size(); ++i)
        if (!which || which(entries_[i].unit))
            order.push_back(i);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        const int da = unit_depth(entries_[a].unit), db = unit_depth(entries_[b].unit);
        if (da != db)
            return da > db;
        return entries_[a].seq > entries_[b].seq;
    });

    std::vector<Error> errors;
    std::vector<bool> done(entries_.size(), false);
    for (size_t i : order) {
        Status s = actuator.set(entries_[i].unit, entries_[i].prior);
        if (s)
            done[i] = true;
        else
            errors.push_back(s.error());
    }
    if (std::none_of(done.begin(), done.end(), [](bool d) { return d; }))
        return errors;
    std::vector<Entry> kept;
    for (size_t i = 0; i < entries_.size(); ++i) {
        if (!done[i])
            kept.push_back(std::move(entries_[i]));
        else if (entries_[i].made.memory_low || entries_[i].made.memory_min)
            restored_.push_back({entries_[i].unit, entries_[i].prior, entries_[i].made});
    }
    entries_ = std::move(kept);
    if (Status s = save(); !s)
        errors.push_back(s.error());
    return errors;
}

Status StateStore::save() {
    json units = json::array(), restored = json::array();
    for (const Entry& e : entries_)
        units.push_back(made_json({{"unit", e.unit},
                                   {"memory_low", e.prior.memory_low},
                                   {"memory_min", e.prior.memory_min},
                                   {"seq", e.seq}},
                                  e.made));
    for (const Restored& r : restored_)
        restored.push_back(made_json({{"unit", r.unit},
                                      {"memory_low", r.values.memory_low},
                                      {"memory_min", r.values.memory_min},
                                      {"seq", 0}},
                                     r.made));
    json doc{{"version", kSchemaVersion}, {"units", std::move(units)}};
    if (!restored.empty())
        doc["restored"] = std::move(restored);
    const std::string text = doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";  // never throw: lib/
    if (Status s = write_atomically(dir_, path(), text); !s)
        return s;
    save_restored_dropins();
    return Ok{};
}

// restored-dropins, from restored_: a shell reads it (debian/postrm). Its
// failure is kept in list_error_, not the record's: state.json is the promise.
void StateStore::save_restored_dropins() {
    std::string text;
    for (const Restored& r : restored_) {
        if (r.made.memory_low)
            text += r.unit + " MemoryLow=" + dropin_value(r.values.memory_low) + "\n";
        if (r.made.memory_min)
            text += r.unit + " MemoryMin=" + dropin_value(r.values.memory_min) + "\n";
    }
    const std::string file = restored_dropins_path();
    list_error_.reset();
    if (text.empty()) {
        if (::unlink(file.c_str()) != 0 && errno != ENOENT)
            list_error_ = Error{file, 0, "", "cannot remove: " + errno_text(errno)};
        return;
    }
    if (Status s = write_atomically(dir_, file, text); !s)
        list_error_ = s.error();
}

}  // namespace memprotd
