// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The trace format (lib/json/trace.h) and its files (lib/sys/trace_file.h).
#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "engine.h"
#include "engine_fixture.h"
#include "plan_json.h"
#include "trace.h"
#include "trace_file.h"

namespace memprotd {
namespace {

using namespace memprotd::testing;

Snapshot example_snapshot(int64_t t_us) {
    std::vector<SliceSpec> slices = {
        {.unit = "work.slice", .anon = 3 * GiB, .inactive_file = 512 * MiB, .refault_file = 40, .pgsteal = 900,
         .psi_some_us = 1234, .low_events = 3, .low = 1 * GiB, .min = 64 * MiB},
        {.unit = "work-db.slice", .parent = "work.slice", .anon = 2 * GiB, .swap_current = 5 * MiB},
        {.unit = "batch.slice", .anon = 100 * MiB, .inactive_file = 4 * GiB, .file_dirty = 7 * MiB},
    };
    Snapshot snap = make_snapshot(slices, 16 * GiB, t_us, 2 * GiB);
    snap.host_pressure = Psi{PsiLine{1, 2, 3, 777}, PsiLine{0, 0, 0, 55}};
    snap.meminfo.mem_free = 300 * MiB + static_cast<uint64_t>(t_us % 7);
    snap.cgroups[1].pressure.reset();
    LruGen lg;
    lg.memcgs.push_back({7, "/work.slice/work-db.slice/db.service", {{0, {{10, 90000, 100, 200}, {11, 1000, 300, 400}}}}});
    lg.memcgs.push_back({8, "/unrecorded.slice", {{0, {{1, 2, 3, 4}}}}});
    snap.lru_gen = lg;
    return snap;
}

KernelFeatures example_features() {
    KernelFeatures f;
    f.cgroup2 = f.memory_controller = f.psi = f.mglru_present = f.mglru_enabled = true;
    f.mglru_flags = 7;
    f.kernel_release = "6.1.0-test";
    f.page_size = 4096;
    return f;
}

std::string sample_line(const Snapshot& snap, uint64_t override_total = 0) {
    std::string out;
    append_trace_sample(out, snap, example_features(), override_total);
    EXPECT_TRUE(!out.empty() && out.back() == '\n');
    EXPECT_EQ(out.find('\n'), out.size() - 1) << "one line per sample";
    out.pop_back();
    return out;
}

TEST(Trace, SampleRoundTripKeepsEveryFieldTheEngineReads) {
    const Snapshot snap = example_snapshot(5'000'000);
    Result<TraceSample> back = parse_trace_sample(sample_line(snap, 8 * GiB), 2);
    ASSERT_TRUE(back) << back.error().to_string();
    const Snapshot& s = back->snapshot;
    EXPECT_EQ(back->memory_total_override, 8 * GiB);
    EXPECT_EQ(back->features.kernel_release, "6.1.0-test");
    EXPECT_EQ(back->features.mglru_flags, 7U);
    EXPECT_TRUE(back->features.mglru_enabled);
    EXPECT_EQ(s.timestamp_us, 5'000'000);
    EXPECT_EQ(s.meminfo.mem_total, 16 * GiB);
    EXPECT_EQ(s.meminfo.swap_free, 2 * GiB);
    EXPECT_EQ(s.meminfo.mem_free, snap.meminfo.mem_free);
    ASSERT_TRUE(s.host_pressure);
    EXPECT_EQ(s.host_pressure->some.total_us, 777U);
    ASSERT_EQ(s.cgroups.size(), snap.cgroups.size());
    for (size_t i = 0; i < s.cgroups.size(); ++i) {
        const CgroupSample &a = snap.cgroups[i], &b = s.cgroups[i];
        EXPECT_EQ(b.unit, a.unit);
        EXPECT_EQ(b.path, a.path);
        EXPECT_EQ(b.parent, a.parent);
        EXPECT_EQ(b.depth, a.depth);
        EXPECT_EQ(b.current, a.current);
        EXPECT_EQ(b.low, a.low);
        EXPECT_EQ(b.min, a.min);
        EXPECT_EQ(b.swap_current, a.swap_current);
        EXPECT_EQ(b.events.low, a.events.low);
        for (size_t k = 0; k < static_cast<size_t>(StatKey::Count); ++k)
            EXPECT_EQ(b.stat.known(static_cast<StatKey>(k)), a.stat.known(static_cast<StatKey>(k)))
                << a.unit << " " << stat_key_name(static_cast<StatKey>(k));
        EXPECT_EQ(b.pressure.has_value(), a.pressure.has_value());
        if (a.pressure && b.pressure) {
            EXPECT_EQ(b.pressure->some.total_us, a.pressure->some.total_us);
        }
    }
    ASSERT_TRUE(s.lru_gen);
    ASSERT_EQ(s.lru_gen->memcgs.size(), 1U) << "only memcgs at or below a recorded cgroup";
    EXPECT_EQ(s.lru_gen->memcgs[0].path, "/work.slice/work-db.slice/db.service");
    ASSERT_EQ(s.lru_gen->memcgs[0].nodes.at(0).generations.size(), 2U);
    EXPECT_EQ(s.lru_gen->memcgs[0].nodes[0].generations[1].file_pages, 400U);
}

TEST(Trace, TheEnginePlansTheSameFromTheReplayedSamples) {
    Engine direct{Config{}}, replayed{Config{}};
    CurrentProtections cur_a, cur_b;
    for (int i = 0; i < 4; ++i) {
        const Snapshot snap = example_snapshot(int64_t{i} * 5'000'000);
        Result<TraceSample> back = parse_trace_sample(sample_line(snap), i + 2);
        ASSERT_TRUE(back) << back.error().to_string();
        const Plan a = direct.tick(snap, example_features(), cur_a);
        const Plan b = replayed.tick(back->snapshot, back->features, cur_b);
        apply_writes(a, cur_a);
        apply_writes(b, cur_b);
        EXPECT_EQ(plan_to_json(b).dump(), plan_to_json(a).dump()) << "sample " << i;
    }
}

// A trace from before MemFree was recorded reads as unknown, not 0 (no
// trims in its replay).
TEST(Trace, MemFreeIsUnknownWhenNotRecorded) {
    Snapshot snap = example_snapshot(0);
    snap.meminfo.mem_free.reset();
    const std::string line = sample_line(snap);
    EXPECT_EQ(line.find("mem_free"), std::string::npos);
    Result<TraceSample> back = parse_trace_sample(line, 2);
    ASSERT_TRUE(back) << back.error().to_string();
    EXPECT_FALSE(back->snapshot.meminfo.mem_free.has_value());
}

TEST(Trace, TrimsMadeRoundTripAndAreLeftOutWhenNone) {
    fmt::memory_buffer line;
    append_trace_sample(line, example_snapshot(0), example_features(), 0);
    const std::string without(line.data(), line.size());
    append_trace_trims(line, {});
    EXPECT_EQ(std::string(line.data(), line.size()), without) << "no trims: the line as it was";
    EXPECT_EQ(without.find("trims_made"), std::string::npos);
    Result<TraceSample> none = parse_trace_sample(std::string_view(without).substr(0, without.size() - 1), 2);
    ASSERT_TRUE(none) << none.error().to_string();
    EXPECT_TRUE(none->trims_made.empty());

    append_trace_trims(line, {{"batch.slice", "/batch.slice", 8 * MiB}, {"we\"ird.slice", "", 4096}});
    std::string with(line.data(), line.size());
    ASSERT_EQ(with.find('\n'), with.size() - 1) << "still one line";
    with.pop_back();
    Result<TraceSample> back = parse_trace_sample(with, 2);
    ASSERT_TRUE(back) << back.error().to_string();
    ASSERT_EQ(back->trims_made.size(), 2U);
    EXPECT_EQ(back->trims_made[0].unit, "batch.slice");
    EXPECT_EQ(back->trims_made[0].bytes, 8 * MiB);
    EXPECT_EQ(back->trims_made[1].unit, "we\"ird.slice");
    EXPECT_EQ(back->trims_made[1].bytes, 4096U);
    EXPECT_EQ(back->snapshot.cgroups.size(), 3U) << "the sample itself unchanged";

    const auto error_key = [&](const std::string& from, const std::string& to) {
        std::string bad = with;
        bad.replace(bad.find(from), from.size(), to);
        Result<TraceSample> r = parse_trace_sample(bad, 5);
        EXPECT_FALSE(r) << bad;
        return r ? std::string("(parsed)") : r.error().key;
    };
    EXPECT_EQ(error_key("\"bytes\":8388608", "\"bytes\":-1"), "bytes");
    EXPECT_EQ(error_key("\"bytes\":8388608", "\"kbytes\":1"), "bytes");
    EXPECT_EQ(error_key("{\"unit\":\"batch.slice\",\"bytes\":8388608}", "3"), "trims_made");
    EXPECT_EQ(error_key("\"trims_made\":[", "\"trims_made\":3,\"x\":["), "trims_made");
}

TEST(Trace, KeepsOutMemoryStatKeysTheEngineDoesNotRead) {
    const std::string line = sample_line(example_snapshot(0));
    EXPECT_EQ(line.find("active_anon\""), line.find("inactive_anon\"") + 2) << "active_anon only inside inactive_anon";
    EXPECT_EQ(line.find("\"active_file\""), std::string::npos);
}

TEST(Trace, CurrentProtectionsReplaceTheTreesValues) {
    const Snapshot snap = example_snapshot(0);
    CurrentProtections current{{"batch.slice", {300 * MiB, 10 * MiB}}};
    std::string out;
    append_trace_sample(out, snap, example_features(), 0, &current, /*time_origin_us=*/0);
    out.pop_back();
    Result<TraceSample> back = parse_trace_sample(out, 2);
    ASSERT_TRUE(back);
    EXPECT_EQ(back->snapshot.cgroups[2].low, 300 * MiB);
    EXPECT_EQ(back->snapshot.cgroups[2].min, 10 * MiB);
    EXPECT_EQ(back->snapshot.cgroups[0].low, 1 * GiB);
}

TEST(Trace, TimesAreWrittenFromTheOrigin) {
    std::string out;
    append_trace_sample(out, example_snapshot(7'000'000), example_features(), 0, nullptr, 2'000'000);
    out.pop_back();
    EXPECT_EQ(parse_trace_sample(out, 2)->snapshot.timestamp_us, 5'000'000);
}

TEST(Trace, StrangeUnitNamesStayValidJson) {
    Snapshot snap = example_snapshot(0);
    snap.cgroups[2].unit = "we\"ird\\x\t.slice";
    Result<TraceSample> back = parse_trace_sample(sample_line(snap), 2);
    ASSERT_TRUE(back) << back.error().to_string();
    EXPECT_EQ(back->snapshot.cgroups[2].unit, snap.cgroups[2].unit);
}

TEST(Trace, HeaderRoundTripsAndANewerVersionIsRefused) {
    const TraceHeader h{kTraceVersion, "0.1.0", "6.12.1", "memprotd", 5'000'000};
    Result<TraceHeader> back = parse_trace_header(trace_header_line(h), 1);
    ASSERT_TRUE(back) << back.error().to_string();
    EXPECT_EQ(back->memprotd_version, "0.1.0");
    EXPECT_EQ(back->kernel_release, "6.12.1");
    EXPECT_EQ(back->interval_us, 5'000'000U);

    TraceHeader newer = h;
    newer.version = kTraceVersion + 1;
    Result<TraceHeader> refused = parse_trace_header(trace_header_line(newer), 1);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().line, 1);
    EXPECT_NE(refused.error().message.find("newer"), std::string::npos) << refused.error().message;
}

// The daemon's engine settings round-trip; a header without them (memprotctl
// record, an older daemon) reads as not recorded; a malformed one is refused.
TEST(Trace, HeaderKeepsTheEngineSettingsTheDaemonRanWith) {
    TraceHeader h{kTraceVersion, "0.1.0", "6.12.1", "memprotd", 5'000'000};
    DaemonConfig daemon;
    daemon.escalate_ahead = true;
    h.engine_config = engine_settings(daemon);
    Result<TraceHeader> back = parse_trace_header(trace_header_line(h), 1);
    ASSERT_TRUE(back) << back.error().to_string();
    ASSERT_EQ(back->engine_config.size(), h.engine_config.size());
    for (const Setting& s : h.engine_config)
        EXPECT_NE(std::find(back->engine_config.begin(), back->engine_config.end(), s), back->engine_config.end())
            << s.key;
    EXPECT_NE(std::find(back->engine_config.begin(), back->engine_config.end(), Setting{"EscalateAhead", "yes"}),
              back->engine_config.end());

    Result<TraceHeader> none = parse_trace_header(trace_header_line({kTraceVersion, "0.1.0", "", "memprotd", 1}), 1);
    ASSERT_TRUE(none);
    EXPECT_TRUE(none->engine_config.empty());

    for (const char* bad : {R"("engine_config":[1])", R"("engine_config":{"Budget":70})"}) {
        const std::string line = fmt::format(
            R"({{"memprotd_trace":1,"memprotd_version":"x","kernel_release":"","source":"memprotd",)"
            R"("interval_us":1,{}}})",
            bad);
        Result<TraceHeader> refused = parse_trace_header(line, 1);
        ASSERT_FALSE(refused) << bad;
        EXPECT_EQ(refused.error().key, "engine_config") << bad;
    }
}

TEST(Trace, ErrorsNameTheLineAndWhatIsWrong) {
    const std::string good = sample_line(example_snapshot(0));
    Result<TraceSample> bad_json = parse_trace_sample(good.substr(0, 40), 7);
    ASSERT_FALSE(bad_json);
    EXPECT_EQ(bad_json.error().line, 7);
    EXPECT_NE(bad_json.error().message.find("not JSON (at byte"), std::string::npos) << bad_json.error().message;

    // nlohmann-json throws out_of_range, not parse_error, for this: still an error value.
    std::string overflow = good;
    overflow.replace(overflow.find("\"swap\":0"), 8, "\"swap\":3e99999");
    Result<TraceSample> o = parse_trace_sample(overflow, 8);
    ASSERT_FALSE(o);
    EXPECT_EQ(o.error().line, 8);

    std::string missing = good;
    missing.replace(missing.find("\"current\":"), 10, "\"kurrent\":");
    Result<TraceSample> m = parse_trace_sample(missing, 9);
    ASSERT_FALSE(m);
    EXPECT_EQ(m.error().line, 9);
    EXPECT_EQ(m.error().key, "current");
    EXPECT_EQ(m.error().message, "missing");

    std::string negative = good;
    negative.replace(negative.find("\"swap\":0"), 8, "\"swap\":-1");
    Result<TraceSample> n = parse_trace_sample(negative, 3);
    ASSERT_FALSE(n);
    EXPECT_EQ(n.error().key, "swap");

    std::string parent = good;
    parent.replace(parent.find("\"parent\":0"), 10, "\"parent\":5");
    Result<TraceSample> p = parse_trace_sample(parent, 3);
    ASSERT_FALSE(p);
    EXPECT_EQ(p.error().key, "parent");

    const TraceHeader h{kTraceVersion, "0.1.0", "", "memprotd", 5'000'000};
    Result<TraceSample> header = parse_trace_sample(trace_header_line(h), 4);
    ASSERT_FALSE(header);
    EXPECT_EQ(header.error().line, 4);
    EXPECT_FALSE(parse_trace_header(good, 1)) << "a sample is not a header";
}

// A trace file's text: the header, then a sample per time (seconds).
std::string trace_text(std::initializer_list<int64_t> times_s, uint64_t interval_us = 5'000'000) {
    std::string out = trace_header_line({kTraceVersion, "0.1.0", "6.1.0", "memprotd", interval_us}) + "\n";
    for (const int64_t t : times_s)
        out += sample_line(example_snapshot(t * 1'000'000)) + "\n";
    return out;
}

TEST(TraceReader, ScansSamplesInOrderAndReadsThemBack) {
    Result<TraceReader> r = TraceReader::parse(trace_text({0, 5, 10}), "t.jsonl");
    ASSERT_TRUE(r) << r.error().to_string();
    EXPECT_EQ(r->header().interval_us, 5'000'000U);
    EXPECT_EQ(r->lines(), 4U);
    std::vector<int64_t> seen;
    ASSERT_TRUE(r->scan([&](const TraceSample& s) { seen.push_back(s.snapshot.timestamp_us); }));
    EXPECT_EQ(seen, (std::vector<int64_t>{0, 5'000'000, 10'000'000}));
    ASSERT_EQ(r->samples(), 3U);
    EXPECT_EQ(r->first_us(), 0);
    EXPECT_EQ(r->last_us(), 10'000'000);
    EXPECT_EQ(r->sample_line(2), 4);
    Result<TraceSample> second = r->sample(1);
    ASSERT_TRUE(second);
    EXPECT_EQ(second->snapshot.timestamp_us, 5'000'000);
    Result<TraceSample> last = r->last_sample();
    ASSERT_TRUE(last);
    EXPECT_EQ(last->snapshot.timestamp_us, 10'000'000);
}

TEST(TraceReader, RotatedPartsPutTogetherReadAsOneTrace) {
    const std::string old_part = trace_text({0, 5});
    const std::string new_part = trace_text({10});
    Result<TraceReader> r = TraceReader::parse(old_part + new_part, "t.jsonl");
    ASSERT_TRUE(r) << r.error().to_string();
    ASSERT_TRUE(r->scan());
    EXPECT_EQ(r->samples(), 3U);

    Result<TraceReader> other = TraceReader::parse(old_part + trace_text({10}, 1'000'000), "t.jsonl");
    ASSERT_TRUE(other);
    const Status s = other->scan();
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().line, 4);
    EXPECT_NE(s.error().message.find("another format version or interval"), std::string::npos);
}

// A replay's settings against those its trace's headers record: each key
// that differs said once, at the first header where it does.
TEST(TraceReader, SaysWhereAReplaysEngineSettingsDifferFromTheDaemons) {
    DaemonConfig ran;
    TraceHeader first{kTraceVersion, "0.1.0", "6.12.1", "memprotd", 5'000'000, engine_settings(ran)};
    ran.escalate_ahead = true;
    TraceHeader later = first;
    later.engine_config = engine_settings(ran);
    later.engine_config.push_back({"FutureKey", "1"});
    std::string text = trace_header_line(first) + "\n" + sample_line(example_snapshot(0)) + "\n" +
                       trace_header_line(later) + "\n" + sample_line(example_snapshot(5'000'000)) + "\n";
    Result<TraceReader> r = TraceReader::parse(text, "t.jsonl");
    ASSERT_TRUE(r) << r.error().to_string();
    ASSERT_TRUE(r->scan());
    ASSERT_EQ(r->headers().size(), 2U);
    EXPECT_EQ(r->headers()[1].line, 3);

    DaemonConfig replay;
    EXPECT_EQ(engine_config_differences(*r, engine_settings(replay)).size(), 2U) << "EscalateAhead and FutureKey";
    replay.escalate_ahead = true;
    EXPECT_EQ(engine_config_differences(*r, engine_settings(replay)).front().line, 1) << "EscalateAhead at line 1";
    replay.escalate_ahead = false;
    replay.budget = SizeSpec::of_percent(50);
    const std::vector<Error> d = engine_config_differences(*r, engine_settings(replay));
    ASSERT_EQ(d.size(), 3U);
    EXPECT_EQ(d[0].line, 1);
    EXPECT_EQ(d[0].file, "t.jsonl");
    EXPECT_EQ(d[0].key, "engine_config");
    EXPECT_NE(d[0].message.find("Budget=70%, this replay with Budget=50%"), std::string::npos) << d[0].message;
    EXPECT_EQ(d[1].line, 3);
    EXPECT_NE(d[1].message.find("EscalateAhead=yes, this replay with EscalateAhead=no"), std::string::npos)
        << d[1].message;
    EXPECT_NE(d[2].message.find("FutureKey=1, a setting this memprotctl does not know"), std::string::npos)
        << d[2].message;

    // A header after the last sample stated settings no sample ran under.
    Result<TraceReader> tail = TraceReader::parse(
        trace_header_line(first) + "\n" + sample_line(example_snapshot(0)) + "\n" + trace_header_line(later) + "\n",
        "t.jsonl");
    ASSERT_TRUE(tail && tail->scan());
    EXPECT_TRUE(engine_config_differences(*tail, engine_settings(DaemonConfig{})).empty());

    Result<TraceReader> unrecorded = TraceReader::parse(trace_text({0}), "u.jsonl");
    ASSERT_TRUE(unrecorded && unrecorded->scan());
    EXPECT_TRUE(engine_config_differences(*unrecorded, engine_settings(replay)).empty());
}

TEST(TraceReader, DamageIsAnErrorNamingTheFileAndLine) {
    const std::string good = trace_text({0, 5});
    Result<TraceReader> truncated = TraceReader::parse(good.substr(0, good.size() - 1), "t.jsonl");
    ASSERT_FALSE(truncated);
    EXPECT_EQ(truncated.error().file, "t.jsonl");
    EXPECT_EQ(truncated.error().line, 3);
    EXPECT_NE(truncated.error().message.find("truncated"), std::string::npos);

    Result<TraceReader> empty_line = TraceReader::parse(trace_text({0}) + "\n", "t.jsonl");
    ASSERT_FALSE(empty_line);
    EXPECT_EQ(empty_line.error().line, 3);

    Result<TraceReader> empty = TraceReader::parse("", "t.jsonl");
    ASSERT_FALSE(empty);
    EXPECT_NE(empty.error().message.find("expected the trace header"), std::string::npos);

    Result<TraceReader> backwards = TraceReader::parse(trace_text({5, 5}), "t.jsonl");
    ASSERT_TRUE(backwards);
    const Status b = backwards->scan();
    ASSERT_FALSE(b);
    EXPECT_EQ(b.error().file, "t.jsonl");
    EXPECT_EQ(b.error().line, 3);
    EXPECT_EQ(b.error().key, "time_us");

    Result<TraceReader> header_only = TraceReader::parse(trace_text({}), "t.jsonl");
    ASSERT_TRUE(header_only);
    EXPECT_FALSE(header_only->scan());
    EXPECT_FALSE(header_only->last_sample());

    std::string bad = trace_text({0, 5});
    bad.replace(bad.rfind("\"current\":"), 10, "\"kurrent\":");
    Result<TraceReader> bad_sample = TraceReader::parse(bad, "t.jsonl");
    ASSERT_TRUE(bad_sample);
    const Status m = bad_sample->scan();
    ASSERT_FALSE(m);
    EXPECT_EQ(m.error().file, "t.jsonl");
    EXPECT_EQ(m.error().line, 3);
}

std::string slurp(const std::filesystem::path& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// A directory under /tmp for one test, removed with it.
struct ScratchDir {
    std::filesystem::path path;
    ScratchDir() {
        std::string tmpl = "/tmp/memprotd-trace-XXXXXX";
        if (mkdtemp(tmpl.data()) == nullptr)
            throw std::runtime_error("mkdtemp failed");
        path = tmpl;
    }
    ~ScratchDir() { std::filesystem::remove_all(path); }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;
};

TEST(TraceWriter, RotatesAtTheCapKeepingOneOldFileEachWithItsHeader) {
    const ScratchDir dir;
    const std::string path = dir.path / "t.jsonl";
    {
        TraceWriter w(path, /*max_bytes=*/100, /*old_files=*/1);
        ASSERT_TRUE(w.open(TraceWriter::Start::Rotate, "HEADER"));
        for (int i = 0; i < 10; ++i)
            ASSERT_TRUE(w.write(std::string(30, static_cast<char>('a' + i)) + "\n"));
    }
    EXPECT_TRUE(std::filesystem::exists(path + ".1"));
    EXPECT_FALSE(std::filesystem::exists(path + ".2"));
    const std::string now = slurp(path), old = slurp(path + ".1");
    EXPECT_EQ(now.rfind("HEADER\n", 0), 0U);
    EXPECT_EQ(old.rfind("HEADER\n", 0), 0U);
    EXPECT_LE(now.size(), 100U);
    EXPECT_LE(old.size(), 100U);
    EXPECT_NE(now.find(std::string(30, 'j')), std::string::npos) << "the last line is in the current file";

    // A restart rotates the existing trace instead of writing into it.
    TraceWriter again(path, 100, 1);
    ASSERT_TRUE(again.open(TraceWriter::Start::Rotate, "HEADER2"));
    EXPECT_EQ(slurp(path), "HEADER2\n");
    EXPECT_EQ(slurp(path + ".1"), now);
}

TEST(TraceWriter, ARestatedHeaderIsALineAndStartsTheFilesRotatedAfter) {
    const ScratchDir dir;
    const std::string path = dir.path / "t.jsonl";
    {
        TraceWriter w(path, /*max_bytes=*/40, /*old_files=*/1);
        ASSERT_TRUE(w.open(TraceWriter::Start::Rotate, "H0"));
        EXPECT_TRUE(w.only_header());
        ASSERT_TRUE(w.restate("H1"));
        EXPECT_EQ(slurp(path), "H1\n") << "a file with no line after its header starts again";
        ASSERT_TRUE(w.write("one\n"));
        EXPECT_FALSE(w.only_header());
        ASSERT_TRUE(w.restate("H2"));
        EXPECT_EQ(slurp(path), "H1\none\nH2\n");
        ASSERT_TRUE(w.write(std::string(30, 'x') + "\n"));  // beyond the cap: rotates
    }
    EXPECT_EQ(slurp(path + ".1"), "H1\none\nH2\n");
    EXPECT_EQ(slurp(path), "H2\n" + std::string(30, 'x') + "\n");
    {
        // A restated header beyond the cap starts the next file.
        TraceWriter w(path, /*max_bytes=*/40, /*old_files=*/1);
        ASSERT_TRUE(w.open(TraceWriter::Start::Truncate, "H3"));
        ASSERT_TRUE(w.write(std::string(30, 'y') + "\n"));
        ASSERT_TRUE(w.restate("H4" + std::string(10, '4')));
        EXPECT_TRUE(w.only_header());
    }
    EXPECT_EQ(slurp(path + ".1"), "H3\n" + std::string(30, 'y') + "\n");
    EXPECT_EQ(slurp(path), "H4" + std::string(10, '4') + "\n");
}

TEST(TraceWriter, AppendKeepsTheHeaderAndAMissingFileIsAnError) {
    const ScratchDir dir;
    const std::string path = dir.path / "t.jsonl";
    TraceWriter missing(path, 0, 0);
    Status s = missing.open(TraceWriter::Start::Append, "H");
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().file, path);
    {
        TraceWriter w(path, 0, 0);
        ASSERT_TRUE(w.open(TraceWriter::Start::Truncate, "H"));
        ASSERT_TRUE(w.write("one\n"));
    }
    {
        TraceWriter w(path, 0, 0);
        ASSERT_TRUE(w.open(TraceWriter::Start::Append, "H"));
        ASSERT_TRUE(w.write("two\n"));
    }
    EXPECT_EQ(slurp(path), "H\none\ntwo\n");
}

}  // namespace
}  // namespace memprotd
