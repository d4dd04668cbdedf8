// SPDX-License-Identifier: LGPL-2.1-or-later
//
// parse_config() over arbitrary text. The input is split at the first NUL
// byte: before it the daemon file (memprotd.conf), after it one policy file.
// Without a NUL the whole input is the daemon file and there is no policy.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "config.h"
#include "fuzz_check.h"

namespace {

constexpr std::string_view kDaemonFile = "memprotd.conf";
constexpr std::string_view kPolicyFile = "policy.d/50-fuzz.conf";

int count_lines(std::string_view text) {
    int n = 0;
    for (char c : text)
        n += c == '\n';
    return n + 1;
}

// What to_string() prints must parse back to the same size.
void check_round_trip(const memprotd::SizeSpec& s) {
    if (!s.set())
        return;
    const auto again = memprotd::parse_size(s.to_string());
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(again->kind == s.kind);
    FUZZ_CHECK(again->bytes == s.bytes);
    FUZZ_CHECK(again->percent == s.percent);
}

void check_parse(const memprotd::ConfigInput& in, std::string_view daemon_text, std::string_view policy_text,
                 uint64_t mem_total) {
    using namespace memprotd;
    const ConfigParse p = parse_config(in, mem_total);
    FUZZ_CHECK(p.config.files.size() == in.daemon_files.size() + in.policy_files.size());
    for (const Error& e : p.errors) {
        FUZZ_CHECK(!e.message.empty());
        FUZZ_CHECK(!e.to_string().empty());
        FUZZ_CHECK(e.file == kDaemonFile || e.file == kPolicyFile);
        const int lines = count_lines(e.file == kDaemonFile ? daemon_text : policy_text);
        FUZZ_CHECK(e.line >= 0 && e.line <= lines);
    }
    const DaemonConfig& d = p.config.daemon;
    FUZZ_CHECK(d.headroom >= 0 && d.headroom <= 1);
    FUZZ_CHECK(d.interval_us > 0);
    check_round_trip(d.budget);
    if (p.ok())
        FUZZ_CHECK(d.pressure_threshold_us <= d.pressure_window_us);

    for (const PolicyRule& rule : p.config.policies) {
        FUZZ_CHECK(!rule.globs.empty());
        check_round_trip(rule.protection.min_protection);
        check_round_trip(rule.protection.max_protection);
        check_round_trip(rule.protection.floor);
        if (rule.protection.weight)
            FUZZ_CHECK(*rule.protection.weight >= 1 && *rule.protection.weight <= 10000);
        for (const std::string& g : rule.globs) {
            const EffectivePolicy eff = p.config.policy_for(g);
            // A plain name always matches its own rule; a glob may or may not
            // match its own text, but must not crash.
            if (g.find_first_of("*?[") == std::string::npos) {
                FUZZ_CHECK(eff.matched);
                FUZZ_CHECK(!eff.sources.empty());
            }
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace memprotd;
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const size_t nul = input.find('\0');
    const std::string_view daemon_text = input.substr(0, nul);
    const std::string_view policy_text = nul == std::string_view::npos ? std::string_view{} : input.substr(nul + 1);

    ConfigInput in;
    in.daemon_files.push_back({std::string(kDaemonFile), std::string(daemon_text)});
    if (nul != std::string_view::npos)
        in.policy_files.push_back({std::string(kPolicyFile), std::string(policy_text)});

    // MemTotal unknown, and known: the latter enables more bound checks.
    check_parse(in, daemon_text, policy_text, 0);
    check_parse(in, daemon_text, policy_text, uint64_t{16} << 30);

    // The value parsers on their own, over the raw daemon text.
    const auto size_spec = parse_size(daemon_text);
    if (size_spec.ok())
        check_round_trip(*size_spec);
    else
        FUZZ_CHECK(!size_spec.error().message.empty());
    const auto span = parse_timespan_us(daemon_text);
    FUZZ_CHECK(span.ok() || !span.error().message.empty());
    const auto pct = parse_percent(daemon_text);
    FUZZ_CHECK(!pct.ok() || (*pct >= 0 && *pct <= 1));
    return 0;
}
