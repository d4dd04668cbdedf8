// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Keeps memprotd's own pages in RAM. Reclaim beside the workloads it protects
// must not page the protector out: a paged-out daemon ticks late and dear.
// A MemoryMin= on its unit cannot do this, because the kernel caps a
// cgroup's effective memory.min by its ancestors' (system.slice has none);
// mlockall does, whatever the slices above it hold.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace memprotd {

struct MemoryLock {
    bool locked = false;
    // Why the pages are not locked (empty when locked): shown by
    // `memprotctl status` and logged at start.
    std::string reason;
};

// Whether CAP_IPC_LOCK is in the CapEff line of a /proc/PID/status text.
// False when the line is missing or malformed.
bool has_cap_ipc_lock(std::string_view proc_status);

// Why locking must not be tried (empty: it may be). The lock takes future
// mappings too (MCL_FUTURE); without CAP_IPC_LOCK the kernel then fails
// every mmap and brk beyond RLIMIT_MEMLOCK, so a finite limit would turn
// into failed allocations later. `memlock_limit` is RLIMIT_MEMLOCK's soft
// value (RLIM_INFINITY for none).
std::string memory_lock_refusal(uint64_t memlock_limit, bool cap_ipc_lock);

// Locks the process's current and future pages as they are faulted in
// (mlockall MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT: nothing is read in that
// was not used). Not in ASan builds, whose shadow and quarantine would
// stay resident (the reason avoids the word the guest tests look for in
// sanitizer reports). Never throws; `proc_root` is where self/status is read.
MemoryLock lock_own_memory(const std::string& proc_root = "/proc");

}  // namespace memprotd
