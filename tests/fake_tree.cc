// SPDX-License-Identifier: LGPL-2.1-or-later
#include "fake_tree.h"

#include <fmt/format.h>
#include <stdlib.h>  // mkdtemp

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <stdexcept>
#include <system_error>

namespace memprotd {

namespace fs = std::filesystem;

namespace {

// A 6.1 kernel's memory.stat keys in its order; the engine's by their StatKey.
constexpr std::array<std::string_view, 51> kStatKeys61 = {
    stat_key_name(StatKey::Anon),
    stat_key_name(StatKey::File),
    "kernel",
    "kernel_stack",
    "pagetables",
    "sec_pagetables",
    "percpu",
    "sock",
    "vmalloc",
    "shmem",
    "zswap",
    "zswapped",
    stat_key_name(StatKey::FileMapped),
    stat_key_name(StatKey::FileDirty),
    stat_key_name(StatKey::FileWriteback),
    "swapcached",
    "anon_thp",
    "file_thp",
    "shmem_thp",
    stat_key_name(StatKey::InactiveAnon),
    "active_anon",
    stat_key_name(StatKey::InactiveFile),
    "active_file",
    "unevictable",
    stat_key_name(StatKey::SlabReclaimable),
    "slab_unreclaimable",
    "slab",
    stat_key_name(StatKey::WorkingsetRefaultAnon),
    stat_key_name(StatKey::WorkingsetRefaultFile),
    stat_key_name(StatKey::WorkingsetActivateAnon),
    stat_key_name(StatKey::WorkingsetActivateFile),
    stat_key_name(StatKey::WorkingsetRestoreAnon),
    stat_key_name(StatKey::WorkingsetRestoreFile),
    "workingset_nodereclaim",
    "pgscan",
    stat_key_name(StatKey::Pgsteal),
    "pgscan_kswapd",
    "pgscan_direct",
    "pgsteal_kswapd",
    "pgsteal_direct",
    "pgfault",
    "pgmajfault",
    "pgrefill",
    "pgactivate",
    "pgdeactivate",
    "pglazyfree",
    "pglazyfreed",
    "zswpin",
    "zswpout",
    "thp_fault_alloc",
    "thp_collapse_alloc",
};

constexpr uint64_t kPage = 4096;

std::string value_text(uint64_t v) {
    return v == kUnlimited ? std::string("max\n") : fmt::format("{}\n", v);
}

uint64_t pages(double bytes) {
    return static_cast<uint64_t>(bytes / static_cast<double>(kPage)) * kPage;
}

void write_file(const fs::path& path, std::string_view content) {
    fs::create_directories(path.parent_path());
    std::FILE* f = std::fopen(path.c_str(), "we");
    if (!f)
        throw std::system_error(errno, std::generic_category(), "fopen " + path.string());
    const bool ok = std::fwrite(content.data(), 1, content.size(), f) == content.size();
    if (std::fclose(f) != 0 || !ok)
        throw std::system_error(errno, std::generic_category(), "write " + path.string());
}

std::string_view strip_slash(std::string_view p) {
    while (!p.empty() && p.front() == '/') p.remove_prefix(1);
    while (!p.empty() && p.back() == '/') p.remove_suffix(1);
    return p;
}

// The files every cgroup2 directory has besides those a spec controls, so
// directory listings are as long as on a real host.
void write_other_files(const fs::path& dir, bool slice, uint64_t current, const MemoryEvents& events) {
    const std::string idle(kIdlePsiText);
    const std::pair<const char*, std::string> files[] = {
        {"cgroup.controllers", "cpu io memory pids\n"},
        {"cgroup.events", "populated 1\nfrozen 0\n"},
        {"cgroup.freeze", "0\n"},
        {"cgroup.kill", ""},
        {"cgroup.max.depth", "max\n"},
        {"cgroup.max.descendants", "max\n"},
        {"cgroup.pressure", "1\n"},
        {"cgroup.procs", ""},
        {"cgroup.stat", "nr_descendants 0\nnr_dying_descendants 0\n"},
        {"cgroup.subtree_control", slice ? "memory pids\n" : ""},
        {"cgroup.threads", ""},
        {"cgroup.type", "domain\n"},
        {"cpu.pressure", idle},
        {"cpu.stat", "usage_usec 0\nuser_usec 0\nsystem_usec 0\n"},
        {"io.pressure", idle},
        {"memory.events.local", memory_events_text(events)},
        {"memory.numa_stat", "anon N0=0\nfile N0=0\nkernel_stack N0=0\n"},
        {"memory.oom.group", "0\n"},
        {"memory.peak", value_text(current)},
        {"memory.reclaim", ""},
        {"memory.swap.events", "high 0\nmax 0\nfail 0\n"},
        {"memory.swap.high", "max\n"},
        {"memory.swap.max", "max\n"},
        {"memory.zswap.current", "0\n"},
        {"memory.zswap.max", "max\n"},
        {"pids.current", "1\n"},
        {"pids.events", "max 0\n"},
        {"pids.max", "max\n"},
    };
    for (const auto& [name, content] : files) write_file(dir / name, content);
}

std::string key(StatKey k) {
    return std::string(stat_key_name(k));
}

FakeCgroupSpec shaped_spec(uint64_t bytes, double anon_share, double file_share, double inactive_file_share,
                           double mapped_share) {
    const auto b = static_cast<double>(bytes);
    const double anon = b * anon_share;
    const double file = b * file_share;
    const double kernel = b - anon - file;
    const double slab = kernel * 0.6;
    FakeCgroupSpec spec;
    spec.current = bytes;
    spec.stat = {
        {key(StatKey::Anon), pages(anon)},
        {key(StatKey::File), pages(file)},
        {"kernel", pages(kernel)},
        {"kernel_stack", pages(kernel * 0.1)},
        {"pagetables", pages(kernel * 0.25)},
        {"percpu", pages(kernel * 0.05)},
        {"sock", 0},
        {"shmem", pages(file * 0.02)},
        {key(StatKey::FileMapped), pages(file * mapped_share)},
        {key(StatKey::FileDirty), pages(file * 0.01)},
        {key(StatKey::FileWriteback), 0},
        {"anon_thp", pages(anon * 0.2)},
        {key(StatKey::InactiveAnon), pages(anon * 0.1)},
        {"active_anon", pages(anon * 0.9)},
        {key(StatKey::InactiveFile), pages(file * inactive_file_share)},
        {"active_file", pages(file * (1 - inactive_file_share))},
        {key(StatKey::SlabReclaimable), pages(slab * 0.4)},
        {"slab_unreclaimable", pages(slab * 0.6)},
        {"slab", pages(slab)},
        {key(StatKey::WorkingsetRefaultAnon), 0},
        {key(StatKey::WorkingsetRefaultFile), 1200},
        {key(StatKey::WorkingsetActivateFile), 300},
        {key(StatKey::WorkingsetRestoreFile), 40},
        {"pgscan", 52000},
        {key(StatKey::Pgsteal), 48000},
        {"pgscan_kswapd", 50000},
        {"pgscan_direct", 2000},
        {"pgsteal_kswapd", 46500},
        {"pgsteal_direct", 1500},
        {"pgfault", 8'400'000},
        {"pgmajfault", 1200},
        {"pgrefill", 9000},
        {"pgactivate", 210000},
        {"pgdeactivate", 8000},
        {"thp_fault_alloc", 35},
    };
    return spec;
}

}  // namespace

std::span<const std::string_view> memory_stat_keys_6_1() {
    return kStatKeys61;
}

std::string memory_stat_text(const StatValues& values) {
    std::string out;
    out.reserve(1600);
    const auto lookup = [&](std::string_view key) -> uint64_t {
        for (const auto& [k, v] : values)
            if (k == key)
                return v;
        return 0;
    };
    for (std::string_view key : kStatKeys61)
        fmt::format_to(std::back_inserter(out), "{} {}\n", key, lookup(key));
    for (const auto& [k, v] : values)
        if (std::find(kStatKeys61.begin(), kStatKeys61.end(), k) == kStatKeys61.end())
            fmt::format_to(std::back_inserter(out), "{} {}\n", k, v);
    return out;
}

std::string memory_events_text(const MemoryEvents& e) {
    return fmt::format("low {}\nhigh {}\nmax {}\noom {}\noom_kill {}\noom_group_kill {}\n", e.low, e.high,
                       e.max, e.oom, e.oom_kill, e.oom_group_kill);
}

std::string psi_text(const Psi& psi) {
    const auto line = [](std::string_view kind, const PsiLine& l) {
        return fmt::format("{} avg10={:.2f} avg60={:.2f} avg300={:.2f} total={}\n", kind, l.avg10, l.avg60,
                           l.avg300, l.total_us);
    };
    std::string out = line("some", psi.some);
    if (psi.full)
        out += line("full", *psi.full);
    return out;
}

std::string lru_gen_text(const LruGen& lru_gen) {
    std::string out;
    for (const LruGenMemcg& memcg : lru_gen.memcgs) {
        // 6.1 prints the memcg line once, before its first node.
        fmt::format_to(std::back_inserter(out), "memcg {:>5} {}\n", memcg.id, memcg.path);
        for (const LruGenNode& node : memcg.nodes) {
            fmt::format_to(std::back_inserter(out), " node {:>5}\n", node.node);
            for (const LruGeneration& g : node.generations)
                fmt::format_to(std::back_inserter(out), " {:>10} {:>10} {:>10}  {:>10} \n", g.seq, g.age_ms,
                               g.anon_pages, g.file_pages);
        }
    }
    return out;
}

FakeCgroupSpec anon_heavy_spec(uint64_t bytes) {
    return shaped_spec(bytes, 0.78, 0.16, 0.5, 0.3);
}

FakeCgroupSpec cache_heavy_spec(uint64_t bytes) {
    return shaped_spec(bytes, 0.15, 0.80, 0.7, 0.05);
}

FakeTree::FakeTree() {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = (tmp && *tmp ? std::string(tmp) : std::string("/tmp")) + "/memprotd-fake-XXXXXX";
    if (!::mkdtemp(templ.data()))
        throw std::system_error(errno, std::generic_category(), "mkdtemp " + templ);
    base_ = templ;

    const fs::path root = cgroup_root();
    fs::create_directories(root);
    write_file(root / "cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
    write_file(root / "cgroup.subtree_control", "cpu io memory pids\n");
    write_file(root / "cgroup.procs", "1\n");
    write_file(root / "cgroup.max.depth", "max\n");
    write_file(root / "cgroup.stat", "nr_descendants 0\nnr_dying_descendants 0\n");
    write_file(root / "memory.pressure", kIdlePsiText);
    write_file(root / "memory.reclaim", "");
    write_file(root / "memory.stat", memory_stat_text({}));
    write_file(root / "cpu.pressure", kIdlePsiText);
    write_file(root / "io.pressure", kIdlePsiText);

    meminfo(16ULL << 30, 12ULL << 30);
    host_pressure(kIdlePsiText);
    kernel_release("6.1.0-18-amd64");
    cgroup2_mount("rw,nosuid,nodev,noexec,relatime,nsdelegate,memory_recursiveprot");
    mglru(0x0007);
    fs::create_directories(debugfs_root());
}

FakeTree::~FakeTree() {
    std::error_code ec;
    fs::remove_all(base_, ec);
}

std::string FakeTree::cgroup_dir(std::string_view cgroup_path) const {
    std::string dir = cgroup_root();
    std::string_view rel = strip_slash(cgroup_path);
    if (!rel.empty()) {
        dir += '/';
        dir += rel;
    }
    return dir;
}

FakeTree& FakeTree::add_cgroup(std::string_view path, const FakeCgroupSpec& spec) {
    const std::string_view rel = strip_slash(path);
    if (rel.empty())
        throw std::invalid_argument("add_cgroup: empty path");
    // Ancestors need their memory files too, or readers would take them for
    // cgroups that vanished.
    if (size_t slash = rel.rfind('/'); slash != std::string_view::npos) {
        std::string_view parent = rel.substr(0, slash);
        if (!fs::exists(fs::path(cgroup_dir(parent)) / "memory.current"))
            add_cgroup(parent, {});
    }
    const fs::path dir = cgroup_dir(rel);
    fs::create_directories(dir);
    const std::string_view name = rel.substr(rel.rfind('/') + 1);
    write_other_files(dir, name.ends_with(".slice"), spec.current, spec.events);
    write_file(dir / "memory.current", value_text(spec.current));
    write_file(dir / "memory.min", value_text(spec.min));
    write_file(dir / "memory.low", value_text(spec.low));
    write_file(dir / "memory.high", value_text(spec.high));
    write_file(dir / "memory.max", value_text(spec.max));
    write_file(dir / "memory.swap.current", value_text(spec.swap_current));
    write_file(dir / "memory.stat", memory_stat_text(spec.stat));
    write_file(dir / "memory.events", memory_events_text(spec.events));
    if (spec.pressure_text)
        write_file(dir / "memory.pressure", *spec.pressure_text);
    else
        fs::remove(dir / "memory.pressure");
    return *this;
}

FakeTree& FakeTree::remove(std::string_view cgroup_path) {
    if (strip_slash(cgroup_path).empty())
        throw std::invalid_argument("remove: refusing to remove the cgroup root");
    fs::remove_all(cgroup_dir(cgroup_path));
    return *this;
}

FakeTree& FakeTree::set(std::string_view cgroup_path, std::string_view file, std::string_view content) {
    write_file(fs::path(cgroup_dir(cgroup_path)) / file, content);
    return *this;
}

FakeTree& FakeTree::set(std::string_view cgroup_path, std::string_view file, uint64_t value) {
    return set(cgroup_path, file, std::string_view(value_text(value)));
}

bool FakeTree::apply_protection(std::string_view unit, uint64_t memory_low, uint64_t memory_min) {
    const fs::path root = cgroup_root();
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
        if (!it->is_directory() || it->path().filename() != unit)
            continue;
        const std::string rel = fs::relative(it->path(), root).string();
        set(rel, "memory.low", memory_low).set(rel, "memory.min", memory_min);
        return true;
    }
    return false;
}

FakeTree& FakeTree::write(std::string_view relpath, std::string_view content) {
    write_file(fs::path(base_) / strip_slash(relpath), content);
    return *this;
}

FakeTree& FakeTree::remove_path(std::string_view relpath) {
    if (strip_slash(relpath).empty())
        throw std::invalid_argument("remove_path: refusing to remove the base");
    fs::remove_all(fs::path(base_) / strip_slash(relpath));
    return *this;
}

FakeTree& FakeTree::meminfo(uint64_t mem_total, uint64_t mem_available, uint64_t swap_total,
                            uint64_t swap_free) {
    const uint64_t total = mem_total / 1024;
    const uint64_t avail = mem_available / 1024;
    const uint64_t used = total > avail ? total - avail : 0;
    const uint64_t cached = avail / 2;
    const uint64_t free = avail - cached;
    std::string text;
    const auto line = [&](std::string_view key, uint64_t kb) {
        fmt::format_to(std::back_inserter(text), "{:<16}{:>8} kB\n", fmt::format("{}:", key), kb);
    };
    line("MemTotal", total);
    line("MemFree", free);
    line("MemAvailable", avail);
    line("Buffers", total / 200);
    line("Cached", cached);
    line("SwapCached", 0);
    line("Active", used / 2);
    line("Inactive", cached);
    line("Active(anon)", used / 2);
    line("Inactive(anon)", used / 8);
    line("Active(file)", cached / 3);
    line("Inactive(file)", cached - cached / 3);
    line("Unevictable", 0);
    line("Mlocked", 0);
    line("SwapTotal", swap_total / 1024);
    line("SwapFree", swap_free / 1024);
    line("Zswap", 0);
    line("Zswapped", 0);
    line("Dirty", 120);
    line("Writeback", 0);
    line("AnonPages", used / 2);
    line("Mapped", used / 10);
    line("Shmem", 2048);
    line("KReclaimable", total / 100);
    line("Slab", total / 50);
    line("SReclaimable", total / 100);
    line("SUnreclaim", total / 100);
    line("KernelStack", 8000);
    line("PageTables", 12000);
    line("SecPageTables", 0);
    line("NFS_Unstable", 0);
    line("Bounce", 0);
    line("WritebackTmp", 0);
    line("CommitLimit", total / 2 + swap_total / 1024);
    line("Committed_AS", used);
    line("VmallocTotal", 34359738367);
    line("VmallocUsed", 30000);
    line("VmallocChunk", 0);
    line("Percpu", 2000);
    line("HardwareCorrupted", 0);
    line("AnonHugePages", 0);
    line("ShmemHugePages", 0);
    line("ShmemPmdMapped", 0);
    line("FileHugePages", 0);
    line("FilePmdMapped", 0);
    text +=
        "HugePages_Total:       0\nHugePages_Free:        0\nHugePages_Rsvd:        0\n"
        "HugePages_Surp:        0\n";
    line("Hugepagesize", 2048);
    line("Hugetlb", 0);
    line("DirectMap4k", 200000);
    line("DirectMap2M", total / 2);
    line("DirectMap1G", 0);
    return write("proc/meminfo", text);
}

FakeTree& FakeTree::host_pressure(std::optional<std::string_view> text) {
    if (text)
        return write("proc/pressure/memory", *text);
    return remove_path("proc/pressure/memory");
}

FakeTree& FakeTree::controllers(std::string_view text) {
    return write("cgroup/cgroup.controllers", text);
}

FakeTree& FakeTree::cgroup2_mount(std::optional<std::string_view> options) {
    std::string text =
        "sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0\n"
        "proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0\n"
        "udev /dev devtmpfs rw,nosuid,relatime,size=8148228k,nr_inodes=2037057,mode=755 0 0\n";
    if (options)
        text += fmt::format("cgroup2 {} cgroup2 {} 0 0\n", cgroup_root(), *options);
    text +=
        "/dev/vda1 / ext4 rw,relatime,errors=remount-ro 0 0\n"
        "debugfs /sys/kernel/debug debugfs rw,nosuid,nodev,noexec,relatime 0 0\n";
    return write("proc/self/mounts", text);
}

FakeTree& FakeTree::mglru(std::optional<uint32_t> flags) {
    if (flags)
        return write("sys/kernel/mm/lru_gen/enabled", fmt::format("0x{:04x}\n", *flags));
    return remove_path("sys/kernel/mm/lru_gen");
}

FakeTree& FakeTree::lru_gen(std::optional<std::string_view> text) {
    if (text)
        return write("debug/lru_gen", *text);
    return remove_path("debug/lru_gen");
}

FakeTree& FakeTree::kernel_release(std::string_view release) {
    return write("proc/sys/kernel/osrelease", fmt::format("{}\n", release));
}

SamplerOptions FakeTree::sampler_options() const {
    SamplerOptions o;
    o.cgroup_root = cgroup_root();
    o.proc_root = proc_root();
    o.debugfs_root = debugfs_root();
    return o;
}

ProbeRoots FakeTree::probe_roots() const {
    ProbeRoots r;
    r.cgroup_root = cgroup_root();
    r.proc_root = proc_root();
    r.sys_root = sys_root();
    r.debugfs_root = debugfs_root();
    r.mounts_file = mounts_file();
    return r;
}

}  // namespace memprotd
