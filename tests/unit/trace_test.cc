// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The trace format (lib/json/trace.h) and its files (lib/sys/trace_file.h).
#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
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

std::string slurp(const std::filesystem::path& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

TEST(TraceWriter, RotatesAtTheCapKeepingOneOldFileEachWithItsHeader) {
    char tmpl[] = "/tmp/memprotd-trace-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::filesystem::path dir = tmpl;
    const std::string path = dir / "t.jsonl";
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
    std::filesystem::remove_all(dir);
}

TEST(TraceWriter, AppendKeepsTheHeaderAndAMissingFileIsAnError) {
    char tmpl[] = "/tmp/memprotd-trace-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::filesystem::path dir = tmpl;
    const std::string path = dir / "t.jsonl";
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
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace memprotd
