// SPDX-License-Identifier: LGPL-2.1-or-later
#include "logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/sinks/systemd_sink.h>
#include <spdlog/spdlog.h>
#include <syslog.h>
#include <systemd/sd-journal.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <set>
#include <string_view>

#include "format.h"

namespace memprotd::logging {

namespace {

bool g_journal = false;

}  // namespace

bool setup(const std::string& level, Target target) {
    if (target == Target::Auto)
        target = (std::getenv("JOURNAL_STREAM") || std::getenv("INVOCATION_ID")) ? Target::Journal : Target::Stderr;
    g_journal = target == Target::Journal;

    std::shared_ptr<spdlog::logger> logger;
    if (g_journal) {
        logger = std::make_shared<spdlog::logger>(
            "memprotd", std::make_shared<spdlog::sinks::systemd_sink_st>("memprotd"));
    } else {
        logger = std::make_shared<spdlog::logger>("memprotd", std::make_shared<spdlog::sinks::stderr_sink_st>());
        logger->set_pattern("memprotd: %^%l%$: %v");
    }
    const auto lvl = spdlog::level::from_str(level);
    // from_str maps unknown names to "off"; only accept that when asked for.
    const bool known = lvl != spdlog::level::off || level == "off";
    logger->set_level(known ? lvl : spdlog::level::info);
    logger->flush_on(spdlog::level::trace);
    spdlog::set_default_logger(std::move(logger));
    return known;
}

bool to_journal() { return g_journal; }

void change(const std::string& unit, const UnitProtection& from, const UnitProtection& to,
            const std::string& reason, bool dry_run) {
    const std::string message =
        fmt::format("{}{}: MemoryLow {} → {}, MemoryMin {} → {}: {}", dry_run ? "would set " : "", unit,
                    format_bytes(from.memory_low), format_bytes(to.memory_low), format_bytes(from.memory_min),
                    format_bytes(to.memory_min), reason);
    if (!g_journal || !spdlog::default_logger()->should_log(spdlog::level::info)) {
        spdlog::info("{}", message);
        return;
    }
    sd_journal_send("MESSAGE=%s", message.c_str(), "PRIORITY=%d", LOG_INFO, "SYSLOG_IDENTIFIER=memprotd",
                    "UNIT=%s", unit.c_str(), "OBJECT_SYSTEMD_UNIT=%s", unit.c_str(), "MEMORY_LOW=%llu",
                    static_cast<unsigned long long>(to.memory_low), "MEMORY_MIN=%llu",
                    static_cast<unsigned long long>(to.memory_min), "MEMORY_LOW_PREVIOUS=%llu",
                    static_cast<unsigned long long>(from.memory_low), "MEMORY_MIN_PREVIOUS=%llu",
                    static_cast<unsigned long long>(from.memory_min), "REASON=%s", reason.c_str(),
                    "MEMPROTD_DRY_RUN=%d", dry_run ? 1 : 0, nullptr);
}

namespace {

std::string reason_for(const PlanEntry& e) {
    const Explanation& x = e.x;
    std::string r = fmt::format("decided by {}; demand {} (working set {}, cheap cache {}), weight {}",
                                bound_name(x.bound), format_bytes(x.demand), format_bytes(x.working_set),
                                format_bytes(x.cheap_cache), x.weight);
    if (x.next.memory_low != x.target_low)
        r += fmt::format(", target {}", format_bytes(x.target_low));
    if (x.bound == Bound::KeptAnon)
        r += fmt::format("; {} of the room demands left lent to its cold anon ({})",
                         format_bytes(lent_to_cold_anon(x)), format_bytes(x.cold_anon));
    if (x.escalated_min)
        r += fmt::format("; MemoryMin holds the working set {}: {}", format_bytes(x.escalated_min),
                         x.escalation_ahead ? "ahead of reclaim (EscalateAhead=yes)" : "MemoryLow did not hold");
    if (x.escalated_min && x.escalation_held)
        r += ", held above a lower working-set reading";
    if (x.escalation_partial)
        r += "; not held ahead: MemoryLow alone gives less than its working set";
    if (x.damping)
        r += "; " + damping_text(x.damping);
    return r;
}

}  // namespace

void PlanLog::changes(const Plan& plan, const std::vector<PlannedWrite>& applied, bool dry_run) {
    for (const std::string& note : plan.notes)
        if (std::find(last_notes_.begin(), last_notes_.end(), note) == last_notes_.end())
            spdlog::info("{}", note);
    last_notes_ = plan.notes;
    for (const PlanEntry& e : plan.slices) {
        if (dry_run) {
            if (!e.write()) {
                last_logged_.erase(e.unit);
                continue;
            }
            const auto it = last_logged_.find(e.unit);
            if (it != last_logged_.end() && it->second == e.x.next)
                continue;
            last_logged_.insert_or_assign(e.unit, e.x.next);
            change(e.unit, e.x.prior, e.x.next, reason_for(e), /*dry_run=*/true);
            continue;
        }
        const PlannedWrite* last = nullptr;
        for (const PlannedWrite& w : applied)
            if (w.unit == e.unit)
                last = &w;
        if (last)
            change(e.unit, e.x.prior, last->values, reason_for(e), /*dry_run=*/false);
    }
}

void PlanLog::inputs(const Plan& plan, uint64_t tick, int64_t since_last_us) {
    if (!spdlog::should_log(spdlog::level::debug))
        return;
    spdlog::debug("tick {}: {:.1f} s since the last; budget {} (factor {:.2f}), demand {}, protected {}", tick,
                  static_cast<double>(since_last_us) / 1e6, format_bytes(plan.budget), plan.budget_factor,
                  format_bytes(plan.demand_total), format_bytes(plan.protected_total));
    for (const PlanEntry& e : plan.slices) {
        const Explanation& x = e.x;
        spdlog::debug("tick {}: {}: current {} working set {} (base {}, thrash +{}) demand {} psi {:.3f} "
                      "target low {} min {}; low {} → {}{}{}",
                      tick, e.unit, format_bytes(x.current), format_bytes(x.working_set),
                      format_bytes(x.working_set_base), format_bytes(x.thrash_correction), format_bytes(x.demand),
                      x.psi_some, format_bytes(x.target_low), format_bytes(x.target_min),
                      format_bytes(x.prior.memory_low), format_bytes(x.next.memory_low),
                      x.damping ? "; " : "", damping_text(x.damping));
    }
}

void PlanLog::forget_gone(const std::set<std::string_view>& present) {
    std::erase_if(last_logged_, [&](const auto& entry) { return !present.contains(entry.first); });
}

}  // namespace memprotd::logging
