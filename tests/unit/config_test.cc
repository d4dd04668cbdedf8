// SPDX-License-Identifier: LGPL-2.1-or-later
#include "config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace memprotd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint64_t kKiB = uint64_t{1} << 10;
constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kTiB = uint64_t{1} << 40;
constexpr uint64_t kSec = 1'000'000;

ConfigInput daemon_only(std::string text) {
    ConfigInput in;
    in.daemon_files.push_back({"memprotd.conf", std::move(text)});
    return in;
}

ConfigInput policies(std::vector<ConfigFile> files) {
    ConfigInput in;
    in.policy_files = std::move(files);
    return in;
}

std::string all_errors(const ConfigParse& p) {
    std::string out;
    for (const auto& e : p.errors)
        out += e.to_string() + "\n";
    return out;
}

// ---------------------------------------------------------------------------
// Sizes

TEST(ParseSize, ReadsPlainBytes) {
    auto s = parse_size("4096");
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->kind, SizeSpec::Kind::Bytes);
    EXPECT_EQ(s->bytes, 4096u);
}

TEST(ParseSize, ReadsBase1024Suffixes) {
    EXPECT_EQ(parse_size("1K")->bytes, kKiB);
    EXPECT_EQ(parse_size("512M")->bytes, 512 * kMiB);
    EXPECT_EQ(parse_size("2G")->bytes, 2 * kGiB);
    EXPECT_EQ(parse_size("3T")->bytes, 3 * kTiB);
}

TEST(ParseSize, ReadsFractionsWithASuffixRoundedDown) {
    EXPECT_EQ(parse_size("1.5G")->bytes, kGiB + kGiB / 2);
    EXPECT_EQ(parse_size("0.001K")->bytes, 1u);  // 1.024 bytes
}

TEST(ParseSize, RejectsFractionalBytes) {
    auto s = parse_size("1.5");
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.error().message, HasSubstr("whole number of bytes"));
}

TEST(ParseSize, AcceptsZero) {
    auto s = parse_size("0");
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->kind, SizeSpec::Kind::Bytes);
    EXPECT_EQ(s->bytes, 0u);
}

TEST(ParseSize, ReadsPercentagesWithDecimals) {
    auto s = parse_size("12.5%");
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->kind, SizeSpec::Kind::Percent);
    EXPECT_DOUBLE_EQ(s->percent, 12.5);
    EXPECT_DOUBLE_EQ(parse_size("0%")->percent, 0.0);
    EXPECT_DOUBLE_EQ(parse_size("100%")->percent, 100.0);
}

TEST(ParseSize, RejectsPercentagesAboveHundred) {
    auto s = parse_size("100.5%");
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.error().message, HasSubstr("0..100%"));
}

TEST(ParseSize, ReadsInfinity) {
    auto s = parse_size("infinity");
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->kind, SizeSpec::Kind::Infinity);
}

TEST(ParseSize, RejectsNegativeValues) {
    EXPECT_FALSE(parse_size("-5M").ok());
    EXPECT_FALSE(parse_size("-5%").ok());
    EXPECT_THAT(parse_size("-1").error().message, HasSubstr("negative"));
}

TEST(ParseSize, RejectsUnknownAndAmbiguousSuffixes) {
    for (const char* bad : {"5X", "5KB", "5KiB", "5B", "5k", "5 M", "5P"}) {
        auto s = parse_size(bad);
        EXPECT_FALSE(s.ok()) << bad;
    }
    EXPECT_THAT(parse_size("5KiB").error().message, HasSubstr("unknown suffix \"KiB\""));
}

TEST(ParseSize, RejectsGarbageAndEmpty) {
    for (const char* bad : {"", "M", "abc", "1e3", ".5G", "5.G", "%", "12%%", "inf", "Infinity"})
        EXPECT_FALSE(parse_size(bad).ok()) << bad;
}

TEST(ParseSize, RejectsOverflow) {
    EXPECT_TRUE(parse_size("18446744073709551615").ok());
    EXPECT_FALSE(parse_size("18446744073709551616").ok());
    EXPECT_TRUE(parse_size("16777215T").ok());
    auto s = parse_size("16777216T");  // exactly 2^64
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.error().message, HasSubstr("too large"));
    EXPECT_FALSE(parse_size("17179869184G").ok());  // 2^64
    EXPECT_TRUE(parse_size("16777215.5T").ok());
}

TEST(SizeSpec, ResolvesEachKind) {
    EXPECT_EQ(SizeSpec{}.resolve(8 * kGiB, 42), 42u);
    EXPECT_EQ(SizeSpec::of_bytes(512 * kMiB).resolve(8 * kGiB), 512 * kMiB);
    EXPECT_EQ(SizeSpec::of_percent(75).resolve(8 * kGiB), 6 * kGiB);
    EXPECT_EQ(SizeSpec::of_percent(12.5).resolve(8 * kGiB), kGiB);
    EXPECT_EQ(parse_size("infinity")->resolve(8 * kGiB), UINT64_MAX);
    EXPECT_EQ(SizeSpec::of_percent(100).resolve(UINT64_MAX), UINT64_MAX);
}

TEST(SizeSpec, PrintsWithTheLargestExactSuffix) {
    EXPECT_EQ(SizeSpec::of_bytes(512 * kMiB).to_string(), "512M");
    EXPECT_EQ(SizeSpec::of_bytes(kGiB).to_string(), "1G");
    EXPECT_EQ(SizeSpec::of_bytes(1536 * kMiB).to_string(), "1536M");
    EXPECT_EQ(SizeSpec::of_bytes(4097).to_string(), "4097");
    EXPECT_EQ(SizeSpec::of_bytes(0).to_string(), "0");
    EXPECT_EQ(SizeSpec::of_percent(75).to_string(), "75%");
    EXPECT_EQ(SizeSpec::of_percent(12.5).to_string(), "12.5%");
    EXPECT_EQ(parse_size("infinity")->to_string(), "infinity");
    EXPECT_EQ(SizeSpec{}.to_string(), "unset");
}

TEST(SizeSpec, RoundTripsThroughToString) {
    for (const char* text : {"512M", "3T", "4097", "75%", "0.5%", "infinity", "0"}) {
        auto s = parse_size(text);
        ASSERT_TRUE(s.ok()) << text;
        EXPECT_EQ(s->to_string(), text);
    }
}

// ---------------------------------------------------------------------------
// Time spans, percentages, booleans, modes

TEST(ParseTimespan, ReadsSystemdUnits) {
    EXPECT_EQ(*parse_timespan_us("5s"), 5 * kSec);
    EXPECT_EQ(*parse_timespan_us("1min"), 60 * kSec);
    EXPECT_EQ(*parse_timespan_us("500ms"), 500'000u);
    EXPECT_EQ(*parse_timespan_us("100us"), 100u);
    EXPECT_EQ(*parse_timespan_us("1h"), 3600 * kSec);
    EXPECT_EQ(*parse_timespan_us("2 hours"), 7200 * kSec);
    EXPECT_EQ(*parse_timespan_us("1w"), 7 * 86400 * kSec);
    EXPECT_EQ(*parse_timespan_us("3m"), 180 * kSec);
    EXPECT_EQ(*parse_timespan_us("1d"), 86400 * kSec);
    EXPECT_EQ(*parse_timespan_us("7msec"), 7000u);
}

TEST(ParseTimespan, SumsSeveralComponents) {
    EXPECT_EQ(*parse_timespan_us("2min 30s"), 150 * kSec);
    EXPECT_EQ(*parse_timespan_us("2min30s"), 150 * kSec);
    EXPECT_EQ(*parse_timespan_us("1h 1min 1s 1ms"), 3661 * kSec + 1000);
}

TEST(ParseTimespan, TakesABareNumberAsSeconds) {
    EXPECT_EQ(*parse_timespan_us("5"), 5 * kSec);
    EXPECT_EQ(*parse_timespan_us("0"), 0u);
}

TEST(ParseTimespan, ReadsFractions) {
    EXPECT_EQ(*parse_timespan_us("1.5s"), 1'500'000u);
    EXPECT_EQ(*parse_timespan_us("0.5min"), 30 * kSec);
}

TEST(ParseTimespan, RejectsNegativeUnknownUnitAndGarbage) {
    EXPECT_THAT(parse_timespan_us("-5s").error().message, HasSubstr("negative"));
    EXPECT_THAT(parse_timespan_us("5y").error().message, HasSubstr("unknown unit \"y\""));
    EXPECT_THAT(parse_timespan_us("5 sx").error().message, HasSubstr("unknown unit \"sx\""));
    for (const char* bad : {"", "s", "5s,", "5s-", "infinity", "1e3s", "5S"})
        EXPECT_FALSE(parse_timespan_us(bad).ok()) << bad;
}

TEST(ParseTimespan, RejectsOverflow) {
    EXPECT_FALSE(parse_timespan_us("99999999999999999999s").ok());
    EXPECT_FALSE(parse_timespan_us("40000000w").ok());
    auto sum = parse_timespan_us("18446744073709s 18446744073709s");  // each fits, the sum does not
    ASSERT_FALSE(sum.ok());
    EXPECT_THAT(sum.error().message, HasSubstr("64 bits"));
}

TEST(ParsePercent, ReturnsAFraction) {
    EXPECT_DOUBLE_EQ(*parse_percent("10%"), 0.10);
    EXPECT_DOUBLE_EQ(*parse_percent("0%"), 0.0);
    EXPECT_DOUBLE_EQ(*parse_percent("100%"), 1.0);
    for (const char* bad : {"0.1", "10", "101%", "-1%", "%", "ten%"})
        EXPECT_FALSE(parse_percent(bad).ok()) << bad;
}

TEST(ParseBoolean, AcceptsSystemdSpellingsInAnyCase) {
    for (const char* yes : {"yes", "YES", "true", "on", "1", "y", "t"})
        EXPECT_TRUE(*parse_boolean(yes)) << yes;
    for (const char* no : {"no", "False", "off", "0", "n", "f"})
        EXPECT_FALSE(*parse_boolean(no)) << no;
    EXPECT_FALSE(parse_boolean("maybe").ok());
    EXPECT_FALSE(parse_boolean("").ok());
}

TEST(Mode, NamesRoundTrip) {
    for (Mode m : {Mode::Enforce, Mode::DryRun, Mode::Paused})
        EXPECT_EQ(mode_from_name(mode_name(m)), m);
    EXPECT_EQ(mode_name(Mode::DryRun), "dry-run");
    EXPECT_FALSE(mode_from_name("Enforce").has_value());
}

// ---------------------------------------------------------------------------
// INI syntax and [Daemon]

TEST(ConfigDaemon, DefaultsWithoutAnyFile) {
    auto p = parse_config({});
    ASSERT_TRUE(p.ok()) << all_errors(p);
    EXPECT_EQ(p.config.daemon.mode, Mode::Enforce);
    EXPECT_EQ(p.config.daemon.interval_us, 5 * kSec);
    EXPECT_EQ(p.config.daemon.budget.kind, SizeSpec::Kind::Percent);
    EXPECT_DOUBLE_EQ(p.config.daemon.budget.percent, 70.0);
    EXPECT_TRUE(p.config.files.empty());
}

TEST(ConfigDaemon, ReadsEveryKey) {
    auto p = parse_config(daemon_only(
        "[Daemon]\n"
        "Mode=dry-run\n"
        "Interval=10s\n"
        "Budget=6G\n"
        "WorkingSetWindow=2min\n"
        "Headroom=25%\n"
        "RestoreOnExit=no\n"
        "ManageTopLevelSlices=false\n"
        "PressureThreshold=200ms\n"
        "PressureWindow=2s\n"
        "WorkingSetAging=no\n"
        "EscalateAhead=yes\n"
        "TrimCheapCache=reclaim\n"));
    ASSERT_TRUE(p.ok()) << all_errors(p);
    const DaemonConfig& d = p.config.daemon;
    EXPECT_EQ(d.mode, Mode::DryRun);
    EXPECT_EQ(d.interval_us, 10 * kSec);
    EXPECT_EQ(d.budget.kind, SizeSpec::Kind::Bytes);
    EXPECT_EQ(d.budget.bytes, 6 * kGiB);
    EXPECT_EQ(d.working_set_window_us, 120 * kSec);
    EXPECT_DOUBLE_EQ(d.headroom, 0.25);
    EXPECT_FALSE(d.restore_on_exit);
    EXPECT_FALSE(d.manage_top_level_slices);
    EXPECT_EQ(d.pressure_threshold_us, 200'000u);
    EXPECT_EQ(d.pressure_window_us, 2 * kSec);
    EXPECT_FALSE(d.working_set_aging);
    EXPECT_TRUE(d.escalate_ahead);
    EXPECT_FALSE(DaemonConfig{}.escalate_ahead);
    EXPECT_EQ(d.trim_cheap_cache, TrimSetting::Reclaim);
    EXPECT_EQ(DaemonConfig{}.trim_cheap_cache, TrimSetting::No);
    EXPECT_THAT(p.config.files, ElementsAre("memprotd.conf"));
}

TEST(ConfigDaemon, AcceptsTheExampleFromTheDesignDocWithTrailingComments) {
    auto p = parse_config(daemon_only(
        "[Daemon]\n"
        "Mode=paused            # enforce | dry-run\n"
        "Interval=7s\n"
        "Budget=70%\t# of MemTotal that may be protected in sum\n"
        "WorkingSetWindow=60s\n"
        "Headroom=10%\n"));
    ASSERT_TRUE(p.ok()) << all_errors(p);
    EXPECT_EQ(p.config.daemon.mode, Mode::Paused);
    EXPECT_DOUBLE_EQ(p.config.daemon.budget.percent, 70.0);
}

// check-config prints [Daemon] from the table that parses it: every key,
// in config syntax, and it reads back to the same values.
TEST(ConfigDaemon, FormatsEveryKeyAndReadsItBack) {
    auto p = parse_config(daemon_only("[Daemon]\nMode=dry-run\nInterval=1min 30s\nBudget=55%\n"
                                      "WorkingSetWindow=2min\nHeadroom=25%\nRestoreOnExit=no\n"
                                      "ManageTopLevelSlices=no\nPressureThreshold=200ms\nPressureWindow=2s\n"
                                      "WorkingSetAging=no\nEscalateAhead=yes\nTrimCheapCache=lru-gen\n"
                                      "Record=/var/log/memprotd/trace.jsonl\nRecordMaxSize=16M\n"));
    ASSERT_TRUE(p.ok()) << all_errors(p);
    const std::string text = format_daemon_config(p.config.daemon);
    EXPECT_EQ(text, "[Daemon]\nMode=dry-run\nInterval=1min 30s\nBudget=55%\nWorkingSetWindow=2min\n"
                    "Headroom=25%\nRestoreOnExit=no\nManageTopLevelSlices=no\nPressureThreshold=200ms\n"
                    "PressureWindow=2s\nWorkingSetAging=no\nEscalateAhead=yes\nTrimCheapCache=lru-gen\n"
                    "Record=/var/log/memprotd/trace.jsonl\nRecordMaxSize=16M\n");
    auto back = parse_config(daemon_only(text));
    ASSERT_TRUE(back.ok()) << all_errors(back);
    EXPECT_EQ(format_daemon_config(back.config.daemon), text);
    EXPECT_NE(format_daemon_config(DaemonConfig{}), text);
}

// A trace records the settings the engine plans by: those of the table the
// engine reads, in its order, and none that only the daemon's loop reads.
TEST(ConfigDaemon, EngineSettingsAreTheKeysTheEnginePlansBy) {
    auto p = parse_config(daemon_only("[Daemon]\nMode=dry-run\nInterval=1min 30s\nBudget=55%\n"
                                      "EscalateAhead=yes\nRecord=/var/log/memprotd/trace.jsonl\n"));
    ASSERT_TRUE(p.ok()) << all_errors(p);
    const std::vector<Setting> s = engine_settings(p.config.daemon);
    const std::vector<Setting> expected = {
        {"Interval", "1min 30s"}, {"Budget", "55%"},       {"WorkingSetWindow", "1min"},
        {"Headroom", "10%"},      {"ManageTopLevelSlices", "yes"}, {"WorkingSetAging", "yes"},
        {"EscalateAhead", "yes"}, {"TrimCheapCache", "no"},
    };
    EXPECT_EQ(s, expected);
}

// Record= is off by default; a trace needs an absolute path and a cap of at least 1M.
TEST(ConfigDaemon, RecordIsOffByDefaultAndChecksItsValues) {
    EXPECT_EQ(DaemonConfig{}.record, "");
    EXPECT_EQ(DaemonConfig{}.record_max_bytes, 64ULL << 20);
    auto p = parse_config(daemon_only("[Daemon]\nRecord=trace.jsonl\nRecordMaxSize=100K\n"));
    ASSERT_EQ(p.errors.size(), 2U) << all_errors(p);
    EXPECT_EQ(p.errors[0].key, "Record");
    EXPECT_EQ(p.errors[1].key, "RecordMaxSize");
    EXPECT_EQ(p.config.daemon.record, "");
}

TEST(ConfigDaemon, KeepsAHashThatIsNotPrecededByWhitespace) {
    auto p = parse_config(daemon_only("[Daemon]\nMode=enforce#dry-run\n"));
    ASSERT_EQ(p.errors.size(), 1u);
    EXPECT_THAT(p.errors[0].message, HasSubstr("\"enforce#dry-run\""));
}

TEST(ConfigDaemon, SkipsCommentsBlankLinesAndWhitespace) {
    auto p = parse_config(daemon_only(
        "# a comment\n"
        "; another\n"
        "\n"
        "   [Daemon]   \n"
        "   # indented comment\n"
        "  Interval  =   3s  \r\n"
        "\t\n"));
    ASSERT_TRUE(p.ok()) << all_errors(p);
    EXPECT_EQ(p.config.daemon.interval_us, 3 * kSec);
}

TEST(ConfigDaemon, JoinsBackslashContinuedLines) {
    auto p = parse_config(daemon_only(
        "[Daemon]\n"
        "Interval=1min \\\n"
        "  30s\n"
        "Mode=\\\n"
        "  bogus\n"));
    EXPECT_EQ(p.config.daemon.interval_us, 90 * kSec);
    ASSERT_EQ(p.errors.size(), 1u) << all_errors(p);
    EXPECT_EQ(p.errors[0].line, 4) << "a continued key reports the line it starts on";
}

TEST(ConfigDaemon, KeysAreCaseSensitiveAndTheErrorSuggestsTheRightCase) {
    auto p = parse_config(daemon_only("[Daemon]\ninterval=5s\n"));
    ASSERT_EQ(p.errors.size(), 1u);
    EXPECT_EQ(p.errors[0].key, "interval");
    EXPECT_THAT(p.errors[0].message, HasSubstr("did you mean Interval="));
}

TEST(ConfigDaemon, UnknownKeyNamesFileLineKeyAndTheKnownKeys) {
    auto p = parse_config(daemon_only("[Daemon]\nMode=enforce\nFrobnicate=1\n"));
    ASSERT_EQ(p.errors.size(), 1u);
    const Error& e = p.errors[0];
    EXPECT_EQ(e.file, "memprotd.conf");
    EXPECT_EQ(e.line, 3);
    EXPECT_EQ(e.key, "Frobnicate");
    EXPECT_THAT(e.message, HasSubstr("expected one of Mode, Interval"));
    EXPECT_THAT(e.to_string(), HasSubstr("memprotd.conf:3: Frobnicate: unknown key"));
}

TEST(ConfigDaemon, UnknownSectionIsReportedOnceAndItsKeysIgnored) {
    auto p = parse_config(daemon_only("[Deamon]\nMode=enforce\nInterval=1s\n[Daemon]\nInterval=2s\n"));
    ASSERT_EQ(p.errors.size(), 1u) << all_errors(p);
    EXPECT_EQ(p.errors[0].line, 1);
    EXPECT_THAT(p.errors[0].message, HasSubstr("unknown section [Deamon]; expected [Daemon]"));
    EXPECT_EQ(p.config.daemon.interval_us, 2 * kSec);
}

TEST(ConfigDaemon, IgnoresExtensionSections) {
    auto p = parse_config(daemon_only("[X-Vendor]\nAnything=goes\n[Daemon]\nInterval=2s\n"));
    EXPECT_TRUE(p.ok()) << all_errors(p);
}

TEST(ConfigDaemon, KeyOutsideASectionIsAnError) {
    auto p = parse_config(daemon_only("Mode=enforce\n[Daemon]\n"));
    ASSERT_EQ(p.errors.size(), 1u);
    EXPECT_EQ(p.errors[0].line, 1);
    EXPECT_EQ(p.errors[0].key, "Mode");
    EXPECT_THAT(p.errors[0].message, HasSubstr("outside of any section"));
}

TEST(ConfigDaemon, LineWithoutEqualsOrKeyIsMalformed) {
    auto p = parse_config(daemon_only("[Daemon]\nMode enforce\n=5s\n[Daemon\n"));
    ASSERT_EQ(p.errors.size(), 3u) << all_errors(p);
    EXPECT_EQ(p.errors[0].line, 2);
    EXPECT_THAT(p.errors[0].message, HasSubstr("expected \"Key=Value\""));
    EXPECT_EQ(p.errors[1].line, 3);
    EXPECT_EQ(p.errors[2].line, 4);
    EXPECT_THAT(p.errors[2].message, HasSubstr("section header"));
}

TEST(ConfigDaemon, ReportsEveryErrorWithItsLine) {
    auto p = parse_config(daemon_only(
        "[Daemon]\n"               // 1
        "Mode=fast\n"              // 2
        "Interval=2h\n"            // 3
        "\n"                       // 4
        "Budget=0%\n"              // 5
        "WorkingSetWindow=500ms\n" // 6
        "Headroom=150%\n"          // 7
        "RestoreOnExit=perhaps\n"  // 8
        "PressureWindow=20s\n"    // 9
        "WorkingSetAging=often\n"  // 10
        "TrimCheapCache=yes\n"    // 11
        "EscalateAhead=early\n"));  // 12
    ASSERT_EQ(p.errors.size(), 10u) << all_errors(p);
    std::vector<std::pair<int, std::string>> got;
    for (const auto& e : p.errors)
        got.emplace_back(e.line, e.key);
    EXPECT_THAT(got, ElementsAre(std::pair{2, "Mode"}, std::pair{3, "Interval"}, std::pair{5, "Budget"},
                                 std::pair{6, "WorkingSetWindow"}, std::pair{7, "Headroom"},
                                 std::pair{8, "RestoreOnExit"}, std::pair{9, "PressureWindow"},
                                 std::pair{10, "WorkingSetAging"}, std::pair{11, "TrimCheapCache"},
                                 std::pair{12, "EscalateAhead"}));
    EXPECT_THAT(p.errors[0].message, HasSubstr("expected enforce, dry-run or paused, got \"fast\""));
    EXPECT_THAT(p.errors[8].message, HasSubstr("expected auto, lru-gen, reclaim or no, got \"yes\""));
    EXPECT_THAT(p.errors[1].message, HasSubstr("at most 1h"));
}

TEST(ConfigDaemon, ValidatesRanges) {
    struct Case {
        const char* line;
        bool ok;
    };
    const Case cases[] = {
        {"Interval=0", false},          {"Interval=1us", true},           {"Interval=1h", true},
        {"Interval=3601s", false},      {"Budget=100%", true},            {"Budget=0.5%", false},
        {"Budget=1%", true},            {"Budget=0", false},              {"Budget=1", true},
        {"Budget=infinity", false},     {"WorkingSetWindow=1s", true},    {"WorkingSetWindow=999ms", false},
        {"Headroom=0%", true},          {"Headroom=100%", true},          {"Headroom=0.1", false},
        {"PressureWindow=500ms", true}, {"PressureWindow=499ms", false},  {"PressureWindow=10s", true},
        {"PressureWindow=10001ms", false}, {"PressureThreshold=0", false}, {"ManageTopLevelSlices=yes", true},
    };
    for (const auto& c : cases) {
        auto p = parse_config(daemon_only(std::string("[Daemon]\n") + c.line + "\n"));
        EXPECT_EQ(p.ok(), c.ok) << c.line << "\n" << all_errors(p);
    }
}

TEST(ConfigDaemon, LaterFilesOverrideKeyByKey) {
    ConfigInput in;
    in.daemon_files.push_back({"memprotd.conf", "[Daemon]\nMode=dry-run\nInterval=10s\n"});
    in.daemon_files.push_back({"memprotd.conf.d/10-a.conf", "[Daemon]\nInterval=20s\n"});
    in.daemon_files.push_back({"memprotd.conf.d/20-b.conf", "[Daemon]\nHeadroom=5%\n"});
    auto p = parse_config(in);
    ASSERT_TRUE(p.ok()) << all_errors(p);
    EXPECT_EQ(p.config.daemon.mode, Mode::DryRun);
    EXPECT_EQ(p.config.daemon.interval_us, 20 * kSec);
    EXPECT_DOUBLE_EQ(p.config.daemon.headroom, 0.05);
    EXPECT_THAT(p.config.files, ElementsAre("memprotd.conf", "memprotd.conf.d/10-a.conf", "memprotd.conf.d/20-b.conf"));
}

TEST(ConfigDaemon, EmptyValueResetsToTheDefault) {
    ConfigInput in;
    in.daemon_files.push_back({"memprotd.conf", "[Daemon]\nMode=dry-run\nInterval=10s\n"});
    in.daemon_files.push_back({"drop.conf", "[Daemon]\nInterval=\n"});
    auto p = parse_config(in);
    ASSERT_TRUE(p.ok()) << all_errors(p);
    EXPECT_EQ(p.config.daemon.interval_us, DaemonConfig{}.interval_us);
    EXPECT_EQ(p.config.daemon.mode, Mode::DryRun);
}

TEST(ConfigDaemon, BadValueKeepsTheEarlierSetting) {
    ConfigInput in;
    in.daemon_files.push_back({"memprotd.conf", "[Daemon]\nInterval=10s\n"});
    in.daemon_files.push_back({"drop.conf", "[Daemon]\nInterval=soon\n"});
    auto p = parse_config(in);
    ASSERT_EQ(p.errors.size(), 1u);
    EXPECT_EQ(p.errors[0].file, "drop.conf");
    EXPECT_EQ(p.config.daemon.interval_us, 10 * kSec);
}

TEST(ConfigDaemon, PressureThresholdMustNotExceedTheWindowAfterMerging) {
    ConfigInput in;
    in.daemon_files.push_back({"memprotd.conf", "[Daemon]\nPressureThreshold=2s\n"});
    auto bad = parse_config(in);
    ASSERT_EQ(bad.errors.size(), 1u) << all_errors(bad);
    EXPECT_EQ(bad.errors[0].key, "PressureThreshold");
    EXPECT_EQ(bad.errors[0].line, 2);
    EXPECT_THAT(bad.errors[0].message, HasSubstr("expected at most PressureWindow=1s, got 2s"));

    in.daemon_files.push_back({"drop.conf", "[Daemon]\nPressureWindow=5s\n"});
    auto fixed = parse_config(in);
    EXPECT_TRUE(fixed.ok()) << all_errors(fixed);
}

TEST(ConfigDaemon, PolicySectionsInTheDaemonFileAreUnknown) {
    auto p = parse_config(daemon_only("[Match]\nSlice=a.slice\n"));
    ASSERT_EQ(p.errors.size(), 1u);
    EXPECT_THAT(p.errors[0].message, HasSubstr("[Match]"));
}

TEST(ConfigInputErrors, AreCarriedIntoTheParseResult) {
    ConfigInput in;
    in.errors.push_back({"/etc/memprotd/policy.d/x.conf", 0, {}, "cannot read: Permission denied"});
    auto p = parse_config(in);
    ASSERT_EQ(p.errors.size(), 1u);
    EXPECT_EQ(p.errors[0].file, "/etc/memprotd/policy.d/x.conf");
}

// ---------------------------------------------------------------------------
// policy.d

TEST(ConfigPolicy, ReadsTheDesignDocExample) {
    auto p = parse_config(policies({{"50-workload.conf",
                                     "[Match]\n"
                                     "Slice=workload.slice     # unit name; globs allowed\n"
                                     "[Protection]\n"
                                     "Weight=400               # default 100\n"
                                     "MinProtection=512M\n"
                                     "MaxProtection=75%\n"
                                     "Floor=256M               # hard guarantee, becomes MemoryMin\n"}}));
    ASSERT_TRUE(p.ok()) << all_errors(p);
    ASSERT_EQ(p.config.policies.size(), 1u);
    const PolicyRule& r = p.config.policies[0];
    EXPECT_EQ(r.file, "50-workload.conf");
    EXPECT_THAT(r.globs, ElementsAre("workload.slice"));
    EXPECT_EQ(r.protection.weight, 400u);
    EXPECT_EQ(r.protection.min_protection.bytes, 512 * kMiB);
    EXPECT_DOUBLE_EQ(r.protection.max_protection.percent, 75.0);
    EXPECT_EQ(r.protection.floor.bytes, 256 * kMiB);
    EXPECT_FALSE(r.protection.manage.has_value());
}

TEST(ConfigPolicy, SliceAcceptsSeveralNamesAndRepeatedLinesAccumulate) {
    auto p = parse_config(policies({{"a.conf",
                                     "[Match]\n"
                                     "Slice=a.slice  b.slice\n"
                                     "Slice=user-*.slice\n"
                                     "[Protection]\nWeight=10\n"}}));
    ASSERT_TRUE(p.ok()) << all_errors(p);
    EXPECT_THAT(p.config.policies[0].globs, ElementsAre("a.slice", "b.slice", "user-*.slice"));
}

TEST(ConfigPolicy, EmptySliceAssignmentClearsTheList) {
    auto p = parse_config(policies({{"a.conf", "[Match]\nSlice=a.slice\nSlice=\nSlice=b.slice\n"}}));
    ASSERT_TRUE(p.ok()) << all_errors(p);
    EXPECT_THAT(p.config.policies[0].globs, ElementsAre("b.slice"));
}

TEST(ConfigPolicy, SliceNamesMustBeSlicesOrGlobsThatCanMatchOne) {
    struct Case {
        const char* glob;
        bool ok;
    };
    const Case cases[] = {
        {"workload.slice", true},  {"-.slice", true},          {"user-1000.slice", true},
        {"foo\\x2dbar.slice", true}, {"*.slice", true},         {"user-*", true},
        {"*", true},               {"user-[0-9].slice", true}, {"app?slice", true},
        {"*.slic?", true},         {"work*[e]", true},         {"nginx.service", false},
        {"workload", false},       {".slice", false},          {"*.service", false},
        {"user-[0-9]", false},     {"a/b.slice", false},       {"wörk.slice", false},
    };
    for (const auto& c : cases) {
        auto p = parse_config(policies({{"p.conf", std::string("[Match]\nSlice=") + c.glob + "\n"}}));
        EXPECT_EQ(p.ok(), c.ok) << c.glob << "\n" << all_errors(p);
    }
}

TEST(ConfigPolicy, BadSliceNameIsReportedButTheOthersAreKept) {
    auto p = parse_config(policies({{"p.conf", "[Match]\nSlice=a.slice nginx.service b.slice\n"}}));
    ASSERT_EQ(p.errors.size(), 1u);
    EXPECT_EQ(p.errors[0].line, 2);
    EXPECT_EQ(p.errors[0].key, "Slice");
    EXPECT_THAT(p.errors[0].message, HasSubstr("\"nginx.service\""));
    EXPECT_THAT(p.config.policies[0].globs, ElementsAre("a.slice", "b.slice"));
}

TEST(ConfigPolicy, FileWithoutSliceIsAnError) {
    auto p = parse_config(policies({{"p.conf", "[Protection]\nWeight=10\n"},
                                    {"q.conf", "# only a comment\n[Match]\n"}}));
    ASSERT_EQ(p.errors.size(), 2u) << all_errors(p);
    EXPECT_EQ(p.errors[0].file, "p.conf");
    EXPECT_EQ(p.errors[0].key, "Slice");
    EXPECT_THAT(p.errors[0].message, HasSubstr("[Match] Slice="));
    EXPECT_EQ(p.errors[1].file, "q.conf");
    EXPECT_EQ(p.errors[1].line, 2) << "points at the [Match] header";
    EXPECT_TRUE(p.config.policies.empty());
}

TEST(ConfigPolicy, EmptyPolicyTextMasksWithoutError) {
    auto p = parse_config(policies({{"p.conf", ""}}));
    EXPECT_TRUE(p.ok()) << all_errors(p);
    EXPECT_TRUE(p.config.policies.empty());
}

TEST(ConfigPolicy, WeightMustBeAnIntegerInRange) {
    auto p = parse_config(policies({{"w.conf",
                                     "[Match]\nSlice=a.slice\n[Protection]\n"
                                     "Weight=heavy\n"
                                     "Weight=0\n"
                                     "Weight=10001\n"
                                     "Weight=-5\n"
                                     "Weight=1.5\n"
                                     "Weight=10000\n"}}));
    ASSERT_EQ(p.errors.size(), 5u) << all_errors(p);
    EXPECT_EQ(p.errors[0].to_string(), "w.conf:4: Weight: expected an integer 1..10000, got \"heavy\"");
    for (int i = 0; i < 5; ++i)
        EXPECT_EQ(p.errors[static_cast<size_t>(i)].line, 4 + i);
    EXPECT_EQ(p.config.policies[0].protection.weight, 10000u);
}

// A cache's slice may count pages touched over a longer window; the aging
// cadence follows the shortest window in use.
TEST(ConfigPolicy, WorkingSetWindowPerPolicyMergesAndIsChecked) {
    auto p = parse_config(policies({{"10-cache.conf", "[Match]\nSlice=cache.slice\n[Protection]\n"
                                                      "WorkingSetWindow=10min\n"},
                                    {"20-bad.conf", "[Match]\nSlice=b.slice\n[Protection]\n"
                                                    "WorkingSetWindow=500ms\n"
                                                    "WorkingSetWindow=soon\n"
                                                    "WorkingSetWindow=30s\n"}}));
    ASSERT_EQ(p.errors.size(), 2u) << all_errors(p);
    EXPECT_EQ(p.errors[0].to_string(), "20-bad.conf:4: WorkingSetWindow: expected a time span of at least 1s, "
                                       "got \"500ms\"");
    EXPECT_EQ(p.errors[1].line, 5);
    EXPECT_EQ(p.config.policy_for("cache.slice").working_set_window_us, 600'000'000U);
    EXPECT_EQ(p.config.policy_for("b.slice").working_set_window_us, 30'000'000U);
    EXPECT_FALSE(p.config.policy_for("other.slice").working_set_window_us.has_value());
}

// SetSlicePolicy and Manager::set_slice_policy hold a runtime policy to one
// set of rules, the ones a file's [Protection] is held to.
TEST(ConfigPolicy, RuntimePolicyRulesAreTheFilesRules) {
    EXPECT_EQ(slice_name_problem("workload.slice"), std::nullopt);
    EXPECT_THAT(slice_name_problem("*.slice").value_or(""), HasSubstr("not a valid unit name"));
    EXPECT_THAT(slice_name_problem(".slice").value_or(""), HasSubstr("not a valid unit name"));
    EXPECT_THAT(slice_name_problem("a/b.slice").value_or(""), HasSubstr("not a valid unit name"));
    EXPECT_THAT(slice_name_problem("sshd.service").value_or(""), HasSubstr("not a slice unit"));
    SlicePolicy p;
    EXPECT_EQ(policy_problem(p, 0), std::nullopt);
    p.weight = 0;
    EXPECT_THAT(policy_problem(p, 0).value_or(""), HasSubstr("Weight: 0 is out of range 1..10000"));
    p.weight = 10000;
    p.min_protection = SizeSpec::of_bytes(2ull << 30);
    p.max_protection = SizeSpec::of_percent(10);
    EXPECT_EQ(policy_problem(p, 0), std::nullopt) << "bytes against percent: unknown without MemTotal";
    EXPECT_THAT(policy_problem(p, 8ull << 30).value_or(""), HasSubstr("MinProtection=2G is more than"));
    p = {};
    p.floor = SizeSpec::of_percent(150);
    EXPECT_THAT(policy_problem(p, 0).value_or(""), HasSubstr("Floor: 150% is more than 100%"));
    p = {};
    p.working_set_window_us = 999'999;
    EXPECT_THAT(policy_problem(p, 0).value_or(""), HasSubstr("WorkingSetWindow: expected a time span of at least 1s"));
}

TEST(ConfigPolicy, ReportsUnknownKeysPerSection) {
    auto p = parse_config(policies({{"p.conf",
                                     "[Match]\nSlice=a.slice\nUnit=a.service\n"
                                     "[Protection]\nMemoryLow=1G\nmanage=no\n"
                                     "[Slice]\nX=1\n"}}));
    ASSERT_EQ(p.errors.size(), 4u) << all_errors(p);
    EXPECT_EQ(p.errors[0].key, "Unit");
    EXPECT_THAT(p.errors[0].message, HasSubstr("[Match]; expected one of Slice"));
    EXPECT_EQ(p.errors[1].key, "MemoryLow");
    EXPECT_THAT(p.errors[2].message, HasSubstr("did you mean Manage="));
    EXPECT_EQ(p.errors[3].line, 7);
    EXPECT_THAT(p.errors[3].message, HasSubstr("unknown section [Slice]"));
}

TEST(ConfigPolicy, SizeErrorsSayWhatWasExpected) {
    auto p = parse_config(policies({{"p.conf",
                                     "[Match]\nSlice=a.slice\n[Protection]\n"
                                     "MinProtection=512MB\n"
                                     "MaxProtection=-1G\n"
                                     "Floor=lots\n"
                                     "Manage=sometimes\n"}}));
    ASSERT_EQ(p.errors.size(), 4u) << all_errors(p);
    EXPECT_EQ(p.errors[0].key, "MinProtection");
    EXPECT_THAT(p.errors[0].message, HasSubstr("expected a size with suffix K, M, G or T"));
    EXPECT_EQ(p.errors[1].key, "MaxProtection");
    EXPECT_EQ(p.errors[2].key, "Floor");
    EXPECT_EQ(p.errors[3].key, "Manage");
    EXPECT_THAT(p.errors[3].message, HasSubstr("expected a boolean"));
}

TEST(ConfigPolicy, MinAboveMaxInOneFileIsContradictory) {
    auto p = parse_config(policies({{"p.conf",
                                     "[Match]\nSlice=a.slice\n[Protection]\n"
                                     "MinProtection=2G\n"
                                     "MaxProtection=1G\n"}}));
    ASSERT_EQ(p.errors.size(), 1u) << all_errors(p);
    EXPECT_EQ(p.errors[0].line, 4);
    EXPECT_EQ(p.errors[0].key, "MinProtection");
    EXPECT_THAT(p.errors[0].message, HasSubstr("expected at most MaxProtection=1G, got 2G"));
}

TEST(ConfigPolicy, PercentAgainstBytesIsOnlyComparedWhenMemTotalIsKnown) {
    ConfigInput in = policies({{"p.conf", "[Match]\nSlice=a.slice\n[Protection]\nMinProtection=6G\nMaxProtection=50%\n"}});
    EXPECT_TRUE(parse_config(in).ok());
    EXPECT_TRUE(parse_config(in, 16 * kGiB).ok());
    auto small = parse_config(in, 8 * kGiB);
    ASSERT_EQ(small.errors.size(), 1u) << all_errors(small);
    EXPECT_EQ(small.errors[0].key, "MinProtection");
}

TEST(ConfigPolicy, PercentAgainstPercentIsAlwaysCompared) {
    auto p = parse_config(policies({{"p.conf", "[Match]\nSlice=a.slice\n[Protection]\nMinProtection=60%\nMaxProtection=50%\n"}}));
    EXPECT_EQ(p.errors.size(), 1u) << all_errors(p);
}

TEST(ConfigPolicy, InfinityIsAboveEverything) {
    auto min_inf = parse_config(
        policies({{"p.conf", "[Match]\nSlice=a.slice\n[Protection]\nMinProtection=infinity\nMaxProtection=50%\n"}}));
    EXPECT_EQ(min_inf.errors.size(), 1u) << all_errors(min_inf);
    auto max_inf = parse_config(
        policies({{"p.conf", "[Match]\nSlice=a.slice\n[Protection]\nMinProtection=1T\nMaxProtection=infinity\n"}}));
    EXPECT_TRUE(max_inf.ok()) << all_errors(max_inf);
}

TEST(ConfigPolicy, FloorAboveMaxIsContradictory) {
    auto p = parse_config(policies({{"p.conf", "[Match]\nSlice=a.slice\n[Protection]\nMaxProtection=1G\nFloor=2G\n"}}));
    ASSERT_EQ(p.errors.size(), 1u) << all_errors(p);
    EXPECT_EQ(p.errors[0].key, "Floor");
    EXPECT_EQ(p.errors[0].line, 5);
}

TEST(ConfigPolicy, ContradictionAcrossFilesIsReportedAtTheLaterKey) {
    auto p = parse_config(policies({
        {"50-a.conf", "[Match]\nSlice=a.slice\n[Protection]\nMaxProtection=1G\n"},
        {"60-b.conf", "[Match]\nSlice=*.slice\n[Protection]\n\nMinProtection=2G\n"},
    }));
    ASSERT_EQ(p.errors.size(), 1u) << all_errors(p);
    EXPECT_EQ(p.errors[0].file, "60-b.conf");
    EXPECT_EQ(p.errors[0].line, 5);
    EXPECT_EQ(p.errors[0].key, "MinProtection");
    EXPECT_THAT(p.errors[0].message, HasSubstr("for a.slice"));
    EXPECT_THAT(p.errors[0].message, HasSubstr("50-a.conf:4"));
}

TEST(ConfigPolicy, LaterFileCanResolveAnEarlierPairWithoutError) {
    // 50 says Min 2G, 60 lowers Min to 512M: the merged result is fine.
    auto p = parse_config(policies({
        {"40-max.conf", "[Match]\nSlice=a.slice\n[Protection]\nMaxProtection=1G\n"},
        {"50-min.conf", "[Match]\nSlice=a.slice\n[Protection]\nMinProtection=2G\n"},
        {"60-fix.conf", "[Match]\nSlice=a.slice\n[Protection]\nMinProtection=512M\n"},
    }));
    EXPECT_TRUE(p.ok()) << all_errors(p);
}

TEST(ConfigPolicy, SingleFloorAboveTheBudgetIsAnError) {
    ConfigInput in = policies({{"p.conf", "[Match]\nSlice=a.slice\n[Protection]\nFloor=90%\n"}});
    auto p = parse_config(in);
    ASSERT_EQ(p.errors.size(), 1u) << all_errors(p);
    EXPECT_EQ(p.errors[0].key, "Floor");
    EXPECT_EQ(p.errors[0].line, 4);
    EXPECT_THAT(p.errors[0].message, HasSubstr("expected at most Budget=70% (from the default), got 90%"));
}

TEST(ConfigPolicy, SumOfNamedFloorsAboveTheBudgetIsAnError) {
    ConfigInput in;
    in.daemon_files.push_back({"memprotd.conf", "[Daemon]\nBudget=4G\n"});
    in.policy_files = {
        {"40-a.conf", "[Match]\nSlice=a.slice\n[Protection]\nFloor=2G\n"},
        {"50-b.conf", "[Match]\nSlice=b.slice c.slice\n[Protection]\nFloor=1G\n"},
    };
    auto ok = parse_config(in);
    EXPECT_TRUE(ok.ok()) << all_errors(ok) << "2G + 1G + 1G fits in 4G exactly";

    in.policy_files.push_back({"60-d.conf", "[Match]\nSlice=d.slice\n[Protection]\nFloor=1M\n"});
    auto p = parse_config(in);
    ASSERT_EQ(p.errors.size(), 1u) << all_errors(p);
    EXPECT_EQ(p.errors[0].file, "60-d.conf");
    EXPECT_EQ(p.errors[0].key, "Floor");
    EXPECT_THAT(p.errors[0].message, HasSubstr("Budget=4G (from memprotd.conf:2)"));
    EXPECT_THAT(p.errors[0].message, HasSubstr("add up to 4097M"));
}

TEST(ConfigPolicy, FloorSumIgnoresGlobsUnmanagedSlicesAndOverriddenFloors) {
    ConfigInput in;
    in.daemon_files.push_back({"memprotd.conf", "[Daemon]\nBudget=40%\n"});
    in.policy_files = {
        {"10-all.conf", "[Match]\nSlice=*.slice\n[Protection]\nFloor=30%\n"},  // a glob: not summed
        {"40-a.conf", "[Match]\nSlice=a.slice\n[Protection]\nFloor=20%\n"},
        {"45-a.conf", "[Match]\nSlice=a.slice\n[Protection]\nFloor=10%\n"},  // overrides 20%
        {"50-b.conf", "[Match]\nSlice=b.slice\n[Protection]\nFloor=20%\n"},
        {"60-c.conf", "[Match]\nSlice=c.slice\n[Protection]\nFloor=30%\nManage=no\n"},
    };
    auto p = parse_config(in);
    EXPECT_TRUE(p.ok()) << all_errors(p);
}

TEST(ConfigPolicy, FloorSumMixesBytesAndPercentOnlyWithMemTotal) {
    ConfigInput in;
    in.policy_files = {
        {"40-a.conf", "[Match]\nSlice=a.slice\n[Protection]\nFloor=50%\n"},
        {"50-b.conf", "[Match]\nSlice=b.slice\n[Protection]\nFloor=4G\n"},
    };
    EXPECT_TRUE(parse_config(in).ok());
    EXPECT_TRUE(parse_config(in, 32 * kGiB).ok());   // 16G + 4G <= 25.6G
    EXPECT_FALSE(parse_config(in, 8 * kGiB).ok());   // 4G + 4G > 6.4G
}

TEST(ConfigPolicy, ReportsErrorsFromSeveralFilesTogether) {
    ConfigInput in;
    in.daemon_files.push_back({"memprotd.conf", "[Daemon]\nMode=sometimes\n"});
    in.policy_files = {
        {"a.conf", "[Match]\nSlice=a.slice\n[Protection]\nWeight=heavy\n"},
        {"b.conf", "[Protection]\nWeight=5\n"},
        {"c.conf", "[Match]\nSlice=c.slice\n[Protection]\nFloor=1Q\n"},
    };
    auto p = parse_config(in);
    ASSERT_EQ(p.errors.size(), 4u) << all_errors(p);
    EXPECT_EQ(p.errors[0].file, "memprotd.conf");
    EXPECT_EQ(p.errors[1].file, "a.conf");
    EXPECT_EQ(p.errors[2].file, "b.conf");
    EXPECT_EQ(p.errors[3].file, "c.conf");
    EXPECT_THAT(p.config.files, ElementsAre("memprotd.conf", "a.conf", "b.conf", "c.conf"));
}

// ---------------------------------------------------------------------------
// policy_for

Config three_rules() {
    auto p = parse_config(policies({
        {"10-all.conf", "[Match]\nSlice=*.slice\n[Protection]\nWeight=50\nMaxProtection=50%\n"},
        {"50-workload.conf",
         "[Match]\nSlice=workload.slice\n[Protection]\nWeight=400\nMinProtection=512M\nFloor=256M\n"},
        {"90-override.conf", "[Match]\nSlice=workload.slice batch-*.slice\n[Protection]\nMaxProtection=75%\n"},
    }));
    EXPECT_TRUE(p.ok()) << all_errors(p);
    return p.config;
}

TEST(PolicyFor, UnmatchedUnitGetsDefaults) {
    Config c = three_rules();
    EffectivePolicy e = c.policy_for("init.scope");
    EXPECT_FALSE(e.matched);
    EXPECT_TRUE(e.manage);
    EXPECT_EQ(e.weight, 100u);
    EXPECT_FALSE(e.min_protection.set());
    EXPECT_TRUE(e.sources.empty());
}

TEST(PolicyFor, MergesMatchingRulesInOrderLaterFieldsWin) {
    Config c = three_rules();
    EffectivePolicy e = c.policy_for("workload.slice");
    EXPECT_TRUE(e.matched);
    EXPECT_EQ(e.weight, 400u);
    EXPECT_EQ(e.min_protection.bytes, 512 * kMiB);
    EXPECT_DOUBLE_EQ(e.max_protection.percent, 75.0);
    EXPECT_EQ(e.floor.bytes, 256 * kMiB);
    EXPECT_THAT(e.sources, ElementsAre("10-all.conf", "50-workload.conf", "90-override.conf"));
}

TEST(PolicyFor, UnsetFieldsFallThroughToEarlierRules) {
    Config c = three_rules();
    EffectivePolicy e = c.policy_for("batch-nightly.slice");
    EXPECT_EQ(e.weight, 50u);
    EXPECT_DOUBLE_EQ(e.max_protection.percent, 75.0);
    EXPECT_THAT(e.sources, ElementsAre("10-all.conf", "90-override.conf"));
    EffectivePolicy other = c.policy_for("system.slice");
    EXPECT_DOUBLE_EQ(other.max_protection.percent, 50.0);
}

TEST(PolicyFor, GlobsMatchWholeNames) {
    auto p = parse_config(policies({
        {"a.conf", "[Match]\nSlice=user-[0-9]*.slice app-?.slice\n[Protection]\nWeight=7\n"},
    }));
    ASSERT_TRUE(p.ok()) << all_errors(p);
    EXPECT_EQ(p.config.policy_for("user-1000.slice").weight, 7u);
    EXPECT_EQ(p.config.policy_for("app-x.slice").weight, 7u);
    EXPECT_FALSE(p.config.policy_for("user-.slice").matched);
    EXPECT_FALSE(p.config.policy_for("app-xy.slice").matched);
    EXPECT_FALSE(p.config.policy_for("user-1000.slice.d").matched);
    EXPECT_FALSE(p.config.policy_for("xuser-1.slice").matched);
}

// Only an exact name overrides the kubelet rule (managed.h), not a glob.
TEST(PolicyFor, NamedOnlyWhenARuleListsTheExactName) {
    Config c = three_rules();
    EXPECT_TRUE(c.policy_for("workload.slice").named);
    EXPECT_TRUE(c.policy_for("system.slice").matched);
    EXPECT_FALSE(c.policy_for("system.slice").named);
    EXPECT_FALSE(c.policy_for("batch-nightly.slice").named);
    EXPECT_FALSE(c.policy_for("init.scope").named);
}

TEST(PolicyFor, BackslashEscapesInUnitNamesMatchLiterally) {
    auto p = parse_config(policies({{"a.conf", "[Match]\nSlice=foo\\x2dbar.slice\n[Protection]\nWeight=9\n"}}));
    ASSERT_TRUE(p.ok()) << all_errors(p);
    EXPECT_TRUE(p.config.policy_for("foo\\x2dbar.slice").matched);
    EXPECT_FALSE(p.config.policy_for("foox2dbar.slice").matched);
}

TEST(PolicyFor, ManageNoCanBeOverriddenBack) {
    auto p = parse_config(policies({
        {"a.conf", "[Match]\nSlice=*.slice\n[Protection]\nManage=no\n"},
        {"b.conf", "[Match]\nSlice=keep.slice\n[Protection]\nManage=yes\n"},
    }));
    ASSERT_TRUE(p.ok()) << all_errors(p);
    EXPECT_FALSE(p.config.policy_for("other.slice").manage);
    EXPECT_TRUE(p.config.policy_for("keep.slice").manage);
}

TEST(PolicyFor, EmptyAssignmentUnsetsAFieldSoEarlierFilesShowThrough) {
    auto p = parse_config(policies({
        {"a.conf", "[Match]\nSlice=*.slice\n[Protection]\nWeight=20\n"},
        {"b.conf", "[Match]\nSlice=x.slice\n[Protection]\nWeight=30\nWeight=\n"},
    }));
    ASSERT_TRUE(p.ok()) << all_errors(p);
    EXPECT_EQ(p.config.policy_for("x.slice").weight, 20u);
}

}  // namespace
}  // namespace memprotd
