// SPDX-License-Identifier: LGPL-2.1-or-later
#include "state_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "actuator.h"
#include "fake_tree.h"

namespace memprotd {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kGiB = 1ULL << 30;
constexpr uint64_t kMiB = 1ULL << 20;

class StateStoreTest : public ::testing::Test {
protected:
    std::string dir() const { return tmp_.base() + "/run"; }
    std::string file() const { return dir() + "/state.json"; }

    std::string read(const std::string& path) const {
        std::ifstream in(path);
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    }
    void write(const std::string& text) { tmp_.write("run/state.json", text); }

    FakeTree tmp_;  // used as a self-cleaning temporary directory
};

TEST_F(StateStoreTest, RoundTripsRecordsThroughAnAtomicWrite) {
    StateStore store(dir());
    ASSERT_TRUE(store.record("a.slice", {1 * kGiB, 64 * kMiB}));
    ASSERT_TRUE(store.record("b.slice", {kUnlimited, 0}));

    StateStore loaded(dir());
    ASSERT_TRUE(loaded.load());

    ASSERT_EQ(loaded.entries().size(), 2U);
    EXPECT_EQ(loaded.entries()[0].unit, "a.slice");
    EXPECT_EQ(loaded.entries()[0].prior, (UnitProtection{1 * kGiB, 64 * kMiB}));
    EXPECT_EQ(loaded.entries()[1].unit, "b.slice");
    EXPECT_EQ(loaded.entries()[1].prior.memory_low, kUnlimited);
    EXPECT_FALSE(fs::exists(file() + ".tmp"));
    struct stat st {};
    ASSERT_EQ(::stat(file().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600U);
}

TEST_F(StateStoreTest, AMissingFileIsAnEmptyRecord) {
    StateStore store(dir());
    EXPECT_TRUE(store.load());
    EXPECT_TRUE(store.entries().empty());
}

TEST_F(StateStoreTest, KeepsTheFirstPriorOfAUnit) {
    StateStore store(dir());
    ASSERT_TRUE(store.record("a.slice", {1 * kGiB, 0}));
    ASSERT_TRUE(store.record("a.slice", {2 * kGiB, 0}));  // our own value by then

    StateStore loaded(dir());
    ASSERT_TRUE(loaded.load());
    ASSERT_EQ(loaded.entries().size(), 1U);
    EXPECT_EQ(loaded.entries()[0].prior.memory_low, 1 * kGiB);
}

TEST_F(StateStoreTest, SetsACorruptFileAsideAndRestoresNothingFromIt) {
    write("{\"version\": 1, \"units\": [ {\"unit\": \"a.slice\", \"memory_low\": 12@@");
    StateStore store(dir());

    const Status s = store.load();

    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().file, file());
    EXPECT_NE(s.error().message.find("corrupt"), std::string::npos) << s.error().message;
    EXPECT_NE(s.error().message.find("parse error"), std::string::npos) << s.error().message;
    EXPECT_NE(s.error().message.find("state.json.corrupt"), std::string::npos);
    EXPECT_FALSE(fs::exists(file()));
    EXPECT_TRUE(fs::exists(file() + ".corrupt"));
    EXPECT_TRUE(store.entries().empty());
    RecordingActuator rec;
    EXPECT_TRUE(store.restore(rec).empty());
    EXPECT_TRUE(rec.calls.empty());
}

TEST_F(StateStoreTest, DetectsATruncatedFile) {
    {
        StateStore store(dir());
        ASSERT_TRUE(store.record("a.slice", {1 * kGiB, 0}));
        ASSERT_TRUE(store.record("b.slice", {2 * kGiB, 0}));
    }
    const std::string whole = read(file());
    write(whole.substr(0, whole.size() / 2));

    StateStore store(dir());
    const Status s = store.load();

    ASSERT_FALSE(s);
    EXPECT_TRUE(store.entries().empty());
    EXPECT_EQ(read(file() + ".corrupt"), whole.substr(0, whole.size() / 2));
}

TEST_F(StateStoreTest, RejectsWellFormedJsonWithTheWrongSchema) {
    const char* cases[] = {
        "[]",
        "{\"version\": 2, \"units\": []}",
        "{\"version\": 1}",
        "{\"version\": 1, \"units\": [{\"unit\": \"a.slice\", \"memory_low\": -1, \"memory_min\": 0, \"seq\": 1}]}",
        "{\"version\": 1, \"units\": [{\"unit\": \"a.slice\", \"memory_low\": \"1G\", \"memory_min\": 0, \"seq\": 1}]}",
        "{\"version\": 1, \"units\": [{\"memory_low\": 0, \"memory_min\": 0, \"seq\": 1}]}",
        // one literal in two (the parentheses tell clang's
        // -Wstring-concatenation it is not a missing comma)
        ("{\"version\": 1, \"units\": [{\"unit\": \"a.slice\", \"memory_low\": 0, \"memory_min\": 0, \"seq\": 1},"
         " {\"unit\": \"a.slice\", \"memory_low\": 0, \"memory_min\": 0, \"seq\": 2}]}"),
    };
    for (const char* text : cases) {
        write(text);
        StateStore store(dir());
        const Status s = store.load();
        EXPECT_FALSE(s) << text;
        EXPECT_TRUE(store.entries().empty()) << text;
        EXPECT_TRUE(fs::exists(file() + ".corrupt")) << text;
        fs::remove(file() + ".corrupt");
    }
}

TEST_F(StateStoreTest, RestoresDeepestSlicesFirstAndForgetsWhatWasRestored) {
    StateStore store(dir());
    ASSERT_TRUE(store.record("a.slice", {1 * kGiB, 0}));
    ASSERT_TRUE(store.record("z.slice", {0, 0}));
    ASSERT_TRUE(store.record("a-b-c.slice", {3 * kMiB, 0}));
    ASSERT_TRUE(store.record("a-b.slice", {2 * kMiB, 1 * kMiB}));
    RecordingActuator rec;

    EXPECT_TRUE(store.restore(rec).empty());

    std::vector<std::string> order;
    for (const auto& c : rec.sets())
        order.push_back(c.unit);
    EXPECT_EQ(order, (std::vector<std::string>{"a-b-c.slice", "a-b.slice", "z.slice", "a.slice"}));
    EXPECT_EQ(rec.values["a-b.slice"], (UnitProtection{2 * kMiB, 1 * kMiB}));
    EXPECT_TRUE(store.entries().empty());
    StateStore loaded(dir());
    ASSERT_TRUE(loaded.load());
    EXPECT_TRUE(loaded.entries().empty());
}

TEST_F(StateStoreTest, KeepsUnitsWhoseRestoreFailedForALaterAttempt) {
    StateStore store(dir());
    ASSERT_TRUE(store.record("a.slice", {1 * kGiB, 0}));
    ASSERT_TRUE(store.record("b.slice", {2 * kGiB, 0}));
    RecordingActuator rec;
    rec.fail("a.slice", Error{"", 0, "org.freedesktop.DBus.Error.AccessDenied", "denied"});

    const std::vector<Error> errors = store.restore(rec);

    ASSERT_EQ(errors.size(), 1U);
    EXPECT_EQ(errors[0].file, "a.slice");
    ASSERT_EQ(store.entries().size(), 1U);
    EXPECT_EQ(store.entries()[0].unit, "a.slice");
    StateStore loaded(dir());
    ASSERT_TRUE(loaded.load());
    ASSERT_EQ(loaded.entries().size(), 1U);
    EXPECT_EQ(loaded.entries()[0].unit, "a.slice");
}

TEST_F(StateStoreTest, RestoresOnlyTheUnitsItIsAskedFor) {
    StateStore store(dir());
    ASSERT_TRUE(store.record("a.slice", {1 * kGiB, 0}));
    ASSERT_TRUE(store.record("b.slice", {2 * kGiB, 0}));
    RecordingActuator rec;

    EXPECT_TRUE(store.restore(rec, [](const std::string& u) { return u == "b.slice"; }).empty());

    ASSERT_EQ(rec.sets().size(), 1U);
    EXPECT_EQ(rec.sets()[0].unit, "b.slice");
    EXPECT_TRUE(store.has("a.slice"));
    EXPECT_FALSE(store.has("b.slice"));
}

TEST_F(StateStoreTest, RecordFailsAndPromisesNothingWhenTheDirectoryIsUnusable) {
    tmp_.write("not-a-dir", "x");
    StateStore store(tmp_.base() + "/not-a-dir/run");

    const Status s = store.record("a.slice", {1 * kGiB, 0});

    ASSERT_FALSE(s);
    EXPECT_NE(s.error().file.find("not-a-dir"), std::string::npos);
    EXPECT_FALSE(store.has("a.slice"));
}

// systemd's runtime drop-ins: memprotd's writes make those that were missing
// before its first write; once restored, they are listed for the purge.
TEST_F(StateStoreTest, RecordsWhichDropinsItsWritesMakeAndListsThemOnceRestored) {
    const std::string control = tmp_.base() + "/system.control";
    tmp_.write("system.control/workload.slice.d/50-MemoryLow.conf", "[Slice]\nMemoryLow=67108864\n");
    StateStore store(dir(), control);
    ASSERT_TRUE(store.record("workload.slice", {64 * kMiB, 0}));
    ASSERT_TRUE(store.record("batch.slice", {kUnlimited, 0}));

    StateStore loaded(dir(), control);
    ASSERT_TRUE(loaded.load());
    ASSERT_EQ(loaded.entries().size(), 2U);
    EXPECT_EQ(loaded.entries()[0].made, (StateStore::MadeDropins{false, true}));
    EXPECT_EQ(loaded.entries()[1].made, (StateStore::MadeDropins{true, true}));
    EXPECT_FALSE(fs::exists(loaded.restored_dropins_path()));

    RecordingActuator rec;
    EXPECT_TRUE(loaded.restore(rec).empty());

    // The administrator's MemoryLow= drop-in of workload.slice is not listed.
    EXPECT_EQ(read(loaded.restored_dropins_path()),
              "workload.slice MemoryMin=0\nbatch.slice MemoryLow=infinity\nbatch.slice MemoryMin=0\n");
    // What systemd keeps of the restores (RecordingActuator writes no files).
    tmp_.write("system.control/workload.slice.d/50-MemoryMin.conf", "[Slice]\nMemoryMin=0\n");
    tmp_.write("system.control/batch.slice.d/50-MemoryLow.conf", "[Slice]\nMemoryLow=infinity\n");
    StateStore again(dir(), control);
    ASSERT_TRUE(again.load());
    EXPECT_TRUE(again.entries().empty());
    EXPECT_EQ(again.restored().size(), 2U);
}

TEST_F(StateStoreTest, AUnitWrittenAgainAfterItsRestoreKeepsWhatItsWritesMade) {
    const std::string control = tmp_.base() + "/system.control";
    StateStore store(dir(), control);
    ASSERT_TRUE(store.record("batch.slice", {0, 0}));
    RecordingActuator rec;
    ASSERT_TRUE(store.restore(rec).empty());
    // systemd now has the drop-ins the restore wrote.
    tmp_.write("system.control/batch.slice.d/50-MemoryLow.conf", "[Slice]\nMemoryLow=0\n");
    tmp_.write("system.control/batch.slice.d/50-MemoryMin.conf", "[Slice]\nMemoryMin=0\n");

    ASSERT_TRUE(store.record("batch.slice", {0, 0}));

    ASSERT_EQ(store.entries().size(), 1U);
    EXPECT_EQ(store.entries()[0].made, (StateStore::MadeDropins{true, true}));
    EXPECT_TRUE(store.restored().empty());
    EXPECT_FALSE(fs::exists(store.restored_dropins_path()));  // listed again only once restored
}

TEST_F(StateStoreTest, ADropinRewrittenByAnotherWriterAfterARestoreIsNotListedAgain) {
    const std::string control = tmp_.base() + "/system.control";
    StateStore store(dir(), control);
    ASSERT_TRUE(store.record("batch.slice", {0, 0}));
    RecordingActuator rec;
    ASSERT_TRUE(store.restore(rec).empty());
    // The administrator sets MemoryLow= after the restore; MemoryMin= still
    // says what the restore wrote.
    tmp_.write("system.control/batch.slice.d/50-MemoryLow.conf", "[Slice]\nMemoryLow=104857600\n");
    tmp_.write("system.control/batch.slice.d/50-MemoryMin.conf", "# systemd\n[Slice]\nMemoryMin=0\n");

    ASSERT_TRUE(store.record("batch.slice", {100 * kMiB, 0}));
    ASSERT_TRUE(store.restore(rec).empty());

    EXPECT_EQ(read(store.restored_dropins_path()), "batch.slice MemoryMin=0\n");
}

TEST_F(StateStoreTest, ForgetsRestoredUnitsWhoseDropinsAreGoneWhenLoaded) {
    const std::string control = tmp_.base() + "/system.control";
    StateStore store(dir(), control);
    ASSERT_TRUE(store.record("gone.slice", {0, 0}));
    ASSERT_TRUE(store.record("kept.slice", {0, 0}));
    RecordingActuator rec;
    ASSERT_TRUE(store.restore(rec).empty());
    tmp_.write("system.control/kept.slice.d/50-MemoryLow.conf", "[Slice]\nMemoryLow=0\n");

    StateStore loaded(dir(), control);
    ASSERT_TRUE(loaded.load());

    ASSERT_EQ(loaded.restored().size(), 1U);
    EXPECT_EQ(loaded.restored()[0].unit, "kept.slice");
    EXPECT_EQ(read(loaded.restored_dropins_path()), "kept.slice MemoryLow=0\nkept.slice MemoryMin=0\n");
}

TEST_F(StateStoreTest, ARecordWithoutDropinFlagsMadeNothingAndABadOneIsCorrupt) {
    write(R"({"version": 1, "units": [{"unit": "a.slice", "memory_low": 0, "memory_min": 0, "seq": 1}]})");
    StateStore old(dir(), tmp_.base() + "/system.control");
    ASSERT_TRUE(old.load());
    ASSERT_EQ(old.entries().size(), 1U);
    EXPECT_EQ(old.entries()[0].made, (StateStore::MadeDropins{false, false}));

    for (const std::string text :
         {R"({"version": 1, "units": [{"unit": "a.slice", "memory_low": 0, "memory_min": 0, "seq": 1, "made_low": 1}]})",
          R"({"version": 1, "units": [], "restored": {}})",
          R"({"version": 1, "units": [], "restored": [{"unit": "a.slice"}]})",
          R"({"version": 1, "units": [{"unit": "a.slice", "memory_low": 0, "memory_min": 0, "seq": 1}],
              "restored": [{"unit": "a.slice", "memory_low": 0, "memory_min": 0, "seq": 0}]})"}) {
        write(text);
        StateStore store(dir());
        EXPECT_FALSE(store.load()) << text;
        EXPECT_TRUE(store.entries().empty() && store.restored().empty()) << text;
        fs::remove(file() + ".corrupt");
    }
}

}  // namespace
}  // namespace memprotd
