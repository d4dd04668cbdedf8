// SPDX-License-Identifier: LGPL-2.1-or-later
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace memprotd {

// An error that says what went wrong and where. `file` is the path as the
// caller knows it (a cgroup file, a config file); `line` is 1-based, 0 when
// the error is not tied to a line; `key` is the offending key, if any.
struct Error {
    std::string file;
    int line = 0;
    std::string key;
    std::string message;

    // "FILE:LINE: KEY: MESSAGE", leaving out the parts that are empty.
    [[nodiscard]] std::string to_string() const;
};

// A value or an Error. std::expected is C++23; this is the part we need.
template <typename T>
class Result {
public:
    Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT(google-explicit-constructor)
    Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT(google-explicit-constructor)

    [[nodiscard]] bool ok() const { return v_.index() == 0; }
    explicit operator bool() const { return ok(); }

    [[nodiscard]] T& value() & { return std::get<0>(v_); }
    [[nodiscard]] const T& value() const& { return std::get<0>(v_); }
    [[nodiscard]] T&& value() && { return std::get<0>(std::move(v_)); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }

    [[nodiscard]] const Error& error() const { return std::get<1>(v_); }

private:
    std::variant<T, Error> v_;
};

// For operations that produce nothing but may fail.
struct Ok {};
using Status = Result<Ok>;

}  // namespace memprotd
