// SPDX-License-Identifier: LGPL-2.1-or-later
#include "trace_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace memprotd {

namespace {

Error io_error(const std::string& path, std::string_view what, int err) {
    return Error{path, 0, {}, fmt::format("{}: {}", what, std::strerror(err))};
}

}  // namespace

TraceWriter::TraceWriter(std::string path, uint64_t max_bytes, int old_files)
    : path_(std::move(path)), max_bytes_(max_bytes), old_files_(old_files < 0 ? 0 : old_files) {}

Status TraceWriter::open(Start start, std::string header_line) {
    header_ = std::move(header_line) + "\n";
    if (start == Start::Append) {
        fd_.reset(::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
        if (!fd_)
            return io_error(path_, "cannot open to append", errno);
        struct stat st {};
        if (fstat(fd_.get(), &st) != 0)
            return io_error(path_, "cannot stat", errno);
        size_ = static_cast<uint64_t>(st.st_size);
        return Ok{};
    }
    struct stat st {};
    if (start == Start::Rotate && ::stat(path_.c_str(), &st) == 0 && st.st_size > 0)
        return rotate();
    return open_new();
}

Status TraceWriter::open_new() {
    fd_.reset(::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0640));
    if (!fd_)
        return io_error(path_, "cannot create", errno);
    size_ = 0;
    return write_all(header_);
}

Status TraceWriter::rotate() {
    fd_.reset();
    if (old_files_ == 0) {
        (void)::unlink(path_.c_str());
    } else {
        (void)::unlink(fmt::format("{}.{}", path_, old_files_).c_str());
        for (int k = old_files_ - 1; k >= 1; --k)
            (void)::rename(fmt::format("{}.{}", path_, k).c_str(), fmt::format("{}.{}", path_, k + 1).c_str());
        if (::rename(path_.c_str(), (path_ + ".1").c_str()) != 0 && errno != ENOENT)
            return io_error(path_, "cannot rotate", errno);
    }
    return open_new();
}

Status TraceWriter::restate(std::string header_line) {
    if (!fd_)
        return Error{path_, 0, {}, "not open"};
    const bool header_only = only_header();
    header_ = std::move(header_line) + "\n";
    if (header_only)
        return open_new();
    if (max_bytes_ && size_ + header_.size() > max_bytes_)
        return rotate();  // the new file starts with it
    return write_all(header_);
}

Status TraceWriter::write(std::string_view lines) {
    if (!fd_)
        return Error{path_, 0, {}, "not open"};
    if (max_bytes_ && size_ > header_.size() && size_ + lines.size() > max_bytes_)
        if (Status s = rotate(); !s)
            return s;
    return write_all(lines);
}

Status TraceWriter::write_all(std::string_view bytes) {
    while (!bytes.empty()) {
        const ssize_t n = ::write(fd_.get(), bytes.data(), bytes.size());
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return io_error(path_, "cannot write", errno);
        }
        bytes.remove_prefix(static_cast<size_t>(n));
        size_ += static_cast<uint64_t>(n);
    }
    return Ok{};
}

Result<std::string> read_trace_file(const std::string& path) {
    std::string text;
    if (const int err = read_file(path, text); err != 0)
        return io_error(path, "cannot read", err);
    return text;
}

}  // namespace memprotd
