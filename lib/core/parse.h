// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Pure parsers for the kernel's text files. Each takes the file's contents
// and the name to use in errors (the path as the caller knows it), and either
// fills a plain struct or returns an Error naming the file, the 1-based line
// and what was wrong. No I/O, no allocation beyond the output (and the Error).
// Blank lines, a missing final newline and trailing whitespace are accepted;
// input with no content at all is an error ("empty file", line 0). Numbers
// that do not fit are errors, never wrapped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "model.h"
#include "result.h"

namespace memprotd {

// memory.current, memory.min, memory.low, memory.high, memory.max,
// memory.swap.current: one u64, or "max" (→ kUnlimited). Trailing newline ok.
Result<uint64_t> parse_u64_or_max(std::string_view text, std::string_view file);

// memory.stat: "key value" lines. Every key kept in file order, unknown and
// duplicate keys included. `out` is cleared first and its storage reused. On
// error `out` holds the lines before the bad one.
Status parse_memory_stat(std::string_view text, std::string_view file, MemoryStat& out);

// memory.events: "key value" lines; known keys filled, unknown keys ignored.
Result<MemoryEvents> parse_memory_events(std::string_view text, std::string_view file);

// memory.pressure, /proc/pressure/memory: a "some" line and optionally a
// "full" line, each with avg10=, avg60=, avg300=, total= (all required).
Result<Psi> parse_psi(std::string_view text, std::string_view file);

// /proc/meminfo: "Key:   value kB" lines. MemTotal is required; MemAvailable,
// SwapTotal, SwapFree default to 0 when absent, MemFree to unknown. Values
// returned in bytes.
Result<Meminfo> parse_meminfo(std::string_view text, std::string_view file);

// /sys/kernel/mm/lru_gen/enabled: "0x0007" → 7.
Result<uint32_t> parse_lru_gen_enabled(std::string_view text, std::string_view file);

// /sys/kernel/debug/lru_gen (and lru_gen_full: extra rows are skipped):
//   memcg    ID PATH
//    node     N
//         SEQ   AGE_MS   NR_ANON   NR_FILE
// (Documentation/admin-guide/mm/multigen_lru.rst). A memcg line without a path gives an empty path;
// node lines after the first belong to the memcg line before them. A count
// marked 'x' (lru_gen_full: that type's generation is gone) is read as 0.
Result<LruGen> parse_lru_gen(std::string_view text, std::string_view file);

// cgroup.controllers / cgroup.subtree_control: space-separated names.
// True when `controller` is among them.
bool controllers_contain(std::string_view text, std::string_view controller);

// /proc/self/mountinfo or /proc/mounts: the options of the cgroup2 mount at
// `mount_point`, comma-separated, or nullopt when there is none. For
// mountinfo the mount and superblock options are joined (as /proc/mounts
// shows them). `mount_point` is unescaped; the file's \040 etc. are matched.
// When several cgroup2 mounts share the point, the last (topmost) wins.
std::optional<std::string> cgroup2_mount_options(std::string_view mounts_text, std::string_view mount_point);

}  // namespace memprotd
