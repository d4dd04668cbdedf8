// SPDX-License-Identifier: LGPL-2.1-or-later
//
// memprotd: wires the parts together and hands control to the Manager.

#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "actuator.h"
#include "config.h"
#include "config_loader.h"
#include "manager_bus.h"
#include "logging.h"
#include "manager.h"
#include "memory_lock.h"
#include "memprotd-config.h"
#include "org.memprotd1.Manager.introspect.h"
#include "polkit.h"
#include "probe.h"

namespace {

using namespace memprotd;

// One fd per cgroup for the sampler and one per PSI trigger: thousands of
// slices need more than the 1024 soft default.
void raise_fd_limit() {
    struct rlimit rl {};
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
}

// memprotd's command line.
struct Options {
    std::string root, proc_root, sys_root, debugfs_root, runtime_dir = "/run/memprotd", log_level = "info",
                                                         memory_total, record;
    std::vector<std::string> config_dirs;
    bool dry_run = false, once = false, bus_introspect = false, keep_file_fds = false;
};

void add_options(CLI::App& app, Options& o) {
    app.add_option("--root", o.root,
                   "Sample this cgroup2 tree instead of /sys/fs/cgroup; implies --dry-run, no systemd, no bus");
    app.add_option("--proc-root", o.proc_root, "Read meminfo, pressure and mounts below this instead of /proc");
    app.add_option("--sys-root", o.sys_root, "Read kernel/mm/lru_gen below this instead of /sys");
    app.add_option("--debugfs-root", o.debugfs_root,
                   "Read lru_gen below this instead of /sys/kernel/debug (with --root: not read unless given)");
    app.add_option("--config-dir", o.config_dirs,
                   "Configuration directory, in priority order (repeatable); replaces the default search path");
    app.add_flag("--dry-run", o.dry_run, "Compute and log plans, write nothing");
    app.add_flag("--keep-file-fds", o.keep_file_fds,
                 "With --root: keep the tree's files open between samples as on a cgroup2 mount (for benchmarks)");
    app.add_flag("--once", o.once, "Run one cycle and exit");
    app.add_option("--memory-total", o.memory_total, "Plan for this much RAM instead of MemTotal (e.g. 16G)");
    app.add_option("--record", o.record,
                   "Record the engine's inputs to this trace file (replaces Record=; see docs/trace.md)");
    app.add_option("--runtime-dir", o.runtime_dir, "Where the record of prior values is kept")->capture_default_str();
    app.add_option("--log-level", o.log_level, "trace, debug, info, warning, error, critical or off")
        ->capture_default_str();
    app.add_flag("--bus-introspect", o.bus_introspect, "Print the D-Bus interface XML the daemon serves and exit");
    app.set_version_flag("--version", std::string("memprotd ") + MEMPROTD_VERSION);
}

// Points the probe and the sampler at the roots the options name. A whole
// fake host (tests/fake_tree.h layout: cgroup/ proc/ sys/ debug/) is accepted
// as --root too; its parts fill the roots not given.
void set_roots(Options& o, ProbeRoots& probe_roots, ManagerOptions& opt) {
    const bool tree_only = !o.root.empty();
    if (tree_only && !std::filesystem::exists(o.root + "/cgroup.controllers") &&
        std::filesystem::exists(o.root + "/cgroup/cgroup.controllers")) {
        const std::string base = o.root;
        o.root = base + "/cgroup";
        if (o.proc_root.empty())
            o.proc_root = base + "/proc";
        if (o.sys_root.empty())
            o.sys_root = base + "/sys";
        if (o.debugfs_root.empty() && std::filesystem::exists(base + "/debug"))
            o.debugfs_root = base + "/debug";
    }
    if (tree_only) {
        probe_roots.cgroup_root = opt.sampler.cgroup_root = o.root;
        opt.sampler.read_lru_gen = !o.debugfs_root.empty();  // the host's lru_gen says nothing about a fake tree
        if (o.keep_file_fds)
            opt.sampler.file_fds = SamplerOptions::FileFds::Keep;
    }
    if (!o.proc_root.empty()) {
        probe_roots.proc_root = opt.sampler.proc_root = o.proc_root;
        probe_roots.mounts_file = o.proc_root + "/self/mounts";
    }
    if (!o.sys_root.empty())
        probe_roots.sys_root = o.sys_root;
    if (!o.debugfs_root.empty())
        probe_roots.debugfs_root = opt.sampler.debugfs_root = o.debugfs_root;
}

// Locks the daemon's pages in RAM when it serves the host (memory_lock.h
// says why); a fake tree (--root) is a demo or a test, whose user's memory
// is left alone. Failure is logged and reported, never fatal.
MemoryLock lock_memory(bool tree_only) {
    if (tree_only)
        return {false, "not tried with --root"};
    MemoryLock lock = lock_own_memory();
    if (lock.locked)
        spdlog::info("own memory locked in RAM (mlockall, as pages are used)");
    else
        spdlog::warn("own memory not locked in RAM, reclaim may page memprotd out: {}", lock.reason);
    return lock;
}

// Serves org.memprotd1 (on the system bus, or on $MEMPROTD_BUS_ADDRESS, also
// with --root, for demos and tests) and runs the manager's loop until it
// stops; the exit status. The bus objects are made after the manager so they
// go first: the adaptor unhooks itself from the manager.
int serve(Manager& manager, bool tree_only, const MemoryLock& memory_lock) {
    std::unique_ptr<sdbus::IConnection> bus;
    std::unique_ptr<PolkitAuthoriser> authoriser;
    std::unique_ptr<ManagerAdaptor> adaptor;
    std::unique_ptr<BusEventSource> bus_source;
    const char* bus_address = std::getenv(kBusAddressEnv);
    if (!tree_only || (bus_address && *bus_address)) {
        bus = open_bus();
        authoriser = std::make_unique<PolkitAuthoriser>(*bus);
        adaptor = std::make_unique<ManagerAdaptor>(*bus, manager, *authoriser, memory_lock);
        sdbus_compat::request_name(*bus, kBusName);
        bus_source = std::make_unique<BusEventSource>(*bus, manager.event());
        // Without its bus memprotd can neither be asked nor write (systemd is
        // reached through the same dbus-daemon): exit with a failure, so that
        // Restart=on-failure brings it back on the new bus.
        bus_source->on_error = [&manager](const std::string& why) {
            spdlog::error("lost the D-Bus connection ({}); exiting for systemd to restart memprotd", why);
            manager.fail(-ECONNRESET);
        };
        bus_source->on_processed = [&manager](uint64_t cpu_us) { manager.add_bus_cpu(cpu_us); };
        if (const int r = bus_source->attach(); r < 0) {
            std::fprintf(stderr, "memprotd: cannot attach the bus to the event loop: %s\n", std::strerror(-r));
            return 1;
        }
    }
    return manager.run() < 0 ? 1 : 0;
}

int run(int argc, char** argv) {
    CLI::App app{"memprotd: keeps MemoryLow=/MemoryMin= of systemd slices matched to their working sets", "memprotd"};
    Options o;
    add_options(app, o);
    CLI11_PARSE(app, argc, argv);
    if (o.bus_introspect) {
        std::fputs(kManagerIntrospectionXml, stdout);
        return 0;
    }
    if (!logging::setup(o.log_level))
        spdlog::warn("unknown log level \"{}\", using info", o.log_level);

    const bool tree_only = !o.root.empty();
    ProbeRoots probe_roots;
    ManagerOptions opt;
    set_roots(o, probe_roots, opt);
    if (!o.memory_total.empty()) {
        Result<SizeSpec> s = parse_size(o.memory_total);
        if (!s || s->kind != SizeSpec::Kind::Bytes || s->bytes == 0) {
            std::fprintf(stderr, "memprotd: --memory-total: expected a size in bytes such as 16G, got \"%s\"\n",
                         o.memory_total.c_str());
            return 2;
        }
        opt.memory_total_override = s->bytes;
    }

    const KernelFeatures features = probe_features(probe_roots);
    if (!features.unusable_reason.empty()) {
        std::fprintf(stderr, "memprotd: %s\n", features.unusable_reason.c_str());
        return 1;
    }

    raise_fd_limit();
    opt.config_dirs = o.config_dirs.empty() ? default_config_dirs() : o.config_dirs;
    opt.runtime_dir = o.runtime_dir;
    opt.record_path = o.record;
    opt.force_dry_run = o.dry_run || tree_only;
    opt.tree_only = tree_only;
    opt.psi_triggers = !tree_only;
    opt.notify = !tree_only;

    std::unique_ptr<Actuator> actuator;
    if (!tree_only)
        actuator = std::make_unique<SystemdActuator>();
    Manager manager(std::move(opt), features, std::move(actuator));
    if (const std::vector<Error> errors = manager.init(); !errors.empty()) {
        for (const Error& e : errors)
            std::fprintf(stderr, "memprotd: %s\n", e.to_string().c_str());
        std::fprintf(stderr, "memprotd: refusing to start with %zu configuration error(s)\n", errors.size());
        return 1;
    }
    spdlog::info("memprotd {} starting: mode {}, interval {} ms, kernel {}", MEMPROTD_VERSION,
                 mode_name(manager.mode()), manager.config().daemon.interval_us / 1000, features.kernel_release);

    if (o.once) {
        const TickResult r = manager.run_once();
        const Plan& plan = manager.last_plan();
        spdlog::info("one cycle: {} slices managed, {} planned writes, {} applied, {} failed", plan.slices.size(),
                     plan.writes.size(), r.applied, r.failed);
        // A one-shot apply is meant to stay: no restore here. The record
        // stays too, so the next long-running start can restore.
        return r.failed == 0 ? 0 : 1;
    }
    return serve(manager, tree_only, lock_memory(tree_only));
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "memprotd: %s\n", e.what());
        return 1;
    }
}
