// SPDX-License-Identifier: LGPL-2.1-or-later
#include "format.h"

#include <fmt/format.h>

#include "managed.h"

namespace memprotd {

std::string format_bytes(uint64_t bytes) {
    if (bytes == kUnlimited)
        return "infinity";
    static constexpr const char* kUnits[] = {"B", "K", "M", "G", "T", "P", "E"};
    double v = static_cast<double>(bytes);
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < std::size(kUnits)) {
        v /= 1024.0;
        ++u;
    }
    if (u == 0)
        return fmt::format("{}B", bytes);
    if (v >= 100.0 || v == static_cast<double>(static_cast<uint64_t>(v)))
        return fmt::format("{:.0f}{}", v, kUnits[u]);
    return fmt::format("{:.1f}{}", v, kUnits[u]);
}

std::string format_percent(double fraction) { return fmt::format("{:.2f}%", fraction * 100.0); }

namespace {

// What comes_back_rate counts (estimate_cheap_cache).
std::string comes_back_source(const Plan& plan, const Explanation& x) {
    if (!plan.mglru)
        return "";
    return fmt::format(" (MGLRU: the smaller of {:.1f} activated and {:.1f} restored)", x.activate_file_rate,
                       x.restore_file_rate);
}

// Step 7's line, when this tick trims the slice or it is left alone.
std::string trim_line(const Plan& plan, const Explanation& x) {
    if (x.trim)
        return fmt::format("  trims {} of its cheap cache above demand ({} there) with {}: MemFree {} is below the "
                           "{} the protected slices' bursts need.",
                           format_bytes(x.trim), format_bytes(x.trimmable), trim_mechanism_name(plan.trim_mechanism),
                           format_bytes(plan.mem_free.value_or(0)), format_bytes(plan.trim_headroom));
    if (x.trim_hold_s > 0)
        return fmt::format("  not trimmed for {:.0f} s more: cache trimmed from it came back (activated refaults).",
                           x.trim_hold_s);
    return {};
}

}  // namespace

std::string explain_text(const Plan& plan, const PlanEntry& e) {
    const Explanation& x = e.x;
    std::string out;
    auto line = [&out](const std::string& s) {
        out += s;
        out += '\n';
    };
    line(fmt::format("{} ({})", e.unit, e.cgroup));
    line(fmt::format("  uses {}: anon {}, file {} (inactive {}, mapped {}, dirty+writeback {}), "
                     "reclaimable slab {}.",
                     format_bytes(x.current), format_bytes(x.anon), format_bytes(x.file),
                     format_bytes(x.inactive_file), format_bytes(x.file_mapped), format_bytes(x.file_dirty),
                     format_bytes(x.slab_reclaimable)));
    line(fmt::format("  cheap cache {} = {} − mapped − dirty, {} before the refault discount "
                     "({:.1f} file pages/s come back into the working set{} against {:.1f} pages stolen/s, "
                     "ratio {:.3f}; at ≥ 0.2 cache counts as needed; all file refaults {:.1f}/s).",
                     format_bytes(x.cheap_cache),
                     x.cheap_from_all_file ? "file, active or not (reclaim turns it over)" : "inactive file",
                     format_bytes(x.cheap_cache_raw), x.comes_back_rate,
                     comes_back_source(plan, x), x.pgsteal_rate, x.refault_ratio, x.refault_file_rate));
    if (x.working_set_source == WorkingSetSource::LruGen)
        line(fmt::format("  working set {} from MGLRU generations younger than the window{}.",
                         format_bytes(x.working_set_base), plan.swap ? "" : " (all anon counted: no swap)"));
    else
        line(fmt::format("  working set {} = use − cheap cache − reclaimable slab{}.",
                         format_bytes(x.working_set_base),
                         plan.swap ? " − inactive anon (swap is available)" : ", at least anon (no swap)"));
    if (x.thrash_correction)
        line(fmt::format("  + {} thrash correction: memory pressure {} with {:.1f} pages/s refaulting "
                         "into the working set.",
                         format_bytes(x.thrash_correction), format_percent(x.psi_some),
                         x.activate_restore_rate));
    if (x.warm_footprint)
        line(fmt::format("  anon working set raised to the warm footprint {} (anon + swap {}): {:.1f} anon pages/s "
                         "refault from swap; it decays slowly once they stop.",
                         format_bytes(x.warm_footprint), format_bytes(x.swap_current), x.refault_anon_rate));
    line(fmt::format("  demand {} (working set {} plus headroom, at most use + refault allowance {}).",
                     format_bytes(x.demand), format_bytes(x.working_set), format_bytes(x.refault_allowance)));
    if (x.keep_demand > x.demand)
        line(fmt::format("  cold anon {} (resident, outside the working set): with it the demand would be {}; "
                         "{} of the room every demand leaves is lent to it (swapping it out costs more than "
                         "dropping cheap cache).",
                         format_bytes(x.cold_anon), format_bytes(x.keep_demand),
                         format_bytes(lent_to_cold_anon(x))));
    if (x.escalated_min && x.escalation_ahead)
        line(fmt::format("  MemoryMin {} holds the working set ahead of reclaim: memory.low only defers reclaim "
                         "on this kernel (EscalateAhead=yes).",
                         format_bytes(x.escalated_min)));
    else if (x.escalated_min)
        line(fmt::format("  MemoryMin {} holds the working set: MemoryLow did not hold (low events while the slice "
                         "was within it); the last {:.0f} s ago, back to MemoryLow alone after a quiet period.",
                         format_bytes(x.escalated_min), x.escalation_quiet_s));
    if (x.escalation_partial)
        line("  not held ahead: MemoryLow alone would give it less than the working set a floor would hold; a "
             "hard floor under part of a working set keeps no workload whole and only narrows what reclaim can "
             "take from (EscalateAhead=yes).");
    if (x.escalated_min && x.escalation_held)
        line("  held: the floor is above the working set read now, and floor and demand keep what it holds: it "
             "follows a reading only once that is 12.5% lower, has lasted 30 s and reclaim took nothing from "
             "the slice meanwhile (while it does, the floor yields and the estimate falls with it).");
    std::string bounds;
    if (x.floor)
        bounds += fmt::format(", Floor {}{}", format_bytes(x.floor), x.escalated_min ? " (with MemoryMin's)" : "");
    if (x.min_protection)
        bounds += fmt::format(", MinProtection {}", format_bytes(x.min_protection));
    if (x.max_protection != kUnlimited)
        bounds += fmt::format(", MaxProtection {}", format_bytes(x.max_protection));
    line(fmt::format("  weight {}{}; its group shares {}; decided by: {}.", x.weight, bounds,
                     format_bytes(x.group_budget), bound_name(x.bound)));
    line(fmt::format("  target MemoryLow {} MemoryMin {}; now {} / {}.", format_bytes(x.target_low),
                     format_bytes(x.target_min), format_bytes(x.prior.memory_low),
                     format_bytes(x.prior.memory_min)));
    if (std::string t = trim_line(plan, x); !t.empty())
        line(t);
    if (x.aging_held)
        line("  not aged (WorkingSetAging=): within its protection, where MemoryLow only defers reclaim, and no "
             "slice is short of its demand; aging would leave its untouched pages where reclaim takes first.");
    if (e.write())
        line(fmt::format("  next write: MemoryLow {} MemoryMin {}{}.", format_bytes(x.next.memory_low),
                         format_bytes(x.next.memory_min), x.damping ? " — " + damping_text(x.damping) : ""));
    else
        line(fmt::format("  no write this tick{}.", x.damping ? ": " + damping_text(x.damping) : ""));
    if (!e.sources().empty()) {
        std::string s;
        for (const auto& f : e.sources())
            s += (s.empty() ? "" : ", ") + f;
        line("  policy from " + s + ".");
    }
    return out;
}

std::string explain_unmanaged(const UnmanagedSlice& slice) {
    switch (slice.why) {
        case Unmanaged::AncestorManageNo:
            return fmt::format("{} is not managed: an ancestor has Manage=no.\n", slice.unit);
        case Unmanaged::Kubelet:
            return fmt::format("{0} is not managed: {1}.\n"
                               "  A policy whose [Match] Slice= names {0} exactly (a glob is not enough) "
                               "makes it managed.\n",
                               slice.unit, kKubeletOwnsWhy);
    }
    return {};
}

}  // namespace memprotd
