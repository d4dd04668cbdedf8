// SPDX-License-Identifier: LGPL-2.1-or-later
#include "logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/sinks/systemd_sink.h>
#include <spdlog/spdlog.h>
#include <syslog.h>
#include <systemd/sd-journal.h>

#include <cstdlib>
#include <memory>

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

}  // namespace memprotd::logging
