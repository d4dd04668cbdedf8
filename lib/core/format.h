// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Human-readable renderings shared by the CLI and the daemon's logs.
#pragma once

#include <cstdint>
#include <string>

#include "plan.h"

namespace memprotd {

// 1536 MiB → "1.5G", 300 MiB → "300M", kUnlimited → "infinity". Base 1024,
// like systemd's MemoryLow= syntax.
std::string format_bytes(uint64_t bytes);

// 0.0123 → "1.23%".
std::string format_percent(double fraction);

// The engine's reasoning for one slice in sentences with numbers: what it
// uses, how much of that is cheap cache, its working set, demand, share of
// the budget and why the next write is what it is.
std::string explain_text(const Plan& plan, const PlanEntry& entry);

// Why a slice is not managed and what would make it managed, in sentences.
std::string explain_unmanaged(const UnmanagedSlice& slice);

}  // namespace memprotd
