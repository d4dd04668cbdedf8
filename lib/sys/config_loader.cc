// SPDX-License-Identifier: LGPL-2.1-or-later
#include "config_loader.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <system_error>
#include <utility>

namespace memprotd {

namespace {

constexpr const char* kMainFile = "memprotd.conf";
constexpr const char* kDaemonDropInDir = "memprotd.conf.d";
constexpr const char* kPolicyDir = "policy.d";

std::string errno_message(int err) { return std::generic_category().message(err); }

std::string join_path(const std::string& dir, const std::string& name) {
    if (!dir.empty() && dir.back() == '/')
        return dir + name;
    return dir + "/" + name;
}

bool ends_with_conf(const std::string& name) {
    constexpr std::string_view kSuffix = ".conf";
    // ".conf" alone is a hidden file, not a drop-in.
    return name.size() > kSuffix.size() && name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

// systemd's null_or_empty(): a masked name is an empty regular file or
// anything that resolves to the /dev/null device.
bool is_mask(const struct stat& st) {
    if (S_ISREG(st.st_mode))
        return st.st_size == 0;
    if (S_ISCHR(st.st_mode)) {
        struct stat null_st {};
        return stat("/dev/null", &null_st) == 0 && S_ISCHR(null_st.st_mode) && st.st_rdev == null_st.st_rdev;
    }
    return false;
}

// Reads the whole file; nullopt with `err` set on failure.
std::optional<std::string> read_whole(const std::string& path, int& err) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        err = errno;
        return std::nullopt;
    }
    std::string text;
    char buf[8192];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            err = errno;
            close(fd);
            return std::nullopt;
        }
        if (n == 0)
            break;
        text.append(buf, static_cast<size_t>(n));
    }
    close(fd);
    return text;
}

enum class Found { Missing, Masked, Read, Failed, NotAFile };

// Stats and reads `path`, appending it to `out` unless it masks or fails.
Found read_config_file(const std::string& path, std::vector<ConfigFile>& out, std::vector<Error>& errors) {
    struct stat st {};
    if (stat(path.c_str(), &st) < 0) {
        int err = errno;
        struct stat lst {};
        if (err == ENOENT && lstat(path.c_str(), &lst) < 0)
            return Found::Missing;
        // A dangling symlink: the name exists, so it is a broken config file
        // rather than an absent one.
        errors.push_back({path, 0, {}, "cannot read: " + errno_message(err)});
        return Found::Failed;
    }
    if (is_mask(st))
        return Found::Masked;
    if (S_ISDIR(st.st_mode))
        return Found::NotAFile;
    int err = 0;
    auto text = read_whole(path, err);
    if (!text) {
        errors.push_back({path, 0, {}, "cannot read: " + errno_message(err)});
        return Found::Failed;
    }
    // Empty after a racing truncation still masks: same meaning as above.
    if (text->empty())
        return Found::Masked;
    out.push_back({path, std::move(*text)});
    return Found::Read;
}

// File name → full path for every *.conf in `sub` of each dir; the first
// directory to have a name wins, std::map keeps them in strcmp order.
std::map<std::string, std::string> list_drop_ins(const std::vector<std::string>& dirs, const char* sub,
                                                 std::vector<Error>& errors) {
    std::map<std::string, std::string> found;
    for (const auto& dir : dirs) {
        std::string path = join_path(dir, sub);
        DIR* d = opendir(path.c_str());
        if (!d) {
            if (errno != ENOENT && errno != ENOTDIR)
                errors.push_back({path, 0, {}, "cannot list directory: " + errno_message(errno)});
            continue;
        }
        while (struct dirent* e = readdir(d)) {
            std::string name = e->d_name;
            if (name.front() == '.' || !ends_with_conf(name))
                continue;
            found.emplace(name, join_path(path, name));
        }
        closedir(d);
    }
    return found;
}

}  // namespace

std::vector<std::string> default_config_dirs() {
    return {"/etc/memprotd", "/run/memprotd", "/usr/local/lib/memprotd", "/usr/lib/memprotd"};
}

ConfigInput collect_config(const std::vector<std::string>& dirs) {
    ConfigInput input;
    for (const auto& dir : dirs) {
        // Masked or unreadable still counts as "this directory has it": a
        // later directory's copy must not silently take its place.
        Found f = read_config_file(join_path(dir, kMainFile), input.daemon_files, input.errors);
        if (f != Found::Missing && f != Found::NotAFile)
            break;
    }
    for (const auto& [name, path] : list_drop_ins(dirs, kDaemonDropInDir, input.errors))
        read_config_file(path, input.daemon_files, input.errors);
    for (const auto& [name, path] : list_drop_ins(dirs, kPolicyDir, input.errors))
        read_config_file(path, input.policy_files, input.errors);
    return input;
}

ConfigParse load_config(const std::vector<std::string>& dirs, uint64_t mem_total) {
    return parse_config(collect_config(dirs), mem_total);
}

}  // namespace memprotd
