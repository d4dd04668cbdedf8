// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Writes aging commands (lib/core/aging.h) to debugfs lru_gen. One write per
// command: the kernel stops at the first command that fails, and a memcg
// removed since the last read (-EINVAL) must not keep the others from aging.
#pragma once

#include <string>

#include "aging.h"
#include "result.h"

namespace memprotd {

class LruGenAger {
public:
    // `lru_gen_path`: /sys/kernel/debug/lru_gen, or a file in a test tree.
    explicit LruGenAger(std::string lru_gen_path) : path_(std::move(lru_gen_path)) {}

    // Ages one memcg on one node. Returns 0 or the errno: EINVAL when the
    // memcg is gone (or the sequence was never valid), EROFS or EACCES when
    // the unit's sandbox or the permissions forbid it.
    [[nodiscard]] int age(const AgingRequest& request) const;

    // Names the file, the command, the memcg and the errno:
    // PATH: cannot write "+ 7 0 12" (/workload.slice/kv.service): MESSAGE.
    [[nodiscard]] Error error(const AgingRequest& request, int err) const;

    [[nodiscard]] const std::string& path() const { return path_; }

private:
    std::string path_;
};

}  // namespace memprotd
