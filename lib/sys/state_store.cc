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

}  // namespace

StateStore::StateStore(std::string runtime_dir) : dir_(std::move(runtime_dir)) {}

Status StateStore::load() {
    entries_.clear();
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
    std::string reason;
    if (!json::sax_parse(text, &sax) || doc.is_discarded()) {
        reason = sax.reason.empty() ? "not valid JSON" : sax.reason;
    } else if (!doc.is_object() || !doc.contains("version") || !doc["version"].is_number_integer()) {
        reason = "no integer \"version\" at top level";
    } else if (doc["version"].get<int64_t>() != kSchemaVersion) {
        reason = "unsupported version " + doc["version"].dump();
    } else if (!doc.contains("units") || !doc["units"].is_array()) {
        reason = "no \"units\" array";
    } else {
        std::vector<Entry> loaded;
        for (const json& u : doc["units"]) {
            if (!u.is_object() || !u.contains("unit") || !u["unit"].is_string() || u["unit"].get_ref<const std::string&>().empty() ||
                !u.contains("memory_low") || !u["memory_low"].is_number_unsigned() || !u.contains("memory_min") ||
                !u["memory_min"].is_number_unsigned() || !u.contains("seq") || !u["seq"].is_number_unsigned()) {
                reason = "entry " + std::to_string(loaded.size()) +
                         " lacks a unit name, unsigned memory_low, memory_min or seq";
                break;
            }
            Entry e{u["unit"].get<std::string>(), {u["memory_low"].get<uint64_t>(), u["memory_min"].get<uint64_t>()},
                    u["seq"].get<uint64_t>()};
            if (std::any_of(loaded.begin(), loaded.end(), [&](const Entry& x) { return x.unit == e.unit; })) {
                reason = "unit " + e.unit + " recorded twice";
                break;
            }
            loaded.push_back(std::move(e));
        }
        if (reason.empty()) {
            entries_ = std::move(loaded);
            for (const Entry& e : entries_)
                next_seq_ = std::max(next_seq_, e.seq + 1);
            return Ok{};
        }
    }

    const std::string aside = file + ".corrupt";
    std::string how = "moved to " + aside;
    if (std::rename(file.c_str(), aside.c_str()) != 0)
        how = "could not be moved to " + aside + ": " + errno_text(errno);
    return Error{file, 0, "", "corrupt state (" + reason + "); nothing restored from it; " + how};
}

bool StateStore::has(const std::string& unit) const {
    return std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.unit == unit; });
}

Status StateStore::record(const std::string& unit, const UnitProtection& prior) {
    if (has(unit))
        return Ok{};
    entries_.push_back({unit, prior, next_seq_++});
    Status s = save();
    if (!s)
        entries_.pop_back();  // not on disk, so not promised: the caller will not write
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
    for (size_t i = 0; i < entries_.size(); ++i)
        if (!done[i])
            kept.push_back(std::move(entries_[i]));
    entries_ = std::move(kept);
    if (Status s = save(); !s)
        errors.push_back(s.error());
    return errors;
}

Status StateStore::save() {
    json units = json::array();
    for (const Entry& e : entries_)
        units.push_back({{"unit", e.unit},
                         {"memory_low", e.prior.memory_low},
                         {"memory_min", e.prior.memory_min},
                         {"seq", e.seq}});
    const std::string text = json{{"version", kSchemaVersion}, {"units", std::move(units)}}.dump(
                                 2, ' ', false, json::error_handler_t::replace) +  // never throw: lib/
                             "\n";

    if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST)
        return Error{dir_, 0, "", "cannot create: " + errno_text(errno)};
    const std::string file = path();
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
    UniqueFd dfd(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dfd)
        (void)::fsync(dfd.get());
    return Ok{};
}

}  // namespace memprotd
