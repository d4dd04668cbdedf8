// SPDX-License-Identifier: LGPL-2.1-or-later
#include "sampler.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <ctime>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "file_io.h"
#include "parse.h"

namespace memprotd {

namespace {

constexpr unsigned long kCgroup2SuperMagic = 0x63677270;  // CGROUP2_SUPER_MAGIC, linux/magic.h
constexpr std::string_view kServiceSuffix = ".service";
constexpr std::string_view kScopeSuffix = ".scope";

// The limit files, read in this order; a cgroup whose file cannot be read
// keeps the default (what the kernel shows for an unconfigured cgroup).
struct ValueFile {
    const char* name;
    uint64_t CgroupSample::*field;
    uint64_t fallback;
};
constexpr ValueFile kValueFiles[] = {
    {"memory.current", &CgroupSample::current, 0},  {"memory.min", &CgroupSample::min, 0},
    {"memory.low", &CgroupSample::low, 0},          {"memory.high", &CgroupSample::high, kUnlimited},
    {"memory.max", &CgroupSample::max, kUnlimited},
};

// The per-cgroup files after the value files, each with a slot for its fd.
enum CgroupFile : size_t { kStatFile = std::size(kValueFiles), kEventsFile, kSwapFile, kPressureFile, kCgroupFiles };

// Our view of one cgroup directory, kept across samples so its fds and the
// sorted list of its children survive.
struct DirNode {
    std::string name;
    UniqueFd fd;                                     // invalid when over the open-fds budget
    // The cgroup's files, kept open while the directory is: a sample is then
    // one pread per file (a read at offset 0 makes kernfs print it afresh)
    // instead of openat + read + close.
    std::array<UniqueFd, kCgroupFiles> files;
    bool slice = false;                              // children are walked only below slices
    bool dead = false;                               // vanished during this sample; erased after the walk
    uint64_t seen = 0;                               // stamp of the last listing that showed it
    std::vector<std::unique_ptr<DirNode>> children;  // sorted by name
};

size_t count_open_fds(const DirNode& node) {
    size_t n = node.fd.valid() ? 1 : 0;
    for (const auto& f : node.files) n += f.valid() ? 1 : 0;
    for (const auto& child : node.children) n += count_open_fds(*child);
    return n;
}

std::string errno_message(int err) {
    return std::error_code(err, std::generic_category()).message();
}

size_t default_max_open_dirs() {
    rlimit lim{};
    if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY)
        return 512;
    // Leave the other half for PSI trigger fds, D-Bus and whatever else.
    return static_cast<size_t>(lim.rlim_cur / 2);
}

}  // namespace

struct Sampler::Impl {
    explicit Impl(SamplerOptions o);

    void sample(Snapshot& out, int64_t timestamp_us);

    // Refreshes node.children from a listing of `fd`. Returns 0 or an errno.
    int list(DirNode& node, int fd, bool inside_slice);
    void walk(DirNode& node, int fd, int parent, int depth, Snapshot& out, size_t& n);
    void visit(DirNode& child, int parent_fd, int parent, int depth, Snapshot& out, size_t& n);
    // False when the cgroup vanished (its files are gone). `node` keeps the
    // file fds, or is null for a directory opened only for this sample.
    bool read_cgroup(DirNode* node, int dfd, CgroupSample& s, Snapshot& out);
    // One file of a cgroup into buf, through node's cached fd when it has
    // one, caching it when the budget allows. Returns 0 or an errno.
    int read_cgroup_file(DirNode* node, int dfd, size_t slot, const char* name);
    void close_files(DirNode& node);
    void read_host(Snapshot& out);
    void read_lru_gen(Snapshot& out);

    std::string cgroup_file(const char* name) const;
    void io_error(Snapshot& out, std::string file, int err) const;
    void parse_error(Snapshot& out, Error e, std::string file) const;

    SamplerOptions opt;
    size_t max_open_dirs;  // the budget of fds kept open: directories and their files
    size_t open_dirs = 0;
    bool keep_files = false;
    std::string lru_gen_path;
    UniqueFd root_fd;
    UniqueFd proc_fd;
    DirNode root;
    uint64_t stamp = 0;
    ReadBuffer buf;      // one small file at a time
    ReadBuffer lru_buf;  // lru_gen alone: it is 100x larger than the rest
    std::string path;    // relative path of the cgroup being visited
    // getdents64 wants a buffer aligned for struct dirent64.
    alignas(8) char dents[32 * 1024] = {};
};

Sampler::Impl::Impl(SamplerOptions o) : opt(std::move(o)) {
    max_open_dirs = opt.max_open_dirs ? opt.max_open_dirs : default_max_open_dirs();
    struct statfs fs {};
    keep_files = opt.file_fds == SamplerOptions::FileFds::Keep ||
                 (opt.file_fds == SamplerOptions::FileFds::Auto && ::statfs(opt.cgroup_root.c_str(), &fs) == 0 &&
                  fs.f_type == static_cast<decltype(fs.f_type)>(kCgroup2SuperMagic));
    while (opt.cgroup_root.size() > 1 && opt.cgroup_root.back() == '/') opt.cgroup_root.pop_back();
    lru_gen_path = opt.debugfs_root + "/lru_gen";
    path.reserve(256);
}

std::string Sampler::Impl::cgroup_file(const char* name) const {
    std::string file = opt.cgroup_root;
    file += path;
    file += '/';
    file += name;
    return file;
}

void Sampler::Impl::io_error(Snapshot& out, std::string file, int err) const {
    out.errors.push_back(Error{std::move(file), 0, {}, "cannot read: " + errno_message(err)});
}

void Sampler::Impl::parse_error(Snapshot& out, Error e, std::string file) const {
    // Parsers were handed the bare name to spare a path per read; errors get
    // the full path the user can open.
    e.file = std::move(file);
    out.errors.push_back(std::move(e));
}

int Sampler::Impl::list(DirNode& node, int fd, bool inside_slice) {
    if (::lseek(fd, 0, SEEK_SET) < 0)
        return errno;
    const uint64_t now = ++stamp;
    const size_t known = node.children.size();
    const auto by_name = [](const std::unique_ptr<DirNode>& c, std::string_view name) {
        return std::string_view(c->name) < name;
    };
    for (;;) {
        ssize_t got = ::getdents64(fd, dents, sizeof dents);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (got == 0)
            break;
        for (ssize_t off = 0; off < got;) {
            const auto* d = reinterpret_cast<const struct dirent64*>(dents + off);
            off += d->d_reclen;
            if (d->d_type != DT_DIR && d->d_type != DT_UNKNOWN)
                continue;
            std::string_view name(d->d_name);
            const bool slice = is_slice_unit(name);
            if (!slice && !(inside_slice && opt.include_services &&
                            (name.ends_with(kServiceSuffix) || name.ends_with(kScopeSuffix))))
                continue;
            // Children from earlier samples are sorted: a stable tree costs a
            // binary search per entry and no allocation.
            auto last = node.children.begin() + static_cast<ptrdiff_t>(known);
            auto it = std::lower_bound(node.children.begin(), last, name, by_name);
            if (it != last && (*it)->name == name) {
                (*it)->seen = now;
                continue;
            }
            auto child = std::make_unique<DirNode>();
            child->name.assign(name);
            child->slice = slice;
            child->seen = now;
            node.children.push_back(std::move(child));
        }
    }
    bool changed = node.children.size() != known;
    for (auto& child : node.children) {
        if (child->seen != now) {
            open_dirs -= count_open_fds(*child);
            child.reset();
            changed = true;
        }
    }
    if (changed) {
        std::erase(node.children, nullptr);
        std::sort(node.children.begin(), node.children.end(),
                  [](const auto& a, const auto& b) { return a->name < b->name; });
    }
    return 0;
}

void Sampler::Impl::walk(DirNode& node, int fd, int parent, int depth, Snapshot& out, size_t& n) {
    if (int err = list(node, fd, /*inside_slice=*/depth > 0); err != 0) {
        if (!is_vanished(err))
            out.errors.push_back(Error{opt.cgroup_root + path, 0, {}, "cannot list: " + errno_message(err)});
        return;
    }
    for (auto& child : node.children) {
        const size_t saved = path.size();
        path += '/';
        path += child->name;
        visit(*child, fd, parent, depth, out, n);
        path.resize(saved);
    }
    bool any_dead = false;
    for (auto& child : node.children) {
        if (child->dead) {
            open_dirs -= count_open_fds(*child);
            child.reset();
            any_dead = true;
        }
    }
    if (any_dead)
        std::erase(node.children, nullptr);
}

void Sampler::Impl::visit(DirNode& child, int parent_fd, int parent, int depth, Snapshot& out, size_t& n) {
    UniqueFd transient;
    int dfd = child.fd.get();
    const bool cached = child.fd.valid();
    if (!cached) {
        int err = 0;
        UniqueFd fd = open_dir_at(parent_fd, child.name.c_str(), err);
        if (!fd) {
            if (is_vanished(err) || err == ENOTDIR)
                child.dead = true;
            else
                out.errors.push_back(
                    Error{opt.cgroup_root + path, 0, {}, "cannot open: " + errno_message(err)});
            return;
        }
        dfd = fd.get();
        if (open_dirs < max_open_dirs) {
            child.fd = std::move(fd);
            ++open_dirs;
        } else {
            transient = std::move(fd);
        }
    }

    if (n == out.cgroups.size())
        out.cgroups.emplace_back();
    CgroupSample& s = out.cgroups[n];
    const size_t errors_before = out.errors.size();
    DirNode* node = keep_files && child.fd.valid() ? &child : nullptr;
    bool alive = read_cgroup(node, dfd, s, out);
    if (!alive && cached) {
        // The cached fd may name a cgroup that was removed and created again
        // under the same name (a restarted service): look the name up again.
        out.errors.resize(errors_before);
        int err = 0;
        UniqueFd fd = open_dir_at(parent_fd, child.name.c_str(), err);
        close_files(child);
        if (fd) {
            child.fd = std::move(fd);
            dfd = child.fd.get();
            alive = read_cgroup(keep_files ? &child : nullptr, dfd, s, out);
        }
    }
    if (!alive) {
        // Whatever it said before it went away is noise.
        out.errors.resize(errors_before);
        child.dead = true;
        return;
    }
    s.unit.assign(child.name);
    s.path.assign(path);
    s.parent = parent;
    s.depth = depth;
    const int index = static_cast<int>(n++);
    // `s` may dangle from here on: the walk below can grow out.cgroups.
    if (child.slice && depth + 1 < opt.max_depth)
        walk(child, dfd, index, depth + 1, out, n);
}

void Sampler::Impl::close_files(DirNode& node) {
    for (auto& f : node.files) {
        if (f.valid()) {
            f = UniqueFd();
            --open_dirs;
        }
    }
}

int Sampler::Impl::read_cgroup_file(DirNode* node, int dfd, size_t slot, const char* name) {
    if (node && node->files[slot].valid())
        return read_fd(node->files[slot].get(), buf, ReadMode::kSingleRecord);
    int err = 0;
    UniqueFd fd = open_file_at(dfd, name, err);
    if (!fd) {
        buf.clear();
        return err;
    }
    err = read_fd(fd.get(), buf, ReadMode::kSingleRecord);
    if (err == 0 && node && open_dirs < max_open_dirs) {
        node->files[slot] = std::move(fd);
        ++open_dirs;
    }
    return err;
}

bool Sampler::Impl::read_cgroup(DirNode* node, int dfd, CgroupSample& s, Snapshot& out) {
    for (size_t i = 0; i < std::size(kValueFiles); ++i) {
        const ValueFile& v = kValueFiles[i];
        s.*v.field = v.fallback;
        if (int err = read_cgroup_file(node, dfd, i, v.name); err != 0) {
            if (is_vanished(err))
                return false;
            io_error(out, cgroup_file(v.name), err);
            continue;
        }
        auto value = parse_u64_or_max(buf.view(), v.name);
        if (value)
            s.*v.field = *value;
        else
            parse_error(out, value.error(), cgroup_file(v.name));
    }

    if (int err = read_cgroup_file(node, dfd, kStatFile, "memory.stat"); err != 0) {
        s.stat.clear();
        if (is_vanished(err))
            return false;
        io_error(out, cgroup_file("memory.stat"), err);
    } else if (auto st = parse_memory_stat(buf.view(), "memory.stat", s.stat); !st) {
        parse_error(out, st.error(), cgroup_file("memory.stat"));
    }

    s.events = MemoryEvents{};
    if (int err = read_cgroup_file(node, dfd, kEventsFile, "memory.events"); err != 0) {
        if (is_vanished(err))
            return false;
        io_error(out, cgroup_file("memory.events"), err);
    } else if (auto ev = parse_memory_events(buf.view(), "memory.events"); ev) {
        s.events = *ev;
    } else {
        parse_error(out, ev.error(), cgroup_file("memory.events"));
    }

    // Absent without swap accounting (no swap, or swapaccount=0): that is 0.
    s.swap_current = 0;
    if (int err = read_cgroup_file(node, dfd, kSwapFile, "memory.swap.current"); err != 0) {
        if (err == ENODEV)
            return false;
        if (err != ENOENT)
            io_error(out, cgroup_file("memory.swap.current"), err);
    } else if (auto value = parse_u64_or_max(buf.view(), "memory.swap.current"); value) {
        s.swap_current = *value;
    } else {
        parse_error(out, value.error(), cgroup_file("memory.swap.current"));
    }

    // Absent without CONFIG_PSI; EOPNOTSUPP with psi=0 or cgroup.pressure=0.
    s.pressure.reset();
    if (int err = read_cgroup_file(node, dfd, kPressureFile, "memory.pressure"); err != 0) {
        if (err == ENODEV)
            return false;
        if (err != ENOENT && err != EOPNOTSUPP)
            io_error(out, cgroup_file("memory.pressure"), err);
    } else if (auto psi = parse_psi(buf.view(), "memory.pressure"); psi) {
        s.pressure = *psi;
    } else {
        parse_error(out, psi.error(), cgroup_file("memory.pressure"));
    }
    return true;
}

void Sampler::Impl::read_host(Snapshot& out) {
    out.meminfo = Meminfo{};
    out.host_pressure.reset();
    if (!proc_fd) {
        int err = 0;
        proc_fd = open_dir_at(AT_FDCWD, opt.proc_root.c_str(), err);
        if (!proc_fd) {
            out.errors.push_back(Error{opt.proc_root, 0, {}, "cannot open: " + errno_message(err)});
            return;
        }
    }
    if (int err = read_at(proc_fd.get(), "meminfo", buf, ReadMode::kSingleRecord); err != 0) {
        io_error(out, opt.proc_root + "/meminfo", err);
    } else if (auto mi = parse_meminfo(buf.view(), "meminfo"); mi) {
        out.meminfo = *mi;
    } else {
        parse_error(out, mi.error(), opt.proc_root + "/meminfo");
    }

    if (int err = read_at(proc_fd.get(), "pressure/memory", buf, ReadMode::kSingleRecord); err != 0) {
        if (err != ENOENT && err != EOPNOTSUPP)
            io_error(out, opt.proc_root + "/pressure/memory", err);
    } else if (auto psi = parse_psi(buf.view(), "pressure/memory"); psi) {
        out.host_pressure = *psi;
    } else {
        parse_error(out, psi.error(), opt.proc_root + "/pressure/memory");
    }
}

void Sampler::Impl::read_lru_gen(Snapshot& out) {
    out.lru_gen.reset();
    if (!opt.read_lru_gen)
        return;
    // Needs root and a mounted debugfs; without them memprotd falls back to
    // memory.stat, so an unreadable file is not an error.
    if (read_file(lru_gen_path, lru_buf, ReadMode::kUntilEof) != 0)
        return;
    if (auto lru = parse_lru_gen(lru_buf.view(), lru_gen_path); lru)
        out.lru_gen = std::move(*lru);
    else
        out.errors.push_back(lru.error());
}

void Sampler::Impl::sample(Snapshot& out, int64_t timestamp_us) {
    out.timestamp_us = timestamp_us;
    out.errors.clear();
    read_host(out);

    size_t n = 0;
    if (!root_fd) {
        int err = 0;
        root_fd = open_dir_at(AT_FDCWD, opt.cgroup_root.c_str(), err);
        if (!root_fd)
            out.errors.push_back(
                Error{opt.cgroup_root, 0, {}, "cannot open the cgroup root: " + errno_message(err)});
    }
    if (root_fd) {
        path.clear();
        walk(root, root_fd.get(), /*parent=*/-1, /*depth=*/0, out, n);
    }
    out.cgroups.erase(out.cgroups.begin() + static_cast<ptrdiff_t>(n), out.cgroups.end());

    read_lru_gen(out);
}

Sampler::Sampler(SamplerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Sampler::~Sampler() = default;

void Sampler::sample(Snapshot& out, int64_t timestamp_us) {
    impl_->sample(out, timestamp_us);
}

const SamplerOptions& Sampler::options() const {
    return impl_->opt;
}

void Sampler::set_include_services(bool on) {
    impl_->opt.include_services = on;
}

Result<Meminfo> Sampler::meminfo() const {
    const std::string path = impl_->opt.proc_root + "/meminfo";
    std::string text;
    if (const int err = read_file(path, text); err != 0)
        return Error{path, 0, "", std::error_code(err, std::generic_category()).message()};
    return parse_meminfo(text, path);
}

namespace {
int64_t clock_us(clockid_t id) {
    timespec ts{};
    ::clock_gettime(id, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1'000;
}
}  // namespace

int64_t monotonic_us() { return clock_us(CLOCK_MONOTONIC); }

int64_t thread_cpu_us() { return clock_us(CLOCK_THREAD_CPUTIME_ID); }

int64_t process_cpu_us() { return clock_us(CLOCK_PROCESS_CPUTIME_ID); }

PageFaults process_page_faults() {
    rusage ru{};
    if (::getrusage(RUSAGE_SELF, &ru) != 0)
        return {};
    return {static_cast<uint64_t>(ru.ru_majflt), static_cast<uint64_t>(ru.ru_minflt)};
}

}  // namespace memprotd
