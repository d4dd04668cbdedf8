// SPDX-License-Identifier: LGPL-2.1-or-later
#include "memory_lock.h"

#include <sys/mman.h>
#include <sys/resource.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string>
#include <utility>

#include "file_io.h"

namespace memprotd {
namespace {

constexpr unsigned kCapIpcLock = 14;  // linux/capability.h

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

}  // namespace

bool has_cap_ipc_lock(std::string_view proc_status) {
    constexpr std::string_view key = "\nCapEff:";
    const size_t at = proc_status.find(key);
    if (at == std::string_view::npos)
        return false;
    std::string_view rest = proc_status.substr(at + key.size());
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t'))
        rest.remove_prefix(1);
    uint64_t caps = 0;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), caps, 16);
    if (ec != std::errc() || end == rest.data() || (end != rest.data() + rest.size() && *end != '\n'))
        return false;
    return (caps >> kCapIpcLock) & 1U;
}

std::string memory_lock_refusal(uint64_t memlock_limit, bool cap_ipc_lock) {
    if (cap_ipc_lock || memlock_limit == RLIM_INFINITY)
        return {};
    return "RLIMIT_MEMLOCK is " + std::to_string(memlock_limit) +
           " bytes and CAP_IPC_LOCK is not held: later allocations would fail at the limit (the unit sets "
           "LimitMEMLOCK=infinity)";
}

MemoryLock lock_own_memory(const std::string& proc_root) {
    if (kAddressSanitizer)
        return {false, "an ASan build (-fsanitize=address): its shadow memory and quarantine would stay locked"};
    std::string status;  // unreadable: no capability is assumed
    (void)read_file(proc_root + "/self/status", status);
    rlimit rl{};
    if (::getrlimit(RLIMIT_MEMLOCK, &rl) != 0)
        return {false, std::string("getrlimit(RLIMIT_MEMLOCK): ") + std::strerror(errno)};
    if (std::string why = memory_lock_refusal(rl.rlim_cur, has_cap_ipc_lock(status)); !why.empty())
        return {false, std::move(why)};
    if (::mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) != 0)
        return {false, std::string("mlockall: ") + std::strerror(errno)};
    return {true, {}};
}

}  // namespace memprotd
