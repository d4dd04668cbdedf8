// SPDX-License-Identifier: LGPL-2.1-or-later
#include "file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <utility>

namespace memprotd {

void UniqueFd::reset(int fd) {
    if (fd_ >= 0)
        // Linux closes the fd even when close() reports EINTR, so never retry.
        ::close(fd_);
    fd_ = fd;
}

namespace {

// Big enough for a 6.1 memory.stat (~1.5 KiB) and meminfo (~1.5 KiB) in one
// read; lru_gen grows the buffer once and keeps it.
constexpr size_t kInitialBuffer = 4096;

}  // namespace

int read_fd(int fd, std::string& buf, ReadMode mode) {
    if (buf.capacity() < kInitialBuffer)
        buf.reserve(kInitialBuffer);
    // Use the whole capacity; only the tail past the previous size is
    // zero-filled, which costs far less than the syscalls.
    buf.resize(buf.capacity());
    size_t n = 0;
    for (;;) {
        if (n == buf.size()) {
            buf.resize(buf.size() * 2);
            buf.resize(buf.capacity());
        }
        ssize_t r = ::pread(fd, buf.data() + n, buf.size() - n, static_cast<off_t>(n));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int err = errno;
            buf.clear();
            return err;
        }
        if (r == 0)
            break;
        n += static_cast<size_t>(r);
        if (mode == ReadMode::kSingleRecord && n < buf.size())
            break;
    }
    buf.resize(n);
    return 0;
}

void ReadBuffer::grow(size_t at_least) {
    size_t cap = capacity_ ? capacity_ : kInitialBuffer;
    while (cap < at_least) cap *= 2;
    auto bigger = std::make_unique_for_overwrite<char[]>(cap);
    if (size_ > 0)  // data_ is null before the first growth; memcpy must not see it
        std::memcpy(bigger.get(), data_.get(), size_);
    data_ = std::move(bigger);
    capacity_ = cap;
}

int read_fd(int fd, ReadBuffer& buf, ReadMode mode) {
    buf.size_ = 0;
    if (buf.capacity_ == 0)
        buf.grow(kInitialBuffer);
    for (;;) {
        if (buf.size_ == buf.capacity_)
            buf.grow(buf.capacity_ * 2);
        const size_t room = buf.capacity_ - buf.size_;
        ssize_t r = ::pread(fd, buf.data_.get() + buf.size_, room, static_cast<off_t>(buf.size_));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int err = errno;
            buf.size_ = 0;
            return err;
        }
        if (r == 0)
            break;
        buf.size_ += static_cast<size_t>(r);
        if (mode == ReadMode::kSingleRecord && static_cast<size_t>(r) < room)
            break;
    }
    return 0;
}

int read_at(int dirfd, const char* name, ReadBuffer& buf, ReadMode mode) {
    int err = 0;
    const UniqueFd fd = open_file_at(dirfd, name, err);
    if (!fd) {
        buf.clear();
        return err;
    }
    return read_fd(fd.get(), buf, mode);
}

int read_file(const std::string& path, ReadBuffer& buf, ReadMode mode) {
    return read_at(AT_FDCWD, path.c_str(), buf, mode);
}

int read_at(int dirfd, const char* name, std::string& buf, ReadMode mode) {
    int err = 0;
    const UniqueFd fd = open_file_at(dirfd, name, err);
    if (!fd) {
        buf.clear();
        return err;
    }
    return read_fd(fd.get(), buf, mode);
}

int read_file(const std::string& path, std::string& buf, ReadMode mode) {
    return read_at(AT_FDCWD, path.c_str(), buf, mode);
}

UniqueFd open_file_at(int dirfd, const char* name, int& err) {
    int fd = ::openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        err = errno;
        return UniqueFd();
    }
    err = 0;
    return UniqueFd(fd);
}

UniqueFd open_dir_at(int dirfd, const char* name, int& err) {
    int fd = ::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        err = errno;
        return UniqueFd();
    }
    err = 0;
    return UniqueFd(fd);
}

int write_control(const std::string& path, std::string_view text) {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY));
    if (!fd)
        return errno;
    const ssize_t n = ::write(fd.get(), text.data(), text.size());
    if (n < 0)
        return errno;
    return static_cast<size_t>(n) == text.size() ? 0 : EIO;
}

}  // namespace memprotd
