// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The one place that touches file descriptors for the readers: an owning fd
// and reads into caller-owned, reused buffers. Results are errno values
// (0 = success) so hot paths need neither exceptions nor allocation.
#pragma once

#include <cerrno>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace memprotd {

// Owns one file descriptor; closes it on destruction. -1 = none.
class UniqueFd {
public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) : fd_(fd) {}
    ~UniqueFd() { reset(); }
    UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
    UniqueFd& operator=(UniqueFd&& other) noexcept {
        if (this != &other)
            reset(other.release());
        return *this;
    }
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;

    [[nodiscard]] int get() const { return fd_; }
    [[nodiscard]] bool valid() const { return fd_ >= 0; }
    explicit operator bool() const { return valid(); }

    int release() {
        int fd = fd_;
        fd_ = -1;
        return fd;
    }
    void reset(int fd = -1);

private:
    int fd_ = -1;
};

enum class ReadMode {
    // Read until read() returns 0. Needed for seq_file files that print one
    // record per read (debugfs lru_gen prints a page of memcgs at a time).
    kUntilEof,
    // A read that returns less than asked for is taken as the end. True for
    // regular files and for kernfs/procfs files that print a single record
    // (memory.stat, meminfo, PSI): seq_file hands the whole record to the
    // first read that fits it. Saves one syscall per file.
    kSingleRecord,
};

// A growable byte buffer for repeated reads. Unlike std::string it never
// zero-fills what a read is about to overwrite, which matters when one
// buffer that once held a large file (lru_gen) serves thousands of small ones.
class ReadBuffer {
public:
    // The bytes of the last successful read; empty after a failed one.
    [[nodiscard]] std::string_view view() const { return {data_.get(), size_}; }
    [[nodiscard]] size_t capacity() const { return capacity_; }
    void clear() { size_ = 0; }

private:
    friend int read_fd(int fd, ReadBuffer& buf, ReadMode mode);
    void grow(size_t at_least);

    std::unique_ptr<char[]> data_;
    size_t capacity_ = 0;
    size_t size_ = 0;
};

// Reads the whole file `name` relative to `dirfd` (openat with O_CLOEXEC,
// then pread from offset 0) into `buf`, reusing its capacity and growing it
// when a read fills it. Returns 0, or the errno of the failing call; `buf` is
// then empty. `name` may contain slashes.
[[nodiscard]] int read_at(int dirfd, const char* name, std::string& buf, ReadMode mode = ReadMode::kUntilEof);

[[nodiscard]] int read_at(int dirfd, const char* name, ReadBuffer& buf, ReadMode mode = ReadMode::kUntilEof);

// The same for an already open fd, from offset 0 (works for re-reading a
// kernfs/procfs file: pread at 0 regenerates its contents).
[[nodiscard]] int read_fd(int fd, std::string& buf, ReadMode mode = ReadMode::kUntilEof);
[[nodiscard]] int read_fd(int fd, ReadBuffer& buf, ReadMode mode = ReadMode::kUntilEof);

// The same for a path (relative paths resolve against the cwd).
[[nodiscard]] int read_file(const std::string& path, std::string& buf, ReadMode mode = ReadMode::kUntilEof);
[[nodiscard]] int read_file(const std::string& path, ReadBuffer& buf, ReadMode mode = ReadMode::kUntilEof);

// Opens a directory relative to `dirfd` (AT_FDCWD for a path) for openat()
// and getdents. On failure returns an invalid fd and sets `err`.
[[nodiscard]] UniqueFd open_dir_at(int dirfd, const char* name, int& err);
// A file for reading, the way read_at opens it; err is the errno on failure.
[[nodiscard]] UniqueFd open_file_at(int dirfd, const char* name, int& err);

// Writes `text` to the control file `path` in one write() (no O_CREAT: a
// control file is never one to make): debugfs lru_gen, memory.reclaim.
// Returns 0, the errno of the failing call, or EIO for a short write.
[[nodiscard]] int write_control(const std::string& path, std::string_view text);

// The errno values that mean "the cgroup (or file) is gone": ENOENT from a
// lookup, ENODEV from reading an fd whose kernfs node was removed.
[[nodiscard]] constexpr bool is_vanished(int err) {
    return err == ENOENT || err == ENODEV;
}

}  // namespace memprotd
