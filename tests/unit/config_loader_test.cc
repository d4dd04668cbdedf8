// SPDX-License-Identifier: LGPL-2.1-or-later
#include "config_loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace memprotd {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string all_errors(const std::vector<Error>& errors) {
    std::string out;
    for (const auto& e : errors)
        out += e.to_string() + "\n";
    return out;
}

std::vector<std::string> paths(const std::vector<ConfigFile>& files) {
    std::vector<std::string> out;
    for (const auto& f : files)
        out.push_back(f.path);
    return out;
}

std::string read_text(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// A scratch tree of config directories under one mkdtemp() root.
class ConfigLoader : public ::testing::Test {
protected:
    void SetUp() override {
        std::string tmpl = (fs::temp_directory_path() / "memprotd-config-XXXXXX").string();
        ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
        root_ = tmpl;
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(root_, ec);
    }

    std::string dir(const std::string& name) const { return (root_ / name).string(); }

    void write(const std::string& rel, const std::string& text) const {
        fs::path p = root_ / rel;
        fs::create_directories(p.parent_path());
        std::ofstream(p) << text;
    }

    void symlink_to(const std::string& rel, const std::string& target) const {
        fs::path p = root_ / rel;
        fs::create_directories(p.parent_path());
        fs::create_symlink(target, p);
    }

    fs::path root_;
};

constexpr const char* kPolicyA = "[Match]\nSlice=a.slice\n[Protection]\nWeight=10\n";
constexpr const char* kPolicyB = "[Match]\nSlice=a.slice\n[Protection]\nWeight=20\n";

TEST(ConfigLoaderDefaults, SearchesTheSystemdStyleDirectoriesInPriorityOrder) {
    EXPECT_THAT(default_config_dirs(),
                ElementsAre("/etc/memprotd", "/run/memprotd", "/usr/local/lib/memprotd", "/usr/lib/memprotd"));
}

TEST_F(ConfigLoader, MissingDirectoriesAreFine) {
    ConfigInput in = collect_config({dir("nope"), dir("also-nope")});
    EXPECT_THAT(in.errors, IsEmpty());
    EXPECT_THAT(in.daemon_files, IsEmpty());
    EXPECT_THAT(in.policy_files, IsEmpty());
    ConfigParse p = load_config({dir("nope")});
    EXPECT_TRUE(p.ok());
}

TEST_F(ConfigLoader, MainFileComesFromTheFirstDirectoryThatHasIt) {
    write("etc/memprotd.conf", "[Daemon]\nInterval=1s\n");
    write("usr/memprotd.conf", "[Daemon]\nInterval=9s\n");
    ConfigInput in = collect_config({dir("run"), dir("etc"), dir("usr")});
    EXPECT_THAT(paths(in.daemon_files), ElementsAre(dir("etc") + "/memprotd.conf"));
    ConfigParse p = parse_config(in);
    EXPECT_EQ(p.config.daemon.interval_us, 1'000'000u);
}

TEST_F(ConfigLoader, MainFileThenDropInsInLexicalOrderAcrossDirectories) {
    write("usr/memprotd.conf", "[Daemon]\nInterval=9s\n");
    write("usr/memprotd.conf.d/10-usr.conf", "[Daemon]\nInterval=2s\n");
    write("etc/memprotd.conf.d/20-etc.conf", "[Daemon]\nInterval=3s\n");
    write("usr/memprotd.conf.d/30-usr.conf", "[Daemon]\nHeadroom=20%\n");
    ConfigParse p = load_config({dir("etc"), dir("usr")});
    ASSERT_TRUE(p.ok()) << all_errors(p.errors);
    EXPECT_THAT(p.config.files,
                ElementsAre(dir("usr") + "/memprotd.conf", dir("usr") + "/memprotd.conf.d/10-usr.conf",
                            dir("etc") + "/memprotd.conf.d/20-etc.conf", dir("usr") + "/memprotd.conf.d/30-usr.conf"));
    EXPECT_EQ(p.config.daemon.interval_us, 3'000'000u);
    EXPECT_DOUBLE_EQ(p.config.daemon.headroom, 0.20);
}

TEST_F(ConfigLoader, PolicyFilesAreSortedByFileNameNotByDirectory) {
    write("etc/policy.d/70-etc.conf", kPolicyA);
    write("usr/policy.d/20-usr.conf", kPolicyB);
    write("run/policy.d/50-run.conf", kPolicyA);
    ConfigInput in = collect_config({dir("etc"), dir("run"), dir("usr")});
    EXPECT_THAT(paths(in.policy_files),
                ElementsAre(dir("usr") + "/policy.d/20-usr.conf", dir("run") + "/policy.d/50-run.conf",
                            dir("etc") + "/policy.d/70-etc.conf"));
}

TEST_F(ConfigLoader, EarlierDirectoryMasksSameNameLater) {
    write("etc/policy.d/50-a.conf", kPolicyB);
    write("usr/policy.d/50-a.conf", kPolicyA);
    ConfigParse p = load_config({dir("etc"), dir("usr")});
    ASSERT_TRUE(p.ok()) << all_errors(p.errors);
    EXPECT_THAT(p.config.files, ElementsAre(dir("etc") + "/policy.d/50-a.conf"));
    EXPECT_EQ(p.config.policy_for("a.slice").weight, 20u);
}

TEST_F(ConfigLoader, EmptyFileMasksWithoutAddingAnything) {
    write("etc/policy.d/50-a.conf", "");
    write("usr/policy.d/50-a.conf", kPolicyA);
    write("usr/policy.d/60-b.conf", kPolicyB);
    ConfigParse p = load_config({dir("etc"), dir("usr")});
    ASSERT_TRUE(p.ok()) << all_errors(p.errors);
    EXPECT_THAT(p.config.files, ElementsAre(dir("usr") + "/policy.d/60-b.conf"));
}

TEST_F(ConfigLoader, DevNullSymlinkMasksWithoutAddingAnything) {
    symlink_to("etc/policy.d/50-a.conf", "/dev/null");
    symlink_to("etc/memprotd.conf.d/10-x.conf", "/dev/null");
    write("usr/policy.d/50-a.conf", kPolicyA);
    write("usr/memprotd.conf.d/10-x.conf", "[Daemon]\nMode=bogus\n");
    ConfigInput in = collect_config({dir("etc"), dir("usr")});
    EXPECT_THAT(in.errors, IsEmpty()) << all_errors(in.errors);
    EXPECT_THAT(in.policy_files, IsEmpty());
    EXPECT_THAT(in.daemon_files, IsEmpty());
}

TEST_F(ConfigLoader, MaskedMainFileHidesLaterMainFiles) {
    symlink_to("etc/memprotd.conf", "/dev/null");
    write("usr/memprotd.conf", "[Daemon]\nMode=bogus\n");
    write("usr/memprotd.conf.d/10-x.conf", "[Daemon]\nInterval=2s\n");
    ConfigParse p = load_config({dir("etc"), dir("usr")});
    ASSERT_TRUE(p.ok()) << all_errors(p.errors);
    EXPECT_THAT(p.config.files, ElementsAre(dir("usr") + "/memprotd.conf.d/10-x.conf"));
}

TEST_F(ConfigLoader, OnlyConfFilesCount) {
    write("etc/policy.d/50-a.conf", kPolicyA);
    write("etc/policy.d/50-b.conf.example", "garbage");
    write("etc/policy.d/50-c.conf~", "garbage");
    write("etc/policy.d/README", "garbage");
    write("etc/policy.d/.conf", "garbage");
    write("etc/policy.d/.hidden.conf", "garbage");
    fs::create_directories(root_ / "etc/policy.d/dir.conf");
    ConfigParse p = load_config({dir("etc")});
    ASSERT_TRUE(p.ok()) << all_errors(p.errors);
    EXPECT_THAT(p.config.files, ElementsAre(dir("etc") + "/policy.d/50-a.conf"));
}

TEST_F(ConfigLoader, UnreadableFileIsReportedWithPathAndReason) {
    // Running as root defeats chmod 000, so a dangling symlink stands in for
    // a file that exists but cannot be read.
    symlink_to("etc/policy.d/50-broken.conf", dir("nowhere/target.conf"));
    write("etc/policy.d/60-ok.conf", kPolicyA);
    ConfigInput in = collect_config({dir("etc")});
    ASSERT_EQ(in.errors.size(), 1u) << all_errors(in.errors);
    EXPECT_EQ(in.errors[0].file, dir("etc") + "/policy.d/50-broken.conf");
    EXPECT_THAT(in.errors[0].message, HasSubstr("No such file or directory"));
    EXPECT_THAT(paths(in.policy_files), ElementsAre(dir("etc") + "/policy.d/60-ok.conf"));
    ConfigParse p = parse_config(in);
    EXPECT_FALSE(p.ok());
}

TEST_F(ConfigLoader, UnreadableFileWithoutPermissionIsReported) {
    if (geteuid() == 0)
        GTEST_SKIP() << "root can read a mode-000 file";
    write("etc/policy.d/50-a.conf", kPolicyA);
    fs::permissions(root_ / "etc/policy.d/50-a.conf", fs::perms::none);
    ConfigInput in = collect_config({dir("etc")});
    ASSERT_EQ(in.errors.size(), 1u);
    EXPECT_THAT(in.errors[0].message, HasSubstr("Permission denied"));
}

TEST_F(ConfigLoader, ParseErrorsNameTheFullPathAndLine) {
    write("etc/policy.d/50-a.conf", "[Match]\nSlice=a.slice\n[Protection]\nWeight=heavy\n");
    ConfigParse p = load_config({dir("etc")});
    ASSERT_EQ(p.errors.size(), 1u);
    EXPECT_EQ(p.errors[0].to_string(),
              dir("etc") + "/policy.d/50-a.conf:4: Weight: expected an integer 1..10000, got \"heavy\"");
}

TEST_F(ConfigLoader, ATrailingSlashOnTheDirectoryIsHarmless) {
    write("etc/policy.d/50-a.conf", kPolicyA);
    ConfigInput in = collect_config({dir("etc") + "/"});
    EXPECT_THAT(paths(in.policy_files), ElementsAre(dir("etc") + "/policy.d/50-a.conf"));
}

// ---------------------------------------------------------------------------
// The files the project ships in units/.

#ifdef MEMPROTD_SOURCE_DIR
const fs::path kUnits = fs::path(MEMPROTD_SOURCE_DIR) / "units";

TEST(ShippedConfig, UnitsDirectoryLoadsWithoutErrors) {
    ConfigParse p = load_config({kUnits.string()});
    ASSERT_TRUE(p.ok()) << all_errors(p.errors);
    EXPECT_THAT(p.config.files, ElementsAre((kUnits / "memprotd.conf").string()));
    EXPECT_THAT(p.config.policies, IsEmpty()) << "the policy examples are *.conf.example, not active";
}

TEST(ShippedConfig, CommentedOutDaemonKeysShowTheRealDefaults) {
    std::string text = read_text(kUnits / "memprotd.conf");
    ASSERT_FALSE(text.empty());
    // Uncomment "#Key=value" lines; comments with spaces stay comments.
    std::string uncommented;
    std::istringstream lines(text);
    int keys = 0;
    for (std::string line; std::getline(lines, line);) {
        if (line.size() > 1 && line[0] == '#' && line[1] != ' ' && line.find('=') != std::string::npos) {
            line.erase(0, 1);
            ++keys;
        }
        uncommented += line + "\n";
    }
    EXPECT_EQ(keys, 14) << "every [Daemon] key is documented";
    ConfigParse p = parse_config({{{"memprotd.conf", uncommented}}, {}, {}});
    ASSERT_TRUE(p.ok()) << all_errors(p.errors);
    const DaemonConfig defaults;
    const DaemonConfig& d = p.config.daemon;
    EXPECT_EQ(d.mode, defaults.mode);
    EXPECT_EQ(d.interval_us, defaults.interval_us);
    EXPECT_EQ(d.budget.kind, defaults.budget.kind);
    EXPECT_DOUBLE_EQ(d.budget.percent, defaults.budget.percent);
    EXPECT_EQ(d.working_set_window_us, defaults.working_set_window_us);
    EXPECT_DOUBLE_EQ(d.headroom, defaults.headroom);
    EXPECT_EQ(d.restore_on_exit, defaults.restore_on_exit);
    EXPECT_EQ(d.manage_top_level_slices, defaults.manage_top_level_slices);
    EXPECT_EQ(d.pressure_threshold_us, defaults.pressure_threshold_us);
    EXPECT_EQ(d.pressure_window_us, defaults.pressure_window_us);
    EXPECT_EQ(d.working_set_aging, defaults.working_set_aging);
    EXPECT_EQ(d.escalate_ahead, defaults.escalate_ahead);
    EXPECT_EQ(d.trim_cheap_cache, defaults.trim_cheap_cache);
    EXPECT_EQ(d.record, defaults.record);
    EXPECT_EQ(d.record_max_bytes, defaults.record_max_bytes);
}

TEST(ShippedConfig, ExamplePoliciesParseAndSayWhatTheDocsSay) {
    ConfigInput in;
    for (const char* name : {"40-system.conf.example", "50-workload.conf.example", "60-batch.conf.example"}) {
        std::string text = read_text(kUnits / "policy.d" / name);
        ASSERT_FALSE(text.empty()) << name;
        in.policy_files.push_back({name, text});
    }
    constexpr uint64_t kGiB = uint64_t{1} << 30;
    for (uint64_t mem_total : {uint64_t{0}, 2 * kGiB, 64 * kGiB}) {
        ConfigParse p = parse_config(in, mem_total);
        ASSERT_TRUE(p.ok()) << "MemTotal " << mem_total << "\n" << all_errors(p.errors);
        EffectivePolicy w = p.config.policy_for("workload.slice");
        EXPECT_EQ(w.weight, 400u);
        EXPECT_EQ(w.min_protection.to_string(), "512M");
        EXPECT_EQ(w.max_protection.to_string(), "75%");
        EXPECT_EQ(w.floor.to_string(), "256M");
        EXPECT_EQ(p.config.policy_for("batch.slice").weight, 50u);
        EffectivePolicy s = p.config.policy_for("system.slice");
        EXPECT_EQ(s.weight, 100u);
        EXPECT_EQ(s.min_protection.to_string(), "256M");
        EXPECT_FALSE(p.config.policy_for("user.slice").matched);
    }
}
#endif

}  // namespace
}  // namespace memprotd
