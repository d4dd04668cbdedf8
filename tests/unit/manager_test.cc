// SPDX-License-Identifier: LGPL-2.1-or-later
#include "manager.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actuator.h"
#include "fake_tree.h"
#include "file_io.h"
#include "psi_trigger.h"
#include "state_store.h"
#include "trace.h"

namespace memprotd {
namespace {

constexpr uint64_t kGiB = 1ULL << 30;
constexpr uint64_t kMiB = 1ULL << 20;
constexpr int64_t kSecond = 1'000'000;

using Kind = RecordingActuator::Call::Kind;

class ManagerTest : public ::testing::Test {
protected:
    ManagerTest() {
        // Tests assert on what is logged; keep everything in memory.
        sink_ = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256);
        auto logger = std::make_shared<spdlog::logger>("test", sink_);
        logger->set_level(spdlog::level::debug);
        logger->set_pattern("%v");
        spdlog::set_default_logger(logger);
        conf("memprotd.conf", "[Daemon]\nMode=enforce\nInterval=5s\n");
    }

    std::string conf_dir() const { return tree_.base() + "/etc"; }
    std::string run_dir() const { return tree_.base() + "/run"; }

    void conf(const std::string& relpath, const std::string& text) { tree_.write("etc/" + relpath, text); }

    // Sets a slice's protection in the tree and, identically, in "systemd".
    void protect(const std::string& cgroup, const std::string& unit, uint64_t low, uint64_t min = 0) {
        tree_.set(cgroup, "memory.low", low).set(cgroup, "memory.min", min);
        recorder_->values[unit] = {low, min};
    }

    Manager& make(bool with_actuator = true, bool tree_only = false, bool psi_triggers = false) {
        ManagerOptions opt;
        opt.sampler = tree_.sampler_options();
        opt.config_dirs = {conf_dir()};
        opt.runtime_dir = run_dir();
        opt.psi_triggers = psi_triggers;
        opt.notify = false;
        opt.tree_only = tree_only;
        opt.now_us = [this] { return clock_us_; };
        std::unique_ptr<Actuator> actuator;
        // systemd writes what it is told into the cgroup.
        recorder_->after_set = [this](const std::string& unit, const UnitProtection& v) {
            tree_.apply_protection(unit, v.memory_low, v.memory_min);
        };
        if (with_actuator)
            actuator = std::move(owned_recorder_);
        manager_ = std::make_unique<Manager>(std::move(opt), probe_features(tree_.probe_roots()), std::move(actuator));
        const std::vector<Error> errors = manager_->init();
        EXPECT_TRUE(errors.empty()) << (errors.empty() ? "" : errors.front().to_string());
        return *manager_;
    }

    TickResult tick() {
        TickResult r = manager_->run_once();
        clock_us_ += 5 * kSecond;
        return r;
    }

    std::vector<std::string> logged() const { return sink_->last_formatted(); }
    size_t count_logged(const std::string& needle) const {
        const auto lines = logged();
        return static_cast<size_t>(std::count_if(lines.begin(), lines.end(), [&](const std::string& l) {
            return l.find(needle) != std::string::npos;
        }));
    }

    std::vector<RecordingActuator::Call> calls_for(const std::string& unit) const {
        std::vector<RecordingActuator::Call> out;
        for (const auto& c : recorder_->calls)
            if (c.unit == unit)
                out.push_back(c);
        return out;
    }

    FakeTree tree_;
    std::unique_ptr<RecordingActuator> owned_recorder_ = std::make_unique<RecordingActuator>();
    RecordingActuator* recorder_ = owned_recorder_.get();
    std::unique_ptr<Manager> manager_;
    int64_t clock_us_ = 1000 * kSecond;
    std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
};

// big.slice holds far more protection than it needs and the priors already
// exceed the budget, so it shrinks at once; busy.slice needs more than it has.
void shrink_one_grow_other(FakeTree& tree) {
    tree.add_cgroup("big.slice", anon_heavy_spec(512 * kMiB));
    tree.add_cgroup("busy.slice", anon_heavy_spec(4 * kGiB));
}

TEST_F(ManagerTest, AppliesThePlansWritesInOrderDecreasesBeforeIncreases) {
    shrink_one_grow_other(tree_);
    protect("big.slice", "big.slice", 14 * kGiB);
    protect("busy.slice", "busy.slice", 0);
    Manager& m = make();

    const TickResult r = tick();

    const Plan& plan = m.last_plan();
    ASSERT_GE(plan.writes.size(), 2U);
    const auto sets = recorder_->sets();
    ASSERT_EQ(sets.size(), plan.writes.size());
    for (size_t i = 0; i < sets.size(); ++i) {
        EXPECT_EQ(sets[i].unit, plan.writes[i].unit) << i;
        EXPECT_EQ(sets[i].values, plan.writes[i].values) << i;
    }
    EXPECT_EQ(sets.front().unit, "big.slice");
    EXPECT_LT(sets.front().values.memory_low, 14 * kGiB);
    EXPECT_EQ(sets.back().unit, "busy.slice");
    EXPECT_GT(sets.back().values.memory_low, 0U);
    EXPECT_EQ(r.applied, sets.size());
    EXPECT_EQ(r.failed, 0U);
    EXPECT_EQ(m.total_writes(), sets.size());
    EXPECT_EQ(count_logged("busy.slice: MemoryLow 0B →"), 1U);
}

// Record=: a header, then one line per tick with times from 0 and, in
// enforce mode, the protections systemd reported (what the engine read).
TEST_F(ManagerTest, RecordsOneTraceLinePerTickWithTheValuesTheEngineRead) {
    shrink_one_grow_other(tree_);
    protect("big.slice", "big.slice", 1 * kGiB);
    recorder_->values["busy.slice"] = {300 * kMiB, 0};  // the tree's memory.low says 0
    const std::string trace = tree_.base() + "/trace.jsonl";
    conf("memprotd.conf", "[Daemon]\nMode=enforce\nInterval=5s\nRecord=" + trace + "\n");
    make();
    for (int i = 0; i < 3; ++i)
        tick();

    std::string text;
    ASSERT_EQ(read_file(trace, text), 0);
    std::vector<std::string> lines;
    for (size_t pos = 0, nl; (nl = text.find('\n', pos)) != std::string::npos; pos = nl + 1)
        lines.push_back(text.substr(pos, nl - pos));
    ASSERT_EQ(lines.size(), 4U);
    Result<TraceHeader> h = parse_trace_header(lines[0], 1);
    ASSERT_TRUE(h) << h.error().to_string();
    EXPECT_EQ(h->source, "memprotd");
    EXPECT_EQ(h->interval_us, 5'000'000U);
    for (size_t k = 1; k < lines.size(); ++k) {
        Result<TraceSample> s = parse_trace_sample(lines[k], static_cast<int>(k) + 1);
        ASSERT_TRUE(s) << s.error().to_string();
        EXPECT_EQ(s->snapshot.timestamp_us, static_cast<int64_t>(k - 1) * 5 * kSecond);
        if (k == 1) {
            const int busy = s->snapshot.find_unit("busy.slice");
            ASSERT_GE(busy, 0);
            EXPECT_EQ(s->snapshot.cgroups[static_cast<size_t>(busy)].low, 300 * kMiB);
        }
    }
}

// Lines in a trace file (0 when it cannot be read).
size_t trace_lines(const std::string& path) {
    std::string text;
    if (read_file(path, text) != 0)
        return 0;
    return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

TEST_F(ManagerTest, AReloadStartsStopsAndMovesTheRecording) {
    shrink_one_grow_other(tree_);
    const std::string a = tree_.base() + "/a.jsonl", b = tree_.base() + "/b.jsonl";
    conf("memprotd.conf", "[Daemon]\nMode=enforce\nInterval=5s\n");
    Manager& m = make();
    tick();
    EXPECT_EQ(trace_lines(a), 0U);

    conf("memprotd.conf", "[Daemon]\nMode=enforce\nInterval=5s\nRecord=" + a + "\n");
    ASSERT_TRUE(m.reload().empty());
    tick();
    tick();
    EXPECT_EQ(trace_lines(a), 3U) << "a header and one line per tick";

    conf("memprotd.conf", "[Daemon]\nMode=enforce\nInterval=5s\nRecord=" + b + "\n");
    ASSERT_TRUE(m.reload().empty());
    tick();
    EXPECT_EQ(trace_lines(a), 3U) << "the old file is left as it was";
    EXPECT_EQ(trace_lines(b), 2U);

    conf("memprotd.conf", "[Daemon]\nMode=enforce\nInterval=5s\n");
    ASSERT_TRUE(m.reload().empty());
    tick();
    EXPECT_EQ(trace_lines(b), 2U) << "recording stopped";
    EXPECT_EQ(count_logged("recording to " + b + " stopped"), 1U);
}

// The header states the engine settings; a reload that changes them while
// the trace goes on adds a header within it, which a reader accepts; before
// the first sample the trace starts again in place.
TEST_F(ManagerTest, ATraceSaysWhichEngineSettingsItsSamplesRanUnder) {
    shrink_one_grow_other(tree_);
    const std::string a = tree_.base() + "/a.jsonl";
    const std::string base = "[Daemon]\nMode=enforce\nInterval=5s\nRecord=" + a + "\n";
    conf("memprotd.conf", base);
    Manager& m = make();
    conf("memprotd.conf", base + "Budget=60%\n");
    ASSERT_TRUE(m.reload().empty());
    EXPECT_EQ(trace_lines(a), 1U) << "no sample yet: the header is written again";
    EXPECT_FALSE(std::filesystem::exists(a + ".1"));
    tick();
    conf("memprotd.conf", base + "Budget=60%\nEscalateAhead=yes\n");
    ASSERT_TRUE(m.reload().empty());
    ASSERT_TRUE(m.reload().empty());  // unchanged: nothing more
    tick();

    std::string text;
    ASSERT_EQ(read_file(a, text), 0);
    Result<TraceReader> r = TraceReader::parse(text, a);
    ASSERT_TRUE(r) << r.error().to_string();
    ASSERT_TRUE(r->scan());
    EXPECT_EQ(r->samples(), 2U);
    ASSERT_EQ(r->headers().size(), 2U);
    EXPECT_EQ(r->headers()[1].line, 3);
    const auto has = [](const TraceHeader& h, const Setting& s) {
        return std::find(h.engine_config.begin(), h.engine_config.end(), s) != h.engine_config.end();
    };
    EXPECT_TRUE(has(r->headers()[0].header, {"Budget", "60%"}));
    EXPECT_TRUE(has(r->headers()[0].header, {"EscalateAhead", "no"}));
    EXPECT_TRUE(has(r->headers()[1].header, {"EscalateAhead", "yes"}));
}

TEST_F(ManagerTest, ATraceThatCannotBeWrittenIsAWarningAndTheDaemonGoesOn) {
    shrink_one_grow_other(tree_);
    conf("memprotd.conf", "[Daemon]\nMode=enforce\nRecord=" + tree_.base() + "/no/such/dir/trace.jsonl\n");
    Manager& m = make();
    const TickResult r = tick();
    EXPECT_TRUE(m.have_plan());
    EXPECT_GT(r.applied, 0U);
    EXPECT_EQ(count_logged("not recording: "), 1U);
}

TEST_F(ManagerTest, RecordsPriorsBeforeTheFirstWriteAndRestoresThemOnStop) {
    shrink_one_grow_other(tree_);
    protect("big.slice", "big.slice", 14 * kGiB, 64 * kMiB);
    protect("busy.slice", "busy.slice", 0);
    Manager& m = make();
    std::vector<std::string> checked;
    recorder_->before_set = [&](const std::string& unit) {
        StateStore on_disk(run_dir());
        ASSERT_TRUE(on_disk.load());
        ASSERT_TRUE(on_disk.has(unit)) << unit << " written before its prior was on disk";
        checked.push_back(unit);
    };

    tick();
    tick();
    ASSERT_FALSE(checked.empty());
    ASSERT_NE(recorder_->values["busy.slice"], UnitProtection{});

    const std::vector<Error> errors = m.shutdown();
    EXPECT_TRUE(errors.empty());
    EXPECT_EQ(recorder_->values["big.slice"], (UnitProtection{14 * kGiB, 64 * kMiB}));
    EXPECT_EQ(recorder_->values["busy.slice"], UnitProtection{});
    EXPECT_TRUE(m.state().entries().empty());
    StateStore on_disk(run_dir());
    ASSERT_TRUE(on_disk.load());
    EXPECT_TRUE(on_disk.entries().empty());
}

TEST_F(ManagerTest, DoesNotRestoreOnStopWhenRestoreOnExitIsOff) {
    conf("memprotd.conf", "[Daemon]\nInterval=5s\nRestoreOnExit=no\n");
    tree_.add_cgroup("busy.slice", anon_heavy_spec(4 * kGiB));
    protect("busy.slice", "busy.slice", 0);
    Manager& m = make();
    tick();
    const UnitProtection applied = recorder_->values["busy.slice"];
    ASSERT_NE(applied, UnitProtection{});

    m.shutdown();

    EXPECT_EQ(recorder_->values["busy.slice"], applied);
    EXPECT_TRUE(m.state().has("busy.slice"));  // kept for a later start to restore
}

// A restart for a package upgrade (the maintainer script creates the
// marker) keeps the protection; the next start removes the marker, so the
// stop after it restores again.
TEST_F(ManagerTest, KeepsProtectionAtAStopThatTheMarkerAsksToAndRestoresAfterTheNextStart) {
    tree_.add_cgroup("busy.slice", anon_heavy_spec(4 * kGiB));
    protect("busy.slice", "busy.slice", 0);
    Manager& m = make();
    tick();
    const UnitProtection applied = recorder_->values["busy.slice"];
    ASSERT_NE(applied, UnitProtection{});
    const std::string marker = run_dir() + "/" + kKeepProtectionFile;
    tree_.write("run/" + std::string(kKeepProtectionFile), "");
    ASSERT_TRUE(std::filesystem::exists(marker));

    EXPECT_TRUE(m.shutdown().empty());
    EXPECT_EQ(recorder_->values["busy.slice"], applied) << "kept through the restart";
    EXPECT_TRUE(m.state().has("busy.slice")) << "the prior values stay recorded for the next start";
    EXPECT_EQ(count_logged("keeping the protection written"), 1U);

    // The next start (the upgraded daemon) resumes and removes the marker...
    owned_recorder_ = std::make_unique<RecordingActuator>();
    recorder_ = owned_recorder_.get();
    recorder_->values["busy.slice"] = applied;
    Manager& next = make();
    EXPECT_FALSE(std::filesystem::exists(marker));
    EXPECT_TRUE(next.state().has("busy.slice"));
    tick();
    // ...so its stop restores the values recorded before the first write.
    EXPECT_TRUE(next.shutdown().empty());
    EXPECT_EQ(recorder_->values["busy.slice"], UnitProtection{});
    EXPECT_TRUE(next.state().entries().empty());
}

// Ticks until one makes no write (the protection has settled); false if
// none within `limit` ticks.
bool settle(const std::function<TickResult()>& tick, int limit = 20) {
    for (int i = 0; i < limit; ++i)
        if (tick().applied == 0)
            return true;
    return false;
}

// Another writer (kubelet writing the cgroup, systemctl set-property)
// changes a slice memprotd wrote: memprotd says so once, writes it no more
// and drops its prior values; a reset takes it back.
TEST_F(ManagerTest, YieldsASliceAnotherWriterChangedUntilReset) {
    tree_.add_cgroup("busy.slice", anon_heavy_spec(4 * kGiB));
    protect("busy.slice", "busy.slice", 0);
    Manager& m = make();
    ASSERT_TRUE(settle([this] { return tick(); }));
    const UnitProtection wrote = recorder_->values["busy.slice"];
    ASSERT_NE(wrote, UnitProtection{});
    ASSERT_TRUE(m.state().has("busy.slice"));
    EXPECT_TRUE(m.yielded().empty()) << "the tree shows what was written";

    tree_.set("busy.slice", "memory.low", 100 * kMiB);  // kubelet
    const size_t sets_before = recorder_->sets().size();
    tick();
    EXPECT_TRUE(m.yielded().empty()) << "one sample may precede systemd's own write";
    tick();
    ASSERT_EQ(m.yielded().size(), 1U);
    EXPECT_EQ(m.yielded().at("busy.slice").seen.memory_low, 100 * kMiB);
    EXPECT_EQ(m.yielded().at("busy.slice").wrote, wrote);
    EXPECT_FALSE(m.state().has("busy.slice")) << "its prior values are no longer memprotd's to restore";
    EXPECT_EQ(count_logged("another writer changed them"), 1U);
    tree_.set("busy.slice", "memory.low", 200 * kMiB);  // and again
    for (int i = 0; i < 3; ++i)
        tick();
    EXPECT_EQ(recorder_->sets().size(), sets_before) << "no write to a yielded slice";
    EXPECT_EQ(count_logged("another writer changed them"), 1U) << "said once";

    ASSERT_TRUE(m.reset_slice_policy("busy.slice")) << "reset takes it back, runtime policy or not";
    EXPECT_TRUE(m.yielded().empty());
    tick();
    EXPECT_GT(recorder_->sets().size(), sets_before) << "written again";
    EXPECT_TRUE(m.state().has("busy.slice"));
    EXPECT_FALSE(m.reset_slice_policy("busy.slice")) << "nothing left to reset";
}

// After a restart memprotd knows what it wrote from systemd's values of the
// units it recorded: a cgroup changed behind it meanwhile is another writer's.
TEST_F(ManagerTest, YieldsAfterARestartToAWriterWhoChangedTheCgroupMeanwhile) {
    tree_.add_cgroup("busy.slice", anon_heavy_spec(4 * kGiB));
    protect("busy.slice", "busy.slice", 0);
    make();
    ASSERT_TRUE(settle([this] { return tick(); }));
    const UnitProtection wrote = recorder_->values["busy.slice"];
    // A crash: no stop. The record stays; systemd keeps what was written.
    owned_recorder_ = std::make_unique<RecordingActuator>();
    recorder_ = owned_recorder_.get();
    recorder_->values["busy.slice"] = wrote;
    tree_.set("busy.slice", "memory.low", 100 * kMiB);  // kubelet, meanwhile
    Manager& next = make();
    tick();  // asks systemd, so now knows what was written
    tick();
    EXPECT_TRUE(next.yielded().empty()) << "one differing sample is not yet another writer";
    tick();
    ASSERT_EQ(next.yielded().size(), 1U);
    EXPECT_EQ(next.yielded().at("busy.slice").wrote, wrote);
}

TEST_F(ManagerTest, AStopLeavesAYieldedSliceToItsWriter) {
    tree_.add_cgroup("busy.slice", anon_heavy_spec(4 * kGiB));
    protect("busy.slice", "busy.slice", 0);
    Manager& m = make();
    ASSERT_TRUE(settle([this] { return tick(); }));
    const UnitProtection wrote = recorder_->values["busy.slice"];
    tree_.set("busy.slice", "memory.low", 100 * kMiB);
    tick();
    tick();
    ASSERT_EQ(m.yielded().size(), 1U);
    EXPECT_TRUE(m.shutdown().empty());
    EXPECT_EQ(recorder_->values["busy.slice"], wrote) << "no restore over the other writer's value";
}

// A reload takes every yielded slice back.
TEST_F(ManagerTest, AReloadTakesYieldedSlicesBack) {
    tree_.add_cgroup("busy.slice", anon_heavy_spec(4 * kGiB));
    protect("busy.slice", "busy.slice", 0);
    Manager& m = make();
    ASSERT_TRUE(settle([this] { return tick(); }));
    tree_.set("busy.slice", "memory.min", 1 * kGiB);
    tick();
    tick();
    ASSERT_EQ(m.yielded().size(), 1U);
    EXPECT_TRUE(m.reload().empty());
    EXPECT_TRUE(m.yielded().empty());
}

TEST_F(ManagerTest, RestoresUnitsFromACrashedRunThatAreNoLongerManaged) {
    tree_.add_cgroup("busy.slice", anon_heavy_spec(4 * kGiB));
    protect("busy.slice", "busy.slice", 0);
    {
        StateStore crashed(run_dir());
        ASSERT_TRUE(crashed.record("gone.slice", {3 * kGiB, 0}));
        ASSERT_TRUE(crashed.record("busy.slice", {0, 0}));
    }
    recorder_->values["gone.slice"] = {5 * kGiB, 0};
    Manager& m = make();

    const TickResult r = tick();

    EXPECT_EQ(r.restored, 1U);
    EXPECT_EQ(recorder_->values["gone.slice"], (UnitProtection{3 * kGiB, 0}));
    EXPECT_FALSE(m.state().has("gone.slice"));
    EXPECT_TRUE(m.state().has("busy.slice"));
}

TEST_F(ManagerTest, ReloadWithABrokenDropInKeepsTheLastGoodConfigAndReportsFileAndLine) {
    tree_.add_cgroup("busy.slice", anon_heavy_spec(4 * kGiB));
    Manager& m = make();
    ASSERT_EQ(m.config().daemon.interval_us, 5 * 1'000'000ULL);
    std::vector<size_t> reloads;  // the error count of every reload reported
    m.on_config_reloaded = [&](const std::vector<Error>& errors) { reloads.push_back(errors.size()); };
    conf("memprotd.conf.d/50-bad.conf", "[Daemon]\nInterval=7s\nHeadroom=lots\n");

    const std::vector<Error> errors = m.reload();

    ASSERT_EQ(errors.size(), 1U);
    EXPECT_TRUE(errors[0].file.ends_with("memprotd.conf.d/50-bad.conf")) << errors[0].file;
    EXPECT_EQ(errors[0].line, 3);
    EXPECT_EQ(errors[0].key, "Headroom");
    EXPECT_EQ(m.config().daemon.interval_us, 5 * 1'000'000ULL);
    EXPECT_EQ(reloads, std::vector<size_t>{1});
    EXPECT_GE(count_logged("50-bad.conf:3"), 1U);

    conf("memprotd.conf.d/50-bad.conf", "[Daemon]\nInterval=7s\n");
    EXPECT_TRUE(m.reload().empty());
    EXPECT_EQ(m.config().daemon.interval_us, 7 * 1'000'000ULL);
    EXPECT_EQ(reloads, (std::vector<size_t>{1, 0}));
}

TEST_F(ManagerTest, VanishedUnitsDropOutOfThePlanAndGetTheirPriorsBack) {
    tree_.add_cgroup("busy.slice", anon_heavy_spec(4 * kGiB));
    tree_.add_cgroup("brief.slice", anon_heavy_spec(2 * kGiB));
    protect("busy.slice", "busy.slice", 0);
    protect("brief.slice", "brief.slice", 0);
    Manager& m = make();
    tick();
    ASSERT_NE(m.last_plan().find("brief.slice"), nullptr);
    ASSERT_TRUE(m.state().has("brief.slice"));

    tree_.remove("brief.slice");
    recorder_->calls.clear();
    tick();
    tick();

    EXPECT_EQ(m.last_plan().find("brief.slice"), nullptr);
    EXPECT_NE(m.last_plan().find("busy.slice"), nullptr);
    const auto calls = calls_for("brief.slice");
    ASSERT_EQ(calls.size(), 1U);  // the restore, and nothing after it
    EXPECT_EQ(calls[0].kind, Kind::Set);
    EXPECT_EQ(calls[0].values, UnitProtection{});
    EXPECT_FALSE(m.state().has("brief.slice"));
}

TEST_F(ManagerTest, RetriesAFailingUnitWithExponentialBackoffWithoutBlockingOthers) {
    tree_.add_cgroup("busy.slice", anon_heavy_spec(4 * kGiB));
    tree_.add_cgroup("other.slice", anon_heavy_spec(3 * kGiB));
    protect("busy.slice", "busy.slice", 0);
    protect("other.slice", "other.slice", 0);
    recorder_->fail("busy.slice", Error{"", 0, "org.freedesktop.DBus.Error.AccessDenied", "Access denied"});
    Manager& m = make();

    std::vector<int> attempts;  // tick numbers in which busy.slice was tried
    for (int i = 0; i < 12; ++i) {
        const size_t before = calls_for("busy.slice").size();
        const TickResult r = tick();
        if (calls_for("busy.slice").size() > before) {
            attempts.push_back(i);
            EXPECT_FALSE(r.errors.empty());
            EXPECT_EQ(r.errors.front().key, "org.freedesktop.DBus.Error.AccessDenied");
        }
    }
    // Next tick, then after 2, 4 and 8 intervals.
    EXPECT_EQ(attempts, (std::vector<int>{0, 1, 3, 7}));
    EXPECT_NE(recorder_->values["other.slice"], UnitProtection{});
    EXPECT_EQ(recorder_->values["busy.slice"], UnitProtection{});
    EXPECT_GE(count_logged("AccessDenied"), 4U);

    recorder_->clear_failure("busy.slice");
    for (int i = 0; i < 9; ++i)
        tick();
    EXPECT_NE(recorder_->values["busy.slice"], UnitProtection{});
    EXPECT_TRUE(m.state().has("busy.slice"));
}

TEST_F(ManagerTest, StopsTheTicksIncreasesWhenADecreaseFails) {
    shrink_one_grow_other(tree_);
    protect("big.slice", "big.slice", 14 * kGiB);
    protect("busy.slice", "busy.slice", 0);
    Manager& m = make();
    // Reads work (the prior is recorded), the write is refused.
    recorder_->fail("big.slice", Error{"", 0, "org.freedesktop.systemd1.UnitMasked", "Unit big.slice is masked."},
                    /*sets_only=*/true);

    const TickResult r = tick();

    ASSERT_GE(m.last_plan().writes.size(), 2U);
    ASSERT_TRUE(m.last_plan().writes.front().decrease);
    EXPECT_EQ(r.failed, 1U);
    EXPECT_EQ(r.applied, 0U);
    EXPECT_EQ(r.deferred, m.last_plan().writes.size() - 1);
    EXPECT_EQ(recorder_->values["busy.slice"], UnitProtection{});
}

TEST_F(ManagerTest, DryRunAndPausedWriteNothingAndDryRunSaysEachChangeOnce) {
    conf("memprotd.conf", "[Daemon]\nMode=dry-run\nInterval=5s\n");
    tree_.add_cgroup("busy.slice", anon_heavy_spec(4 * kGiB));
    Manager& m = make();
    ASSERT_EQ(m.mode(), Mode::DryRun);

    tick();
    tick();
    tick();
    ASSERT_FALSE(m.last_plan().writes.empty());
    EXPECT_TRUE(recorder_->calls.empty());
    EXPECT_EQ(count_logged("would set busy.slice"), 1U);

    ASSERT_TRUE(m.set_mode(Mode::Paused));
    tick();
    tick();
    ASSERT_FALSE(m.last_plan().writes.empty());
    EXPECT_TRUE(recorder_->calls.empty());
    EXPECT_TRUE(m.shutdown().empty());
    EXPECT_TRUE(recorder_->calls.empty());
    EXPECT_FALSE(std::filesystem::exists(run_dir() + "/state.json"));
}

TEST_F(ManagerTest, TracesEachTicksGapAndEachSlicesTargetsAtDebugLevel) {
    tree_.add_cgroup("busy.slice", anon_heavy_spec(4 * kGiB));
    make();
    tick();
    clock_us_ += 20 * kSecond;  // a 25 s gap between the first and second tick
    tick();
    EXPECT_EQ(count_logged("tick 1: 0.0 s since the last"), 1U);
    EXPECT_EQ(count_logged("tick 2: 25.0 s since the last"), 1U);
    EXPECT_EQ(count_logged("tick 2: busy.slice: current "), 1U);
    EXPECT_EQ(count_logged(" target low "), 2U);

    spdlog::default_logger()->set_level(spdlog::level::info);
    tick();
    EXPECT_EQ(count_logged("tick 3:"), 0U);
}

TEST_F(ManagerTest, TreeOnlyModeReadsTheTreeAndRefusesToEnforce) {
    tree_.add_cgroup("busy.slice", anon_heavy_spec(4 * kGiB));
    tree_.set("busy.slice", "memory.low", 1 * kGiB);
    Manager& m = make(/*with_actuator=*/false, /*tree_only=*/true);

    tick();

    EXPECT_EQ(m.mode(), Mode::DryRun);
    const PlanEntry* e = m.last_plan().find("busy.slice");
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->x.prior.memory_low, 1 * kGiB);
    EXPECT_FALSE(m.set_mode(Mode::Enforce));
    EXPECT_EQ(m.mode(), Mode::DryRun);
}

TEST_F(ManagerTest, RuntimeSlicePolicyOverridesTheFilesUntilReset) {
    tree_.add_cgroup("busy.slice", anon_heavy_spec(4 * kGiB));
    tree_.add_cgroup("other.slice", anon_heavy_spec(1 * kGiB));
    Manager& m = make();
    tick();
    ASSERT_NE(m.last_plan().find("other.slice"), nullptr);

    SlicePolicy leave_alone;
    leave_alone.manage = false;
    ASSERT_TRUE(m.set_slice_policy("other.slice", leave_alone));
    EXPECT_FALSE(m.set_slice_policy("other*", leave_alone));
    tick();
    EXPECT_EQ(m.last_plan().find("other.slice"), nullptr);
    EXPECT_EQ(m.slice_policy_overrides().size(), 1U);

    ASSERT_TRUE(m.reset_slice_policy("other.slice"));
    EXPECT_FALSE(m.reset_slice_policy("other.slice"));
    tick();
    EXPECT_NE(m.last_plan().find("other.slice"), nullptr);
}

// Slices the config leaves alone are judged once per config; a runtime
// policy that manages one must plan it from systemd's values, not the tree's.
TEST_F(ManagerTest, ARuntimePolicyThatManagesASlicePlansItFromSystemdsValues) {
    tree_.add_cgroup("busy.slice", anon_heavy_spec(4 * kGiB));
    tree_.add_cgroup("other.slice", anon_heavy_spec(1 * kGiB));
    recorder_->values["other.slice"] = {64 * kMiB, 0};  // the tree's memory.low says 0
    conf("policy.d/50-other.conf", "[Match]\nSlice=other.slice\n[Protection]\nManage=no\n");
    Manager& m = make();
    tick();
    tick();
    ASSERT_EQ(m.last_plan().find("other.slice"), nullptr);
    EXPECT_TRUE(calls_for("other.slice").empty());

    SlicePolicy manage;
    manage.manage = true;
    ASSERT_TRUE(m.set_slice_policy("other.slice", manage));
    tick();
    const PlanEntry* e = m.last_plan().find("other.slice");
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->x.prior.memory_low, 64 * kMiB);
}

TEST_F(ManagerTest, CallsThePlanHookAfterEveryTick) {
    tree_.add_cgroup("busy.slice", anon_heavy_spec(4 * kGiB));
    Manager& m = make();
    int plans = 0;
    size_t slices = 0;
    m.on_plan_applied = [&](const Plan& p) {
        ++plans;
        slices = p.slices.size();
    };
    tick();
    tick();
    EXPECT_EQ(plans, 2);
    EXPECT_EQ(slices, 1U);
}

TEST_F(ManagerTest, NeverWritesAPsiTriggerIntoAFakeTreesPressureFile) {
    tree_.add_cgroup("busy.slice", anon_heavy_spec(4 * kGiB));
    const std::string pressure = tree_.cgroup_dir("busy.slice") + "/memory.pressure";
    Manager& m = make(/*with_actuator=*/true, /*tree_only=*/false, /*psi_triggers=*/true);

    tick();
    tick();

    std::string text;
    ASSERT_EQ(read_file(pressure, text), 0);
    EXPECT_EQ(text, kIdlePsiText);
    EXPECT_NE(m.last_snapshot().cgroups.at(0).pressure, std::nullopt);
    EXPECT_GE(count_logged("not on cgroup2 or procfs"), 1U);
}

TEST(PsiTrigger, RoundsWindowsUpToWholeTwoSecondsForUnprivilegedCallers) {
    EXPECT_EQ(unprivileged_window_us(1'000'000), 2'000'000U);
    EXPECT_EQ(unprivileged_window_us(2'000'000), 2'000'000U);
    EXPECT_EQ(unprivileged_window_us(2'000'001), 4'000'000U);
    EXPECT_EQ(unprivileged_window_us(60'000'000), 10'000'000U);
}

TEST(PsiTrigger, ReportsAMissingFileWithItsPath) {
    Result<PsiTrigger> t = PsiTrigger::open("/nonexistent/memory.pressure", 150'000, 1'000'000);
    ASSERT_FALSE(t);
    EXPECT_EQ(t.error().file, "/nonexistent/memory.pressure");
}

TEST(PsiTrigger, ArmsOnTheHostsPressureFileWhenPsiIsAvailable) {
    Result<PsiTrigger> t = PsiTrigger::open("/proc/pressure/memory", 150'000, 1'000'000);
    // Kernels without PSI, or containers that refuse triggers, cannot run
    // this; refusing procfs itself would be our bug.
    if (!t && t.error().message.find("not on cgroup2 or procfs") == std::string::npos)
        GTEST_SKIP() << "no PSI triggers here: " << t.error().to_string();
    ASSERT_TRUE(t) << t.error().to_string();
    EXPECT_TRUE(t->valid());
    EXPECT_GE(t->window_us(), 1'000'000U);
    if (!have_cap_sys_resource()) {
        EXPECT_EQ(t->window_us() % 2'000'000, 0U);
    }
}

// debugfs lru_gen in the fake tree is a plain file: an aging command
// overwrites its start, which is how these tests see what was written.
class ManagerAgingTest : public ManagerTest {
protected:
    ManagerAgingTest() {
        tree_.add_cgroup("busy.slice", anon_heavy_spec(1 * kGiB));
        LruGen lg;
        // busy.slice's youngest generation is 45 s old (a protected slice the
        // kernel stopped aging); init.scope's is older still but not managed.
        lg.memcgs = {
            {2, "/init.scope", {{0, {{3, 200'000, 10, 10}, {4, 90'000, 10, 10}}}}},
            {5, "/busy.slice", {{0, {{11, 100'000, 500, 20}, {12, 45'000, 100'000, 20}}}}},
        };
        text_ = lru_gen_text(lg);
        tree_.lru_gen(text_);
    }
    std::string lru_gen_file() const {
        std::string s;
        EXPECT_EQ(read_at(AT_FDCWD, (tree_.debugfs_root() + "/lru_gen").c_str(), s), 0);
        return s;
    }
    std::string text_;
};

TEST_F(ManagerAgingTest, AgesAManagedSliceWhoseGenerationsWentStaleAndNothingElse) {
    Manager& m = make();
    tick();
    EXPECT_EQ(lru_gen_file().substr(0, 8), "+ 5 0 12");
    EXPECT_EQ(lru_gen_file().substr(8), text_.substr(8));  // one command, no other memcg
    EXPECT_EQ(m.aging().aged, 1U);
    EXPECT_EQ(m.aging().failed, 0U);
    // One write: it is both the slowest and all of them.
    EXPECT_EQ(m.aging().max_write_us, m.aging().total_write_us);
}

TEST_F(ManagerAgingTest, ReadsAndAgesNothingWhileMglruIsOff) {
    tree_.mglru(0x0000);
    Manager& m = make();
    tick();
    EXPECT_FALSE(m.last_snapshot().lru_gen.has_value());
    EXPECT_EQ(m.last_plan().find("busy.slice")->x.working_set_source, WorkingSetSource::MemoryStat);
    EXPECT_EQ(lru_gen_file(), text_);
    EXPECT_EQ(m.aging().aged, 0U);
}

TEST_F(ManagerAgingTest, NeitherDryRunNorWorkingSetAgingNoWritesToTheKernel) {
    conf("memprotd.conf", "[Daemon]\nMode=dry-run\nInterval=5s\n");
    Manager& m = make();
    tick();
    EXPECT_EQ(lru_gen_file(), text_);
    EXPECT_EQ(m.aging().aged, 0U);

    conf("memprotd.conf", "[Daemon]\nMode=enforce\nWorkingSetAging=no\n");
    ASSERT_TRUE(m.reload().empty());
    tick();
    EXPECT_EQ(lru_gen_file(), text_);
    EXPECT_EQ(m.aging().aged, 0U);
}

TEST_F(ManagerAgingTest, SaysOnceWhyItCannotAgeAndKeepsPlanning) {
    ASSERT_EQ(::chmod((tree_.debugfs_root() + "/lru_gen").c_str(), 0444), 0);
    if (::access((tree_.debugfs_root() + "/lru_gen").c_str(), W_OK) == 0)
        GTEST_SKIP() << "running with CAP_DAC_OVERRIDE: a mode-0444 file stays writable";
    Manager& m = make();
    tick();
    tick();
    EXPECT_EQ(m.aging().aged, 0U);
    EXPECT_EQ(m.aging().failed, 2U);
    EXPECT_NE(m.aging().last_error.find("+ 5 0 12"), std::string::npos) << m.aging().last_error;
    EXPECT_NE(m.aging().last_error.find("/busy.slice"), std::string::npos) << m.aging().last_error;
    EXPECT_EQ(count_logged("working-set aging: "), 1U);
    EXPECT_FALSE(recorder_->sets().empty());
}

}  // namespace
}  // namespace memprotd
