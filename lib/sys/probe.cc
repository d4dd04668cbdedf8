// SPDX-License-Identifier: LGPL-2.1-or-later
#include "probe.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <optional>
#include <string_view>

#include "file_io.h"
#include "parse.h"

namespace memprotd {

namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    return s;
}

bool has_option(std::string_view options, std::string_view wanted) {
    while (!options.empty()) {
        const size_t comma = options.find(',');
        if (options.substr(0, comma) == wanted)
            return true;
        if (comma == std::string_view::npos)
            break;
        options.remove_prefix(comma + 1);
    }
    return false;
}

std::string kernel_release(const std::string& proc_root) {
    // A fake proc root stands for another machine: the release is the one it
    // claims, not ours.
    if (proc_root == "/proc") {
        utsname u{};
        if (::uname(&u) == 0)
            return u.release;
        return {};
    }
    std::string text;
    if (read_file(proc_root + "/sys/kernel/osrelease", text) != 0)
        return {};
    return std::string(trim(text));
}

bool any_child_has(const std::string& root, const char* file) {
    DIR* dir = ::opendir(root.c_str());
    if (!dir)
        return false;
    bool found = false;
    const int dfd = ::dirfd(dir);
    while (!found) {
        const dirent* d = ::readdir(dir);
        if (!d)
            break;
        std::string_view name(d->d_name);
        if (name == "." || name == ".." || (d->d_type != DT_DIR && d->d_type != DT_UNKNOWN))
            continue;
        std::string rel(name);
        rel += '/';
        rel += file;
        struct stat st {};
        // memory.reclaim is write-only: test for existence, not readability.
        found = ::fstatat(dfd, rel.c_str(), &st, 0) == 0;
    }
    ::closedir(dir);
    return found;
}

}  // namespace

KernelFeatures probe_features(const ProbeRoots& roots) {
    KernelFeatures f;
    if (long page = ::sysconf(_SC_PAGESIZE); page > 0)
        f.page_size = static_cast<uint64_t>(page);
    f.kernel_release = kernel_release(roots.proc_root);

    std::string root = roots.cgroup_root;
    while (root.size() > 1 && root.back() == '/') root.pop_back();

    std::string text;
    f.psi = read_file(roots.proc_root + "/pressure/memory", text) == 0 &&
            parse_psi(text, roots.proc_root + "/pressure/memory").ok();

    if (read_file(roots.sys_root + "/kernel/mm/lru_gen/enabled", text) == 0) {
        f.mglru_present = true;
        if (auto flags = parse_lru_gen_enabled(text, "lru_gen/enabled"); flags) {
            f.mglru_flags = *flags;
            f.mglru_enabled = (*flags & 1U) != 0;
        }
    }

    {
        // Readability is the question; the first page answers it without
        // making the kernel print every memcg.
        UniqueFd fd(::open((roots.debugfs_root + "/lru_gen").c_str(), O_RDONLY | O_CLOEXEC));
        char byte = 0;
        f.lru_gen_debugfs = fd && ::pread(fd.get(), &byte, 1, 0) >= 0;
    }

    struct stat st {};
    if (::stat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        f.unusable_reason = "the cgroup root " + root + " does not exist";
        return f;
    }

    std::string mount_point = roots.cgroup_mount_point.empty() ? root : roots.cgroup_mount_point;
    while (mount_point.size() > 1 && mount_point.back() == '/') mount_point.pop_back();
    std::optional<std::string> mount_options;
    if (read_file(roots.mounts_file, text) == 0)
        mount_options = cgroup2_mount_options(text, mount_point);
    const bool has_controllers_file = read_file(root + "/cgroup.controllers", text) == 0;

    f.cgroup2 = mount_options.has_value() || has_controllers_file;
    f.memory_controller = has_controllers_file && controllers_contain(text, "memory");
    f.memory_recursiveprot = mount_options && has_option(*mount_options, "memory_recursiveprot");
    f.memory_reclaim = any_child_has(root, "memory.reclaim");

    if (!f.cgroup2) {
        // A hybrid host has cgroup2 only at <root>/unified, and without the
        // memory controller, which v1 holds: only a reboot changes that.
        f.unusable_reason = "cgroup v2 is not mounted at " + mount_point +
                            " (this host uses cgroup v1 or a hybrid layout; memprotd needs the "
                            "unified hierarchy: boot with systemd.unified_cgroup_hierarchy=1)";
    } else if (!f.memory_controller) {
        f.unusable_reason = "the memory controller is not available in " + root +
                            "/cgroup.controllers (remove cgroup_disable=memory from the kernel "
                            "command line, or for a delegated subtree add +memory to the "
                            "parent's cgroup.subtree_control)";
    }
    return f;
}

}  // namespace memprotd
