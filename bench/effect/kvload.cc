// SPDX-License-Identifier: LGPL-2.1-or-later
//
// kvload: a memcached-like key-value table in anonymous memory, for the
// effectiveness benchmark (bench/effect/README.md).
//
// The table is one anonymous mapping of SIZE bytes cut into fixed-size items.
// Each operation picks a key (uniform or zipf), then copies the item out (a
// get) or writes a new value into it (a set), so every operation touches one
// page of the table. Item contents are about 1/4 random bytes and 3/4 a
// pattern: compressible roughly like real values, so zram swap behaves as it
// would with a real cache.
//
// Every second it prints one JSON line with ops/s and latency quantiles (µs);
// at the end a summary line. With --shrink-at T the key range is halved T
// seconds after the start, or on SIGUSR1 (the "phase change"): with
// --shrink-mode free the
// upper half of the table is given back (MADV_DONTNEED), with cold it
// stays resident but is never touched again. --duration 0 runs until
// SIGTERM/SIGINT.
//
// Zipf keys are scattered over the table by default (a hot item's page holds
// three random others, so every page is warm); with --layout clustered rank r
// is slot r, so the popular items share pages and the tail's pages are
// touched rarely: a hot set, then warm pages a reclaimer can take, which is
// where protection changes what the kernel does.
//
//   kvload --size 450M [--item 1024] [--dist uniform|zipf] [--theta 0.99]
//          [--layout scrambled|clustered]
//          [--read-ratio 0.9] [--duration 60] [--threads 1]
//          [--shrink-at SECONDS] [--shrink-mode free|cold] [--seed N]

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common.h"

namespace {

using effect::Histogram;
using effect::Rng;
using effect::Zipf;

constexpr const char* kProg = "kvload";
using effect::kScramble;

struct Options : effect::LoadOptions {
    uint64_t size = 256ULL << 20;
    uint64_t item = 1024;
    bool clustered = false;
    int threads = 1;
    double shrink_at = -1;
    bool shrink_free = true;
};

std::atomic<bool> g_stop{false};
std::atomic<bool> g_shrink_now{false};
void on_signal(int) { g_stop.store(true); }
void on_usr1(int) { g_shrink_now.store(true); }

struct Shared {
    std::mutex mu;
    std::vector<Histogram> per_second;  // index: second since start
    std::vector<uint64_t> reads, writes;
    Histogram total;
    std::atomic<uint64_t> keys{0};
    std::atomic<uint64_t> epoch{0};     // bumped when keys changes
    std::vector<std::atomic<uint64_t>> seen_epoch;
    uint64_t start_ns = 0;
    explicit Shared(int threads) : seen_epoch(static_cast<size_t>(threads)) {}
};

// Item contents: the key, then item/4 bytes taken from a random pool (at a
// key-dependent offset), then a pattern. Built from memcpy only: populating
// a table of hundreds of MiB must be quick under emulation.
struct Filler {
    std::vector<unsigned char> pool;     // random, 64 KiB + one item
    std::vector<unsigned char> pattern;  // one item of pattern bytes
    explicit Filler(uint64_t item, Rng& rng) : pool((64u << 10) + item), pattern(item) {
        for (size_t i = 0; i + 8 <= pool.size(); i += 8) {
            const uint64_t r = rng.next();
            std::memcpy(pool.data() + i, &r, 8);
        }
        for (size_t i = 0; i < pattern.size(); ++i)
            pattern[i] = static_cast<unsigned char>('a' + i % 16);
    }
    void fill(unsigned char* p, uint64_t item, uint64_t key) const {
        const uint64_t rnd = item / 4;
        const uint64_t off = (key * 8191) % (64u << 10);
        std::memcpy(p + 8, pool.data() + off, rnd - 8);
        std::memcpy(p + rnd, pattern.data() + rnd, item - rnd);
        std::memcpy(p, &key, sizeof key);
    }
};

void worker(int id, const Options& opt, unsigned char* table, Shared& sh) {
    Rng rng(opt.seed * 7919 + static_cast<uint64_t>(id) + 1);
    std::vector<unsigned char> buf(opt.item);
    uint64_t epoch = ~0ULL, keys = 0;
    std::unique_ptr<Zipf> zipf;
    Histogram h;
    uint64_t nreads = 0, nwrites = 0;
    uint64_t cur_sec = 0;
    unsigned long long checksum = 0;
    auto flush = [&](uint64_t sec) {
        std::lock_guard lock(sh.mu);
        if (sec >= sh.per_second.size()) {
            sh.per_second.resize(sec + 1);
            sh.reads.resize(sec + 1);
            sh.writes.resize(sec + 1);
        }
        sh.per_second[sec].merge(h);
        sh.reads[sec] += nreads;
        sh.writes[sec] += nwrites;
        sh.total.merge(h);
        h.clear();
        nreads = nwrites = 0;
    };
    while (!g_stop.load(std::memory_order_relaxed)) {
        const uint64_t e = sh.epoch.load(std::memory_order_acquire);
        if (e != epoch) {
            epoch = e;
            keys = sh.keys.load();
            if (opt.zipf)
                zipf = std::make_unique<Zipf>(keys, opt.theta);
            sh.seen_epoch[static_cast<size_t>(id)].store(e, std::memory_order_release);
        }
        // 64 operations between checks of the clock for the second boundary;
        // each one timed on its own.
        for (int k = 0; k < 64; ++k) {
            const uint64_t rank = opt.zipf ? zipf->next(rng) : rng.below(keys);
            const uint64_t key = opt.zipf && !opt.clustered ? (rank * kScramble) % keys : rank;
            unsigned char* slot = table + key * opt.item;
            const bool read = rng.unit() < opt.read_ratio;
            const uint64_t t0 = effect::now_ns();
            if (read) {
                std::memcpy(buf.data(), slot, opt.item);
                checksum += buf[8];
                ++nreads;
            } else {
                const uint64_t r0 = rng.next(), r1 = rng.next();
                std::memcpy(slot + 8, &r0, 8);
                std::memcpy(slot + 16, &r1, 8);
                std::memcpy(slot + opt.item / 2, &r1, 8);
                ++nwrites;
            }
            const uint64_t t1 = effect::now_ns();
            h.add(t1 - t0);
            const uint64_t sec = (t1 - sh.start_ns) / effect::kSecNs;
            if (sec != cur_sec) {
                flush(cur_sec);
                cur_sec = sec;
            }
        }
    }
    flush(cur_sec);
    if (checksum == 42)  // keep the reads
        std::fprintf(stderr, " ");
}

void usage() {
    std::fprintf(stderr,
                 "usage: kvload --size BYTES [--item BYTES] [--dist uniform|zipf] [--theta T]\n"
                 "              [--layout scrambled|clustered] [--read-ratio R] [--duration S] [--threads N]\n"
                 "              [--shrink-at S] [--shrink-mode free|cold] [--seed N]\n");
}

// Takes a if it is one of this program's own options; false otherwise.
bool parse_own(effect::Args& args, const std::string& a, Options& o) {
    if (a == "--size")
        o.size = effect::parse_size(args.value());
    else if (a == "--item")
        o.item = effect::parse_size(args.value());
    else if (a == "--layout")
        o.clustered = args.either("scrambled", "clustered");
    else if (a == "--threads")
        o.threads = std::stoi(args.value());
    else if (a == "--shrink-at")
        o.shrink_at = effect::parse_seconds(args.value());
    else if (a == "--shrink-mode")
        o.shrink_free = !args.either("free", "cold");
    else
        return false;
    return true;
}

Options parse(int argc, char** argv) {
    auto o = effect::parse_load_args<Options>(kProg, argc, argv, usage, parse_own);
    if (o.item < 64 || o.item % 8 != 0)
        effect::die(kProg, "--item must be a multiple of 8 and at least 64");
    if (o.size < o.item * 16)
        effect::die(kProg, "--size too small");
    if (o.duration < 0 || o.threads < 1 || o.threads > 64)
        effect::die(kProg, "bad --duration or --threads");
    effect::check_theta(kProg, o);
    return o;
}

// The phase change at monotonic time t: halves the key range, waits until
// every worker uses the smaller one, with --shrink-mode free gives the upper
// half of the table back, and prints the "shrink" event.
void shrink(const Options& opt, Shared& sh, unsigned char* table, uint64_t bytes, uint64_t t, double start_ts) {
    const uint64_t half = bytes / opt.item / 2;
    sh.keys = half;
    const uint64_t e = sh.epoch.fetch_add(1) + 1;
    // Every worker must have moved to the smaller key range before
    // the upper half goes away.
    for (auto& s : sh.seen_epoch)
        while (s.load(std::memory_order_acquire) < e && !g_stop.load())
            usleep(1000);
    uint64_t freed = 0;
    if (opt.shrink_free) {
        const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
        const uint64_t from = (half * opt.item + page - 1) / page * page;
        if (from < bytes) {
            madvise(table + from, bytes - from, MADV_DONTNEED);
            freed = bytes - from;
        }
    }
    std::printf("{\"prog\":\"kvload\",\"event\":\"shrink\",\"t\":%.2f,\"ts\":%.3f,\"keys\":%" PRIu64
                ",\"mode\":\"%s\",\"freed_mb\":%.1f,\"rss_mb\":%.1f}\n",
                static_cast<double>(t - sh.start_ns) / 1e9, start_ts + static_cast<double>(t - sh.start_ns) / 1e9, half,
                opt.shrink_free ? "free" : "cold", static_cast<double>(freed) / 1048576.0,
                static_cast<double>(effect::rss_bytes()) / 1048576.0);
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    const Options opt = parse(argc, argv);
    effect::on_stop_signals(on_signal);
    struct sigaction su {};
    su.sa_handler = on_usr1;
    sigaction(SIGUSR1, &su, nullptr);

    const uint64_t nkeys = opt.size / opt.item;
    const uint64_t bytes = nkeys * opt.item;
    void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        effect::die(kProg, std::string("mmap: ") + std::strerror(errno));
    auto* table = static_cast<unsigned char*>(mem);
    // Regular pages only: THP would make "half the table" and reclaim coarse.
    madvise(mem, bytes, MADV_NOHUGEPAGE);

    const uint64_t t_pop = effect::now_ns();
    {
        Rng rng(opt.seed);
        const Filler filler(opt.item, rng);
        for (uint64_t k = 0; k < nkeys && !g_stop.load(); ++k)
            filler.fill(table + k * opt.item, opt.item, k);
    }
    std::printf("{\"prog\":\"kvload\",\"event\":\"ready\",\"keys\":%" PRIu64 ",\"table_mb\":%.1f,\"populate_s\":%.2f,"
                "\"rss_mb\":%.1f}\n",
                nkeys, static_cast<double>(bytes) / 1048576.0, static_cast<double>(effect::now_ns() - t_pop) / 1e9,
                static_cast<double>(effect::rss_bytes()) / 1048576.0);
    std::fflush(stdout);

    Shared sh(opt.threads);
    sh.keys = nkeys;
    sh.epoch = 1;
    sh.start_ns = effect::now_ns();
    std::vector<std::thread> threads;
    for (int i = 0; i < opt.threads; ++i)
        threads.emplace_back(worker, i, std::cref(opt), table, std::ref(sh));

    const double start_ts = effect::wall_clock_at(sh.start_ns);
    auto print_second = [&](uint64_t i) {
        Histogram h;
        uint64_t r = 0, w = 0;
        {
            std::lock_guard lock(sh.mu);
            if (i < sh.per_second.size()) {
                h = sh.per_second[i];
                r = sh.reads[i];
                w = sh.writes[i];
            }
        }
        std::string line =
            effect::second_line(kProg, i + 1, start_ts + static_cast<double>(i + 1), h, r, w, sh.keys.load());
        effect::appendf(line, ",\"rss_mb\":%.1f", static_cast<double>(effect::rss_bytes()) / 1048576.0);
        effect::print_line(std::move(line));
    };
    bool shrunk = false;
    auto shrink_when_due = [&](uint64_t t) {
        if (!shrunk && (g_shrink_now.load() ||
                        (opt.shrink_at >= 0 && t >= sh.start_ns + static_cast<uint64_t>(opt.shrink_at * 1e9)))) {
            shrunk = true;
            shrink(opt, sh, table, bytes, t, start_ts);
        }
    };
    effect::run_seconds(g_stop, threads, sh.start_ns, opt.duration, shrink_when_due, print_second);
    const double secs = static_cast<double>(effect::now_ns() - sh.start_ns) / 1e9;
    effect::print_line(effect::summary_line(kProg, secs, sh.total));
    munmap(mem, bytes);
    return 0;
}
