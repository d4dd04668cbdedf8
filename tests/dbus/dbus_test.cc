// SPDX-License-Identifier: LGPL-2.1-or-later
//
// org.memprotd1 end to end: the real adaptor over a real Manager on a fake
// tree (recording actuator), served on a private dbus-daemon. The test's
// thread drives the Manager's sd-event loop; clients run on other threads
// (in-process proxies) or as memprotctl subprocesses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sdbus-c++/sdbus-c++.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "actuator.h"
#include "manager_bus.h"
#include "fake_tree.h"
#include "format.h"
#include "manager.h"
#include "memprotd-config.h"
#include "org.memprotd1.Manager.proxy.h"
#include "polkit.h"
#include "private_bus.h"
#include "slice_row.h"

namespace memprotd {
namespace {

using nlohmann::json;
using test::Child;
using test::PrivateBus;
using test::ProcessResult;

constexpr uint64_t kGiB = 1ULL << 30;
constexpr uint64_t kMiB = 1ULL << 20;
constexpr int64_t kSecond = 1'000'000;
constexpr const char* kIface = "org.memprotd1.Manager";
constexpr auto kTimeout = std::chrono::seconds(20);

// A client with its own connection and event-loop thread: method calls from
// any thread, signals recorded under a lock.
class Client final : public sdbus::ProxyInterfaces<org::memprotd1::Manager_proxy, sdbus::Properties_proxy> {
public:
    explicit Client(const std::string& address)
        : ProxyInterfaces(sdbus::createSessionBusConnectionWithAddress(address), sdbus_compat::service_name(kBusName),
                          sdbus_compat::object_path(kObjectPath)) {
        registerProxy();
    }
    ~Client() { unregisterProxy(); }

    struct Signals {
        std::vector<std::pair<uint64_t, uint32_t>> plans;
        std::vector<std::pair<std::string, double>> pressure;
        std::vector<std::pair<bool, std::vector<std::string>>> reloads;
        std::vector<std::set<std::string>> changed;
    };
    Signals signals() {
        std::lock_guard lock(mu_);
        return sig_;
    }
    sdbus::IProxy& raw() { return getProxy(); }

private:
    void onPlanApplied(const uint64_t& ts, const uint32_t& writes) override {
        std::lock_guard lock(mu_);
        sig_.plans.emplace_back(ts, writes);
    }
    void onPressureChanged(const std::string& unit, const double& avg10) override {
        std::lock_guard lock(mu_);
        sig_.pressure.emplace_back(unit, avg10);
    }
    void onConfigReloaded(const bool& ok, const std::vector<std::string>& errors) override {
        std::lock_guard lock(mu_);
        sig_.reloads.emplace_back(ok, errors);
    }
    void onPropertiesChanged(const sdbus_compat::InterfaceName& iface,
                             const std::map<sdbus_compat::PropertyName, sdbus::Variant>& changed,
                             const std::vector<sdbus_compat::PropertyName>& invalidated) override {
        if (iface != kIface)
            return;
        std::set<std::string> names(invalidated.begin(), invalidated.end());
        for (const auto& [k, v] : changed) names.insert(k);
        std::lock_guard lock(mu_);
        sig_.changed.push_back(names);
    }

    std::mutex mu_;
    Signals sig_;
};

class DbusTest : public ::testing::Test {
protected:
    DbusTest() {
        spdlog::set_default_logger(
            std::make_shared<spdlog::logger>("null", std::make_shared<spdlog::sinks::null_sink_mt>()));
        conf("memprotd.conf", "[Daemon]\nMode=enforce\nInterval=5s\n");
        conf("policy.d/50-workload.conf", "[Match]\nSlice=workload.slice\n[Protection]\nWeight=400\n");
        tree_.add_cgroup("workload.slice", anon_heavy_spec(4 * kGiB));
        tree_.add_cgroup("batch.slice", cache_heavy_spec(6 * kGiB));
        tree_.set("workload.slice", "memory.pressure",
                  "some avg10=12.50 avg60=3.00 avg300=1.00 total=123456\n"
                  "full avg10=1.00 avg60=0.50 avg300=0.10 total=2345\n");

        ManagerOptions opt;
        opt.sampler = tree_.sampler_options();
        opt.config_dirs = {tree_.base() + "/etc"};
        opt.runtime_dir = tree_.base() + "/run";
        opt.psi_triggers = false;
        opt.notify = false;
        opt.now_us = [this] { return clock_us_; };
        auto actuator = std::make_unique<RecordingActuator>();
        // systemd writes what it is told into the cgroup.
        actuator->after_set = [this](const std::string& unit, const UnitProtection& v) {
            tree_.apply_protection(unit, v.memory_low, v.memory_min);
        };
        manager_ = std::make_unique<Manager>(std::move(opt), probe_features(tree_.probe_roots()), std::move(actuator));
        const std::vector<Error> errors = manager_->init();
        EXPECT_TRUE(errors.empty()) << (errors.empty() ? "" : errors.front().to_string());

        server_ = sdbus::createSessionBusConnectionWithAddress(bus_.address());
        adaptor_ = std::make_unique<ManagerAdaptor>(*server_, *manager_, auth_,
                                                    MemoryLock{false, "mlockall: Cannot allocate memory"});
        sdbus_compat::request_name(*server_, kBusName);
        source_ = std::make_unique<BusEventSource>(*server_, manager_->event());
        source_->on_processed = [this](uint64_t cpu_us) { manager_->add_bus_cpu(cpu_us); };
        EXPECT_EQ(source_->attach(), 0);
    }

    ~DbusTest() override {
        source_.reset();
        adaptor_.reset();
    }

    void conf(const std::string& relpath, const std::string& text) { tree_.write("etc/" + relpath, text); }

    // Runs the server side until `done` or the timeout.
    bool pump_until(const std::function<bool()>& done, std::chrono::milliseconds timeout = kTimeout) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (!done()) {
            if (std::chrono::steady_clock::now() > deadline)
                return false;
            sd_event_run(manager_->event(), 10'000);
        }
        return true;
    }
    void pump_for(std::chrono::milliseconds d) {
        pump_until([] { return false; }, d);
    }

    // Runs `f` (a blocking client call) on another thread while serving.
    template <typename F>
    auto call(F&& f) -> decltype(f()) {
        auto fut = std::async(std::launch::async, std::forward<F>(f));
        pump_until([&] { return fut.wait_for(std::chrono::seconds(0)) == std::future_status::ready; });
        return fut.get();
    }

    // The D-Bus error name `f` fails with, or "" when it succeeds.
    template <typename F>
    std::string error_of(F&& f, std::string* message = nullptr) {
        try {
            call(std::forward<F>(f));
        } catch (const sdbus::Error& e) {
            if (message)
                *message = e.getMessage();
            return e.getName();
        }
        return "";
    }

    TickResult tick() {
        TickResult r = manager_->run_once();
        clock_us_ += 5 * kSecond;
        return r;
    }

    // The caller's proxy. Signals are observed on a second connection that makes no
    // blocking calls: a blocking call reads the signals sent before its reply into its
    // connection's queue, where the proxy's loop may not see them.
    Client& client() {
        if (!client_) {
            listener_ = std::make_unique<Client>(bus_.address());
            client_ = std::make_unique<Client>(bus_.address());
        }
        return *client_;
    }
    Client::Signals signals() { return listener_ ? listener_->signals() : Client::Signals{}; }

    ProcessResult ctl(const std::vector<std::string>& args, const std::string& address = "") {
        std::vector<std::string> argv = {MEMPROTCTL_PATH};
        argv.insert(argv.end(), args.begin(), args.end());
        Child c(argv, {"MEMPROTD_BUS_ADDRESS=" + (address.empty() ? bus_.address() : address), "NO_COLOR=1"},
                bus_.dir());
        EXPECT_TRUE(pump_until([&] { return c.poll(); })) << "memprotctl timed out";
        return c.result();
    }

    FakeTree tree_;
    PrivateBus bus_;
    int64_t clock_us_ = 1000 * kSecond;
    FixedAuthoriser auth_{true};
    std::unique_ptr<Manager> manager_;
    std::unique_ptr<sdbus::IConnection> server_;
    std::unique_ptr<ManagerAdaptor> adaptor_;
    std::unique_ptr<BusEventSource> source_;
    std::unique_ptr<Client> listener_;
    std::unique_ptr<Client> client_;
};

// --- properties ---

TEST_F(DbusTest, ServesEveryPropertyFromTheManager) {
    tick();
    Client& c = client();
    const auto props = call([&] { return sdbus_compat::to_string_map(c.GetAll(kIface)); });
    const Plan& plan = manager_->last_plan();
    EXPECT_EQ(props.at("Version").get<std::string>(), MEMPROTD_VERSION);
    EXPECT_EQ(props.at("Mode").get<std::string>(), "enforce");
    EXPECT_EQ(props.at("MemoryTotal").get<uint64_t>(), 16 * kGiB);
    EXPECT_EQ(props.at("Budget").get<uint64_t>(), plan.budget);
    EXPECT_GT(plan.budget, 0U);
    EXPECT_EQ(props.at("BudgetConfigured").get<uint64_t>(), plan.budget_configured);
    EXPECT_EQ(props.at("ProtectedTotal").get<uint64_t>(), plan.protected_total);
    EXPECT_EQ(props.at("DemandTotal").get<uint64_t>(), plan.demand_total);
    EXPECT_EQ(props.at("ManagedSlices").get<uint32_t>(), plan.slices.size());
    EXPECT_GT(props.at("LastPlanTimestamp").get<uint64_t>(), 1'600'000'000ULL * 1'000'000);
    EXPECT_EQ(props.at("LastPlanTimestampMonotonic").get<uint64_t>(),
              static_cast<uint64_t>(plan.timestamp_us));
    EXPECT_EQ(props.at("Interval").get<uint64_t>(), 5'000'000U);
    EXPECT_EQ(props.at("TotalWrites").get<uint64_t>(), manager_->total_writes());
    EXPECT_EQ(props.at("ConfigFiles").get<std::vector<std::string>>(), manager_->config().files);

    const auto f = props.at("KernelFeatures").get<std::map<std::string, sdbus::Variant>>();
    for (const char* key : {"cgroup2", "memory_controller", "memory_recursiveprot", "psi", "mglru_present",
                            "mglru_enabled", "lru_gen_debugfs", "memory_reclaim"})
        EXPECT_TRUE(f.contains(key) && f.at(key).containsValueOfType<bool>()) << key;
    EXPECT_TRUE(f.at("cgroup2").get<bool>());
    EXPECT_EQ(f.at("mglru_flags").get<uint32_t>(), 7U);
    EXPECT_EQ(f.at("kernel_release").get<std::string>(), "6.1.0-18-amd64");
    EXPECT_EQ(f.at("page_size").get<uint64_t>(), 4096U);
}

TEST_F(DbusTest, PropertiesAreZeroBeforeTheFirstPlan) {
    Client& c = client();
    EXPECT_EQ(call([&] { return c.Budget(); }), 0U);
    EXPECT_EQ(call([&] { return c.ManagedSlices(); }), 0U);
    EXPECT_EQ(call([&] { return c.LastPlanTimestamp(); }), 0U);
    EXPECT_TRUE(call([&] { return c.ListSlices(); }).empty());
    EXPECT_TRUE(call([&] { return c.GetPlan(); }).empty());
    std::string msg;
    EXPECT_EQ(error_of([&] { return c.Explain("workload.slice"); }, &msg),
              "org.freedesktop.DBus.Error.InvalidArgs");
    EXPECT_NE(msg.find("no plan"), std::string::npos) << msg;
}

// --- read-only methods ---

TEST_F(DbusTest, ListSlicesHasOneRowPerPlanEntry) {
    tick();
    const auto rows = call([&] { return client().ListSlices(); });
    const Plan& plan = manager_->last_plan();
    ASSERT_EQ(rows.size(), plan.slices.size());
    for (size_t i = 0; i < rows.size(); ++i) {
        const Explanation& x = plan.slices[i].x;
        const SliceRow r = slice_row_from_wire(rows[i]);
        EXPECT_EQ(r.unit, plan.slices[i].unit);
        EXPECT_EQ(r.cgroup, plan.slices[i].cgroup);
        EXPECT_EQ(r.current, x.current);
        EXPECT_EQ(r.working_set, x.working_set);
        EXPECT_EQ(r.cheap_cache, x.cheap_cache);
        EXPECT_EQ(r.demand, x.demand);
        EXPECT_EQ(r.memory_low, x.prior.memory_low);
        EXPECT_EQ(r.memory_min, x.prior.memory_min);
        EXPECT_EQ(r.target_memory_low, x.target_low);
        EXPECT_EQ(r.target_memory_min, x.target_min);
        EXPECT_DOUBLE_EQ(r.psi_some, x.psi_some);
    }
}

TEST_F(DbusTest, GetSliceReturnsTheSlicesJsonFieldsAsVariants) {
    tick();
    const auto props = call([&] { return client().GetSlice("workload.slice"); });
    const PlanEntry* e = manager_->last_plan().find("workload.slice");
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(props.at("unit").get<std::string>(), "workload.slice");
    EXPECT_EQ(props.at("cgroup").get<std::string>(), e->cgroup);
    EXPECT_EQ(props.at("current").get<uint64_t>(), e->x.current);
    EXPECT_EQ(props.at("working_set").get<uint64_t>(), e->x.working_set);
    EXPECT_EQ(props.at("weight").get<uint64_t>(), 400U);
    EXPECT_EQ(props.at("bound").get<std::string>(), std::string(bound_name(e->x.bound)));
    EXPECT_TRUE(props.at("refault_ratio").containsValueOfType<double>());
    EXPECT_EQ(props.at("policy_sources").get<std::vector<std::string>>(), e->sources());
    EXPECT_FALSE(props.at("runtime_policy").get<bool>());
    EXPECT_FALSE(props.contains("parent"));  // top level: JSON null, left out
}

TEST_F(DbusTest, UnknownOrOversizedUnitsAreInvalidArgs) {
    tick();
    Client& c = client();
    std::string msg;
    EXPECT_EQ(error_of([&] { return c.GetSlice("nope.slice"); }, &msg),
              "org.freedesktop.DBus.Error.InvalidArgs");
    EXPECT_NE(msg.find("nope.slice"), std::string::npos) << msg;
    EXPECT_EQ(error_of([&] { return c.Explain("nope.slice"); }), "org.freedesktop.DBus.Error.InvalidArgs");
    EXPECT_EQ(error_of([&] { return c.GetSlice(std::string(300, 'a') + ".slice"); }, &msg),
              "org.freedesktop.DBus.Error.InvalidArgs");
    EXPECT_NE(msg.find("256"), std::string::npos) << msg;
}

TEST_F(DbusTest, ExplainIsTheEnginesText) {
    tick();
    const std::string text = call([&] { return client().Explain("batch.slice"); });
    const Plan& plan = manager_->last_plan();
    EXPECT_EQ(text, explain_text(plan, *plan.find("batch.slice")));
    EXPECT_FALSE(text.empty());
}

TEST_F(DbusTest, ExplainSaysWhyKubeletsSliceIsNotManaged) {
    tree_.add_cgroup("kubepods.slice", anon_heavy_spec(kGiB));
    tick();
    const Plan& plan = manager_->last_plan();
    EXPECT_EQ(plan.find("kubepods.slice"), nullptr);
    ASSERT_NE(plan.find_unmanaged("kubepods.slice"), nullptr);
    const ProcessResult r = ctl({"explain", "kubepods.slice"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, explain_unmanaged(*plan.find_unmanaged("kubepods.slice")));
    EXPECT_EQ(r.out.rfind("kubepods.slice is not managed: kubelet owns memory.min and memory.low", 0), 0u) << r.out;
}

TEST_F(DbusTest, GetPlanListsTheWritesInOrder) {
    tick();
    const auto writes = call([&] { return client().GetPlan(); });
    const Plan& plan = manager_->last_plan();
    ASSERT_EQ(writes.size(), plan.writes.size());
    ASSERT_FALSE(writes.empty());
    for (size_t i = 0; i < writes.size(); ++i) {
        const WriteRow w = WriteRow::from_wire(writes[i]);
        EXPECT_EQ(w.unit, plan.writes[i].unit);
        EXPECT_EQ(w.memory_low, plan.writes[i].values.memory_low);
        EXPECT_EQ(w.memory_min, plan.writes[i].values.memory_min);
        EXPECT_EQ(w.decrease, plan.writes[i].decrease);
    }
}

TEST_F(DbusTest, DumpIsJsonWithPlanFeaturesAndConfig) {
    tick();
    const json j = json::parse(call([&] { return client().Dump(); }));
    EXPECT_EQ(j.at("version"), MEMPROTD_VERSION);
    EXPECT_EQ(j.at("mode"), "enforce");
    EXPECT_EQ(j.at("features").at("kernel_release"), "6.1.0-18-amd64");
    EXPECT_EQ(j.at("config").at("daemon").at("interval_us"), 5'000'000);
    EXPECT_EQ(j.at("plan").at("slices").size(), manager_->last_plan().slices.size());
    EXPECT_EQ(j.at("plan").at("budget"), manager_->last_plan().budget);
    EXPECT_EQ(j.at("total_writes"), manager_->total_writes());
    EXPECT_EQ(j.at("memory_lock"), json({{"locked", false}, {"reason", "mlockall: Cannot allocate memory"}}));
    const json& a = j.at("working_set_aging");
    EXPECT_EQ(a.at("enabled"), manager_->config().daemon.working_set_aging);
    EXPECT_EQ(a.at("aged"), manager_->aging().aged);
    EXPECT_EQ(a.at("max_write_us"), manager_->aging().max_write_us);
    EXPECT_EQ(a.at("total_write_us"), manager_->aging().total_write_us);
    EXPECT_EQ(a.at("failed"), manager_->aging().failed);
    const json& t = j.at("ticks");
    EXPECT_EQ(t.at("total"), 1u);
    EXPECT_EQ(t.at("early"), 0u);
    const auto us = [&](const json& o, const char* k) { return o.at(k).get<uint64_t>(); };
    EXPECT_GE(us(t, "cpu_us"), us(t, "sample_cpu_us") + us(t, "systemd_cpu_us") + us(t, "aging_cpu_us") +
                                   us(t, "trim_cpu_us") + us(t, "signal_cpu_us") + us(t, "engine_cpu_us") +
                                   us(t, "log_cpu_us") + us(t, "record_cpu_us"));
    // Trimming: its setting, the mechanism this kernel gives and why, its counters.
    const json& tr = j.at("trimming");
    EXPECT_EQ(tr.at("setting"), "no");  // the default
    EXPECT_EQ(tr.at("mechanism"), std::string(trim_mechanism_name(manager_->trim_choice().mechanism)));
    EXPECT_EQ(tr.at("why"), manager_->trim_choice().why);
    EXPECT_EQ(tr.at("trims"), manager_->trims().trims);
    // The whole process's CPU covers the loop thread's ticks and the calls it served.
    EXPECT_GE(us(t, "process_cpu_us"), us(t, "cpu_us") + us(t, "bus_cpu_us"));
    EXPECT_GT(us(t, "uptime_us"), 0u);
    // Serving calls costs CPU, and it is counted.
    for (int i = 0; i < 3; ++i)
        call([&] { return client().Dump(); });
    const json again = json::parse(call([&] { return client().Dump(); }));
    EXPECT_GT(us(again.at("ticks"), "bus_cpu_us"), us(t, "bus_cpu_us"));
}

// --- mutating methods ---

TEST_F(DbusTest, SetModeSwitchesAndAnnouncesTheChange) {
    tick();
    Client& c = client();
    call([&] {
        c.SetMode("dry-run");
        return 0;
    });
    EXPECT_EQ(manager_->mode(), memprotd::Mode::DryRun);
    EXPECT_EQ(call([&] { return c.Mode(); }), "dry-run");
    EXPECT_TRUE(pump_until([&] {
        for (const auto& names : signals().changed)
            if (names.contains("Mode"))
                return true;
        return false;
    }));
    call([&] {
        c.SetMode("paused");
        return 0;
    });
    EXPECT_EQ(manager_->mode(), memprotd::Mode::Paused);
}

TEST_F(DbusTest, SetModeRejectsUnknownModes) {
    std::string msg;
    EXPECT_EQ(error_of(
                  [&] {
                      client().SetMode("turbo");
                      return 0;
                  },
                  &msg),
              "org.freedesktop.DBus.Error.InvalidArgs");
    EXPECT_NE(msg.find("turbo"), std::string::npos);
    EXPECT_EQ(manager_->mode(), memprotd::Mode::Enforce);
}

TEST_F(DbusTest, SetSlicePolicyMergesKeysIntoTheRuntimePolicy) {
    tick();
    Client& c = client();
    call([&] {
        c.SetSlicePolicy("batch.slice", {{"Weight", sdbus::Variant(uint32_t{250})},
                                         {"MinProtection", sdbus::Variant(std::string("512M"))}});
        return 0;
    });
    call([&] {
        c.SetSlicePolicy("batch.slice", {{"Floor", sdbus::Variant(uint64_t{256 * kMiB})},
                                         {"MaxProtection", sdbus::Variant(std::string("75%"))},
                                         {"Manage", sdbus::Variant(true)}});
        return 0;
    });
    const auto& o = manager_->slice_policy_overrides();
    ASSERT_TRUE(o.contains("batch.slice"));
    const SlicePolicy& p = o.at("batch.slice");
    EXPECT_EQ(p.weight, 250U);
    EXPECT_EQ(p.min_protection.to_string(), "512M");
    EXPECT_EQ(p.max_protection.to_string(), "75%");
    EXPECT_EQ(p.floor.bytes, 256 * kMiB);
    EXPECT_EQ(p.manage, true);

    // An empty string unsets one key and keeps the others.
    call([&] {
        c.SetSlicePolicy("batch.slice", {{"MinProtection", sdbus::Variant(std::string())}});
        return 0;
    });
    EXPECT_FALSE(manager_->slice_policy_overrides().at("batch.slice").min_protection.set());
    EXPECT_EQ(manager_->slice_policy_overrides().at("batch.slice").weight, 250U);

    tick();
    EXPECT_TRUE(call([&] { return c.GetSlice("batch.slice"); }).at("runtime_policy").get<bool>());
}

TEST_F(DbusTest, SetSlicePolicyRejectsBadInputAndChangesNothing) {
    Client& c = client();
    using Dict = std::map<std::string, sdbus::Variant>;
    struct Case {
        std::string unit;
        Dict policy;
        std::string expect;  // part of the message
    };
    Dict too_many;
    for (int i = 0; i < 17; ++i) too_many.emplace("Key" + std::to_string(i), sdbus::Variant(uint32_t{1}));
    const std::vector<Case> cases = {
        {"batch.slice", {{"Colour", sdbus::Variant(std::string("red"))}}, "unknown key"},
        {"batch.slice", {{"Weight", sdbus::Variant(uint32_t{0})}}, "out of range"},
        {"batch.slice", {{"Weight", sdbus::Variant(uint32_t{20000})}}, "out of range"},
        {"batch.slice", {{"Weight", sdbus::Variant(std::string("heavy"))}}, "Weight"},
        {"batch.slice", {{"Floor", sdbus::Variant(std::string("12Q"))}}, "Floor"},
        {"batch.slice", {{"MaxProtection", sdbus::Variant(std::string("150%"))}}, "100%"},
        {"batch.slice", {{"Floor", sdbus::Variant(true)}}, "Floor"},
        {"batch.slice", {{"Manage", sdbus::Variant(std::string("perhaps"))}}, "Manage"},
        {"batch.slice",
         {{"MinProtection", sdbus::Variant(std::string("2G"))},
          {"MaxProtection", sdbus::Variant(std::string("1G"))}},
         "more than"},
        {"batch.slice", {}, "no keys"},
        {"batch.slice", too_many, "too many"},
        {"web.service", {{"Weight", sdbus::Variant(uint32_t{5})}}, "not a slice"},
        {"*.slice", {{"Weight", sdbus::Variant(uint32_t{5})}}, "not a valid unit name"},
        {"../x.slice", {{"Weight", sdbus::Variant(uint32_t{5})}}, "not a valid unit name"},
        {std::string(300, 'a') + ".slice", {{"Weight", sdbus::Variant(uint32_t{5})}}, "256"},
    };
    for (const Case& k : cases) {
        std::string msg;
        EXPECT_EQ(error_of(
                      [&] {
                          c.SetSlicePolicy(k.unit, k.policy);
                          return 0;
                      },
                      &msg),
                  "org.freedesktop.DBus.Error.InvalidArgs")
            << k.expect;
        EXPECT_NE(msg.find(k.expect), std::string::npos) << msg;
    }
    EXPECT_TRUE(manager_->slice_policy_overrides().empty());
}

TEST_F(DbusTest, ResetSlicePolicyDropsTheOverride) {
    Client& c = client();
    call([&] {
        c.SetSlicePolicy("batch.slice", {{"Weight", sdbus::Variant(uint32_t{7})}});
        return 0;
    });
    ASSERT_TRUE(manager_->slice_policy_overrides().contains("batch.slice"));
    call([&] {
        c.ResetSlicePolicy("batch.slice");
        return 0;
    });
    EXPECT_TRUE(manager_->slice_policy_overrides().empty());
    std::string msg;
    EXPECT_EQ(error_of(
                  [&] {
                      c.ResetSlicePolicy("batch.slice");
                      return 0;
                  },
                  &msg),
              "org.freedesktop.DBus.Error.InvalidArgs");
    EXPECT_NE(msg.find("no runtime policy"), std::string::npos) << msg;
}

TEST_F(DbusTest, ReloadAppliesANewPolicyAndSignalsIt) {
    Client& c = client();
    conf("policy.d/60-batch.conf", "[Match]\nSlice=batch.slice\n[Protection]\nWeight=50\n");
    call([&] {
        c.Reload();
        return 0;
    });
    EXPECT_EQ(manager_->config().policy_for("batch.slice").weight, 50U);
    EXPECT_TRUE(pump_until([&] { return !signals().reloads.empty(); }));
    const auto s = signals();
    ASSERT_EQ(s.reloads.size(), 1U);
    EXPECT_TRUE(s.reloads[0].first);
    EXPECT_TRUE(s.reloads[0].second.empty());
}

TEST_F(DbusTest, ReloadOfABadConfigFailsWithFileAndLineAndKeepsTheOldOne) {
    Client& c = client();
    conf("memprotd.conf.d/50-bad.conf", "[Daemon]\nInterval=7s\nHeadroom=lots\n");
    std::string msg;
    EXPECT_EQ(error_of(
                  [&] {
                      c.Reload();
                      return 0;
                  },
                  &msg),
              "org.memprotd1.Error.ConfigInvalid");
    EXPECT_NE(msg.find("50-bad.conf:3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Headroom"), std::string::npos) << msg;
    EXPECT_EQ(manager_->config().daemon.interval_us, 5'000'000U);
    EXPECT_TRUE(pump_until([&] { return !signals().reloads.empty(); }));
    const auto s = signals();
    ASSERT_EQ(s.reloads.size(), 1U);
    EXPECT_FALSE(s.reloads[0].first);
    ASSERT_FALSE(s.reloads[0].second.empty());
    EXPECT_NE(s.reloads[0].second[0].find("50-bad.conf:3"), std::string::npos);
}

// `systemctl reload` is SIGHUP, not the method: its failures are signalled too.
TEST_F(DbusTest, AFailedSighupReloadIsSignalledWithItsErrors) {
    client();  // subscribes to the signals
    conf("memprotd.conf.d/50-bad.conf", "[Daemon]\nInterval=banana\n");
    EXPECT_FALSE(manager_->reload().empty());  // what the SIGHUP handler calls
    EXPECT_TRUE(pump_until([&] { return !signals().reloads.empty(); }));
    const auto s = signals();
    ASSERT_EQ(s.reloads.size(), 1U);
    EXPECT_FALSE(s.reloads[0].first);
    ASSERT_EQ(s.reloads[0].second.size(), 1U);
    EXPECT_NE(s.reloads[0].second[0].find("50-bad.conf:2"), std::string::npos) << s.reloads[0].second[0];
}

TEST_F(DbusTest, DeniedCallsFailWithAccessDeniedAndChangeNothing) {
    tick();
    Client& c = client();
    call([&] {
        c.SetSlicePolicy("batch.slice", {{"Weight", sdbus::Variant(uint32_t{7})}});
        return 0;
    });
    auth_.set(false);
    const int checks_before = auth_.checks;
    conf("policy.d/60-batch.conf", "[Match]\nSlice=batch.slice\n[Protection]\nWeight=50\n");
    const std::string denied = "org.freedesktop.DBus.Error.AccessDenied";
    EXPECT_EQ(error_of([&] {
                  c.Reload();
                  return 0;
              }),
              denied);
    EXPECT_EQ(error_of([&] {
                  c.SetMode("paused");
                  return 0;
              }),
              denied);
    EXPECT_EQ(error_of([&] {
                  c.SetSlicePolicy("batch.slice", {{"Weight", sdbus::Variant(uint32_t{9})}});
                  return 0;
              }),
              denied);
    EXPECT_EQ(error_of([&] {
                  c.ResetSlicePolicy("batch.slice");
                  return 0;
              }),
              denied);
    EXPECT_EQ(auth_.checks - checks_before, 4);
    EXPECT_EQ(manager_->mode(), memprotd::Mode::Enforce);
    EXPECT_EQ(manager_->slice_policy_overrides().at("batch.slice").weight, 7U);
    EXPECT_EQ(manager_->config().policy_for("batch.slice").weight, 7U);  // no reload happened
    // Reading stays open.
    EXPECT_EQ(call([&] { return c.ListSlices(); }).size(), manager_->last_plan().slices.size());
    EXPECT_EQ(call([&] { return c.Mode(); }), "enforce");
}

// --- signals ---

TEST_F(DbusTest, PlanAppliedAndPropertiesChangedFireAfterATick) {
    client();  // subscribes to the signals
    pump_for(std::chrono::milliseconds(50));
    const TickResult r = tick();
    ASSERT_TRUE(pump_until([&] { return !signals().plans.empty() && !signals().changed.empty(); }));
    const auto s = signals();
    EXPECT_EQ(s.plans[0].second, r.applied);
    EXPECT_GT(r.applied, 0U);
    EXPECT_GT(s.plans[0].first, 0U);
    std::set<std::string> changed;
    for (const auto& names : s.changed) changed.insert(names.begin(), names.end());
    EXPECT_TRUE(changed.contains("Budget"));
    EXPECT_TRUE(changed.contains("LastPlanTimestamp"));
}

TEST_F(DbusTest, PressureChangedCarriesTheSlicesAvg10) {
    tick();
    client();  // subscribes to the signals
    pump_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(manager_->on_pressure);
    manager_->on_pressure("workload.slice");  // what a fired PSI trigger does
    ASSERT_TRUE(pump_until([&] { return !signals().pressure.empty(); }));
    const auto s = signals();
    EXPECT_EQ(s.pressure[0].first, "workload.slice");
    EXPECT_DOUBLE_EQ(s.pressure[0].second, 12.5);
}

// --- introspection ---

// Members of org.memprotd1.Manager as "kind name sig" lines, sorted, from
// an introspection document: comments and annotations do not count.
std::vector<std::string> members(std::string xml) {
    xml = std::regex_replace(xml, std::regex("<!--[\\s\\S]*?-->"), "");
    const auto start = xml.find("<interface name=\"org.memprotd1.Manager\"");
    EXPECT_NE(start, std::string::npos);
    xml = xml.substr(start, xml.find("</interface>", start) - start);
    std::vector<std::string> out;
    std::string current;
    const std::regex tag("<(/?)(method|signal|property|arg)\\b([^>]*?)(/?)>");
    const std::regex attr("(\\w+)=\"([^\"]*)\"");
    for (std::sregex_iterator it(xml.begin(), xml.end(), tag), end; it != end; ++it) {
        const std::string closing = (*it)[1], kind = (*it)[2], attrs = (*it)[3], self_closing = (*it)[4];
        std::map<std::string, std::string> a;
        for (std::sregex_iterator at(attrs.begin(), attrs.end(), attr); at != end; ++at)
            a[(*at)[1]] = (*at)[2];
        if (!closing.empty()) {
            if (kind == "method" || kind == "signal") {
                out.push_back(current + ")");
                current.clear();
            }
        } else if (kind == "property") {
            out.push_back("property " + a["name"] + " " + a["type"] + " " + a["access"]);
        } else if (kind == "arg") {
            current +=
                " " + a["direction"] + (a["direction"].empty() ? "" : ":") + a["type"] + ":" + a["name"];
        } else {
            current = kind + " " + a["name"] + "(";
            if (!self_closing.empty()) {
                out.push_back(current + ")");
                current.clear();
            }
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

TEST_F(DbusTest, ServedIntrospectionMatchesTheInterfaceXml) {
    std::string served;
    Client& c = client();
    call([&] {
        c.raw()
            .callMethod("Introspect")
            .onInterface("org.freedesktop.DBus.Introspectable")
            .storeResultsTo(served);
        return 0;
    });
    const auto want = members(read_text(DBUS_XML_PATH));
    EXPECT_GT(want.size(), 20U);
    EXPECT_EQ(members(served), want);
}

std::string squash_whitespace(const std::string& s) {
    return std::regex_replace(std::regex_replace(s, std::regex("\\s+"), " "), std::regex("^ | $"), "");
}

TEST_F(DbusTest, BusIntrospectFlagPrintsTheInterfaceXml) {
    Child c({MEMPROTD_PATH, "--bus-introspect"}, {}, bus_.dir());
    ASSERT_TRUE(pump_until([&] { return c.poll(); }));
    const ProcessResult r = c.result();
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(squash_whitespace(r.out), squash_whitespace(read_text(DBUS_XML_PATH)));
}

// --- memprotctl against the bus ---

TEST_F(DbusTest, CtlStatusShowsFeaturesBudgetAndATableOfSlices) {
    tick();
    const ProcessResult r = ctl({"status"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("mode enforce"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("6.1.0-18-amd64"), std::string::npos);
    EXPECT_NE(r.out.find("16G total"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(format_bytes(manager_->last_plan().budget)), std::string::npos);
    EXPECT_NE(r.out.find("WORKING SET"), std::string::npos);
    EXPECT_NE(r.out.find("workload.slice"), std::string::npos);
    EXPECT_EQ(r.out.find("\x1b["), std::string::npos);  // not a terminal: no colour
    // Working-set aging, from Dump: on by default, nothing failed.
    EXPECT_NE(r.out.find("Aging:    "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" 0 tick(s) failed"), std::string::npos) << r.out;
    // The ticks and their cost, from Dump: one tick so far, none early.
    EXPECT_NE(r.out.find("Ticks:    1 since start (0 early"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("CPU:      "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("% of one CPU over"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("D-Bus calls served"), std::string::npos) << r.out;
    // Whether the daemon's pages are locked, from Dump: this one was told not.
    EXPECT_NE(r.out.find("Locked:   own memory not locked, reclaim may page memprotd out: mlockall: Cannot allocate "
                         "memory\n"),
              std::string::npos)
        << r.out;
    // The private bus has no systemd: systemd-oomd's state is unknown, and says why.
    EXPECT_NE(r.out.find("OOM:      systemd-oomd unknown (systemd did not answer on the bus at "), std::string::npos)
        << r.out;

    const ProcessResult j = ctl({"status", "--json"});
    ASSERT_EQ(j.exit_code, 0) << j.err;
    const json s = json::parse(j.out);
    EXPECT_EQ(s.at("mode"), "enforce");
    EXPECT_EQ(s.at("memory_lock").at("locked"), false);
    EXPECT_EQ(s.at("memory_lock").at("reason"), "mlockall: Cannot allocate memory");
    EXPECT_EQ(s.at("budget"), manager_->last_plan().budget);
    EXPECT_EQ(s.at("kernel_features").at("mglru_flags"), 7);
    EXPECT_EQ(s.at("slices").size(), manager_->last_plan().slices.size());
    EXPECT_TRUE(s.at("slices")[0].contains("working_set"));
    EXPECT_EQ(s.at("working_set_aging").at("enabled"), manager_->config().daemon.working_set_aging);
    EXPECT_EQ(s.at("working_set_aging").at("aged"), manager_->aging().aged);
    EXPECT_EQ(s.at("ticks").at("total"), manager_->tick_stats().ticks);
    EXPECT_EQ(s.at("systemd_oomd").at("known"), false);
    EXPECT_FALSE(s.at("systemd_oomd").at("error").get<std::string>().empty());
}

TEST_F(DbusTest, CtlListShowExplainAndPlanPrintTextAndJson) {
    tick();
    const Plan& plan = manager_->last_plan();
    ProcessResult r = ctl({"list"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("batch.slice"), std::string::npos);
    r = ctl({"list", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out).size(), plan.slices.size());

    r = ctl({"show", "workload.slice"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("working_set"), std::string::npos);
    r = ctl({"show", "workload.slice", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out).at("current"), plan.find("workload.slice")->x.current);

    r = ctl({"explain", "workload.slice"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(explain_text(plan, *plan.find("workload.slice")).substr(0, 20)), std::string::npos);
    r = ctl({"explain", "workload.slice", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out).at("unit"), "workload.slice");
    EXPECT_TRUE(json::parse(r.out).at("managed_oom").is_null()) << "no systemd on the private bus";

    r = ctl({"plan"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(plan.writes.at(0).unit), std::string::npos);
    r = ctl({"plan", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out).size(), plan.writes.size());

    r = ctl({"dump"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(json::parse(r.out).contains("plan"));

    r = ctl({"show", "nope.slice"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("nope.slice"), std::string::npos) << r.err;
}

TEST_F(DbusTest, CtlMetricsIsOpenMetricsEndingWithEof) {
    tick();
    const ProcessResult r = ctl({"metrics"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const PlanEntry* e = manager_->last_plan().find("workload.slice");
    EXPECT_NE(r.out.find("# TYPE memprotd_slice_memory_low_bytes gauge\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("memprotd_slice_memory_current_bytes{unit=\"workload.slice\"} " +
                         std::to_string(e->x.current) + "\n"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("memprotd_budget_bytes " + std::to_string(manager_->last_plan().budget) + "\n"),
              std::string::npos);
    EXPECT_NE(r.out.find("memprotd_writes_total "), std::string::npos);
    EXPECT_TRUE(r.out.ends_with("# EOF\n"));
}

TEST_F(DbusTest, CtlModeSetAndResetChangeTheDaemon) {
    tick();
    ProcessResult r = ctl({"mode", "dry-run"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(manager_->mode(), memprotd::Mode::DryRun);

    r = ctl({"set", "batch.slice", "Weight=300", "Floor=1G", "MaxProtection=50%", "Manage=yes"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const SlicePolicy& p = manager_->slice_policy_overrides().at("batch.slice");
    EXPECT_EQ(p.weight, 300U);
    EXPECT_EQ(p.floor.to_string(), "1G");
    EXPECT_EQ(p.max_protection.to_string(), "50%");
    EXPECT_EQ(p.manage, true);

    r = ctl({"set", "batch.slice", "Colour=red"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("unknown key"), std::string::npos) << r.err;
    r = ctl({"set", "batch.slice", "Weight=0"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("out of range"), std::string::npos) << r.err;

    r = ctl({"reset", "batch.slice"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(manager_->slice_policy_overrides().empty());

    r = ctl({"mode", "turbo"});
    EXPECT_EQ(r.exit_code, 2);  // usage error, caught before the bus
}

// A slice another writer changed shows in status and explain, and
// memprotctl reset takes it back although it has no runtime policy.
TEST_F(DbusTest, CtlShowsAYieldedSliceAndResetTakesItBack) {
    int ticks = 0;
    while (ticks++ < 20 && tick().applied > 0) {
        // until the protection settles
    }
    ASSERT_NE(manager_->last_plan().find("workload.slice"), nullptr);
    tree_.set("workload.slice", "memory.low", 100 * kMiB);  // kubelet
    tick();
    tick();
    ASSERT_EQ(manager_->yielded().size(), 1U);
    ProcessResult r = ctl({"status"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("Yielded:  workload.slice: another writer set memory.low 100M"), std::string::npos) << r.out;
    r = ctl({"status", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out).at("yielded").at(0).at("memory_low"), 100 * kMiB);
    r = ctl({"explain", "workload.slice"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("left to another writer"), std::string::npos) << r.out;

    r = ctl({"reset", "workload.slice"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(manager_->yielded().empty());
    r = ctl({"reset", "workload.slice"});
    EXPECT_EQ(r.exit_code, 1) << "neither a runtime policy nor a yield";
    EXPECT_NE(r.err.find("not left to another writer"), std::string::npos) << r.err;
}

TEST_F(DbusTest, CtlReloadReportsConfigErrorsWithExitOne) {
    ProcessResult r = ctl({"reload"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    conf("memprotd.conf.d/50-bad.conf", "[Daemon]\nHeadroom=lots\n");
    r = ctl({"reload"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("50-bad.conf:2"), std::string::npos) << r.err;
}

TEST_F(DbusTest, CtlReportsPermissionDeniedWithExitOne) {
    auth_.set(false);
    const ProcessResult r = ctl({"mode", "paused"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("permission denied"), std::string::npos) << r.err;
    EXPECT_EQ(manager_->mode(), memprotd::Mode::Enforce);
}

TEST_F(DbusTest, CtlExitsWithThreeWhenNobodyOwnsTheName) {
    PrivateBus empty;
    for (const char* verb : {"status", "list", "metrics", "reload"}) {
        const ProcessResult r = ctl({verb}, empty.address());
        EXPECT_EQ(r.exit_code, 3) << verb << ": " << r.err;
        EXPECT_NE(r.err.find("memprotd is not running"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("systemctl start memprotd"), std::string::npos) << r.err;
    }
    const ProcessResult r = ctl({"status"}, "unix:path=/nonexistent/bus");
    EXPECT_EQ(r.exit_code, 3) << r.err;
}

TEST_F(DbusTest, CtlMonitorFollowsSignalsAsJsonLines) {
    tick();
    Child mon({MEMPROTCTL_PATH, "monitor", "--json", "--count", "2"},
              {"MEMPROTD_BUS_ADDRESS=" + bus_.address()}, bus_.dir());
    ASSERT_TRUE(pump_until([&] { return mon.err().find("Monitoring") != std::string::npos || mon.poll(); }))
        << mon.err();
    ASSERT_FALSE(mon.poll()) << mon.err();
    manager_->on_pressure("workload.slice");
    tick();
    ASSERT_TRUE(pump_until([&] { return mon.poll(); }));
    const ProcessResult r = mon.result();
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::istringstream lines(r.out);
    std::vector<json> events;
    for (std::string line; std::getline(lines, line);) events.push_back(json::parse(line));
    ASSERT_EQ(events.size(), 2U) << r.out;
    EXPECT_EQ(events[0].at("signal"), "PressureChanged");
    EXPECT_EQ(events[0].at("unit"), "workload.slice");
    EXPECT_EQ(events[1].at("signal"), "PlanApplied");
}

TEST_F(DbusTest, CtlMonitorStopsOnInterrupt) {
    Child mon({MEMPROTCTL_PATH, "monitor"}, {"MEMPROTD_BUS_ADDRESS=" + bus_.address()}, bus_.dir());
    ASSERT_TRUE(pump_until([&] { return mon.err().find("Monitoring") != std::string::npos || mon.poll(); }));
    tick();
    ASSERT_TRUE(pump_until([&] { return mon.out().find("plan applied") != std::string::npos; })) << mon.out();
    mon.signal(SIGINT);
    ASSERT_TRUE(pump_until([&] { return mon.poll(); }));
    EXPECT_EQ(mon.result().exit_code, 0);
}

// --- PolkitAuthoriser against a stand-in polkit on the private bus ---

// org.freedesktop.PolicyKit1.Authority with a fixed answer, recording what
// it was asked. Runs its own event-loop thread.
class FakePolkit {
public:
    using Subject = sdbus::Struct<std::string, std::map<std::string, sdbus::Variant>>;
    using Answer = sdbus::Struct<bool, bool, std::map<std::string, std::string>>;

    FakePolkit(const std::string& address, bool allow) : allow_(allow) {
        conn_ = sdbus::createSessionBusConnectionWithAddress(address);
        sdbus_compat::request_name(*conn_, "org.freedesktop.PolicyKit1");
        obj_ = sdbus_compat::make_object_with_method(
            *conn_, "/org/freedesktop/PolicyKit1/Authority", "org.freedesktop.PolicyKit1.Authority",
            "CheckAuthorization",
            [this](const Subject& subject, const std::string& action,
                                  const std::map<std::string, std::string>& /*details*/, uint32_t flags,
                                  const std::string& /*cancel_id*/) {
                std::lock_guard lock(mu_);
                kinds_.push_back(std::get<0>(subject));
                const auto& fields = std::get<1>(subject);
                names_.push_back(fields.contains("name") ? fields.at("name").get<std::string>() : "");
                actions_.push_back(action);
                flags_.push_back(flags);
                return Answer{allow_, false, {}};
            });
        conn_->enterEventLoopAsync();
    }
    ~FakePolkit() {
        conn_->leaveEventLoop();
        obj_.reset();
    }
    size_t calls() {
        std::lock_guard lock(mu_);
        return actions_.size();
    }
    std::string kind(size_t i) {
        std::lock_guard lock(mu_);
        return kinds_.at(i);
    }
    std::string name(size_t i) {
        std::lock_guard lock(mu_);
        return names_.at(i);
    }
    std::string action(size_t i) {
        std::lock_guard lock(mu_);
        return actions_.at(i);
    }
    uint32_t flags(size_t i) {
        std::lock_guard lock(mu_);
        return flags_.at(i);
    }

private:
    bool allow_;
    std::unique_ptr<sdbus::IConnection> conn_;
    std::unique_ptr<sdbus::IObject> obj_;
    std::mutex mu_;
    std::vector<std::string> kinds_, names_, actions_;
    std::vector<uint32_t> flags_;
};

class PolkitTest : public DbusTest {
protected:
    PolkitTest() {
        adaptor_.reset();
        polkit_ = std::make_unique<PolkitAuthoriser>(*server_);
        adaptor_ = std::make_unique<ManagerAdaptor>(*server_, *manager_, *polkit_);
    }
    ~PolkitTest() override { adaptor_.reset(); }

    // memprotctl as uid/gid 65534 (needs root and setpriv).
    ProcessResult ctl_as_nobody(const std::vector<std::string>& args) {
        std::vector<std::string> argv = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                                         "--clear-groups", MEMPROTCTL_PATH};
        argv.insert(argv.end(), args.begin(), args.end());
        Child c(argv, {"MEMPROTD_BUS_ADDRESS=" + bus_.address(), "NO_COLOR=1"}, bus_.dir());
        EXPECT_TRUE(pump_until([&] { return c.poll(); })) << "memprotctl timed out";
        return c.result();
    }

    void SetUp() override {
        if (geteuid() != 0 || access("/usr/bin/setpriv", X_OK) != 0)
            GTEST_SKIP() << "needs root and setpriv to call as another user";
        // The bus socket lives in a 0700 directory; let nobody in.
        chmod(bus_.dir().c_str(), 0755);
    }

    std::unique_ptr<PolkitAuthoriser> polkit_;
};

TEST_F(PolkitTest, RootIsAllowedWithoutAskingPolkit) {
    FakePolkit polkit(bus_.address(), /*allow=*/false);
    const ProcessResult r = ctl({"mode", "paused"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(manager_->mode(), memprotd::Mode::Paused);
    EXPECT_EQ(polkit.calls(), 0U);
}

TEST_F(PolkitTest, OthersAreCheckedWithPolkitForTheirBusName) {
    FakePolkit polkit(bus_.address(), /*allow=*/true);
    const ProcessResult r = ctl_as_nobody({"mode", "dry-run"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(manager_->mode(), memprotd::Mode::DryRun);
    ASSERT_EQ(polkit.calls(), 1U);
    EXPECT_EQ(polkit.kind(0), "system-bus-name");
    EXPECT_TRUE(polkit.name(0).starts_with(":1.")) << polkit.name(0);
    EXPECT_EQ(polkit.action(0), "org.memprotd1.manage");
    EXPECT_EQ(polkit.flags(0), 1U);  // AllowUserInteraction
}

TEST_F(PolkitTest, OthersDeniedByPolkitGetAccessDeniedAndChangeNothing) {
    FakePolkit polkit(bus_.address(), /*allow=*/false);
    ProcessResult r = ctl_as_nobody({"set", "batch.slice", "Weight=5"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("permission denied"), std::string::npos) << r.err;
    EXPECT_TRUE(manager_->slice_policy_overrides().empty());
    // Reading needs nothing.
    tick();
    r = ctl_as_nobody({"list", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(polkit.calls(), 1U);
}

TEST_F(PolkitTest, WithoutPolkitOthersAreDenied) {
    const ProcessResult r = ctl_as_nobody({"reload"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("permission denied"), std::string::npos) << r.err;
}

TEST_F(DbusTest, CtlVerbsHaveHelp) {
    for (const char* verb : {"status", "list", "show", "explain", "plan", "monitor", "reload", "mode", "set",
                             "reset", "metrics", "dump"}) {
        const ProcessResult r = ctl({verb, "--help"});
        EXPECT_EQ(r.exit_code, 0) << verb;
        EXPECT_NE(r.out.find("Usage"), std::string::npos) << verb << r.out;
    }
}

// The daemon itself on a private bus: when the bus goes away (the system bus
// restarted) it exits with a failure, for Restart=on-failure to bring it back
// on the new bus, instead of running on deaf.
TEST(DaemonProcess, ExitsWithAFailureWhenItsBusGoesAway) {
    FakeTree tree;
    tree.add_cgroup("workload.slice");
    ASSERT_EQ(mkdir((tree.base() + "/etc").c_str(), 0755), 0);
    PrivateBus bus;
    Child daemon({MEMPROTD_PATH, "--root", tree.cgroup_root(), "--proc-root", tree.proc_root(), "--sys-root",
                  tree.sys_root(), "--config-dir", tree.base() + "/etc", "--runtime-dir", tree.base() + "/run"},
                 {"MEMPROTD_BUS_ADDRESS=" + bus.address()}, tree.base());
    const auto wait = [](const std::function<bool()>& done) {
        const auto deadline = std::chrono::steady_clock::now() + kTimeout;
        while (!done() && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return done();
    };
    // Serving: memprotctl status answers.
    ASSERT_TRUE(wait([&] {
        if (daemon.poll())
            return true;
        Child ctl({MEMPROTCTL_PATH, "status"}, {"MEMPROTD_BUS_ADDRESS=" + bus.address()}, tree.base());
        while (!ctl.poll())
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        return ctl.result().exit_code == 0;
    }));
    ASSERT_FALSE(daemon.poll()) << daemon.err();

    bus.stop();
    ASSERT_TRUE(wait([&] { return daemon.poll(); })) << "memprotd still running without its bus";
    EXPECT_EQ(daemon.result().exit_code, 1);
    EXPECT_THAT(daemon.err(), ::testing::HasSubstr("lost the D-Bus connection"));
}

}  // namespace
}  // namespace memprotd
