// SPDX-License-Identifier: LGPL-2.1-or-later
//
// anonbatch: the anonymous-memory batch job of the effectiveness benchmark's
// anon-batch scenario (bench/effect/README.md) — memory a batch job needs
// and keeps using (an in-memory sort, a build), none of it cheap to reclaim:
// to take a page from it the kernel has to swap it out, and the job faults
// it back within a second or two.
//
//   anonbatch [--size 600M] [--duration S] [--threads 1]
//       Allocates SIZE of private anonymous memory and fills it page by page
//       as kvload fills its table (a quarter of each 4 KiB page random, the
//       rest a pattern: zram compresses it about 3:1, as it does memcached's
//       values, instead of storing a same-filled page for nothing), then
//       until DURATION has passed picks pages uniformly at random and, in
//       each, reads one 64-byte line and rewrites the page's first 8 bytes.
//       One JSON line per second as cacheread's: the pages filled or touched
//       in it ("iops") and their MB ("mb_s"), so the harness's stop and
//       invalid-run rules read it as they read cacheread; a summary at the end.

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common.h"

namespace {

constexpr const char* kProg = "anonbatch";
constexpr uint64_t kPage = 4096;
constexpr uint64_t kLine = 64;

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true); }

// Page contents: the page number, then a quarter of a page from a random
// pool (at a page-dependent offset), then a pattern (as kvload's Filler).
class PageFiller {
public:
    PageFiller() : pool_((64u << 10) + kPage), pattern_(kPage) {
        effect::Rng rng(601);
        for (size_t i = 0; i + 8 <= pool_.size(); i += 8) {
            const uint64_t r = rng.next();
            std::memcpy(pool_.data() + i, &r, 8);
        }
        for (size_t i = 0; i < pattern_.size(); ++i)
            pattern_[i] = static_cast<unsigned char>('a' + i % 16);
    }
    void fill(unsigned char* p, uint64_t page) const {
        const uint64_t rnd = kPage / 4;
        std::memcpy(p, &page, sizeof page);
        std::memcpy(p + 8, pool_.data() + (page * 8191) % (64u << 10), rnd - 8);
        std::memcpy(p + rnd, pattern_.data() + rnd, kPage - rnd);
    }

private:
    std::vector<unsigned char> pool_;
    std::vector<unsigned char> pattern_;
};

struct Options {
    uint64_t size = 600ULL << 20;
    double duration = 60;
    int threads = 1;
};

Options parse(int argc, char** argv) {
    Options o;
    effect::Args args(kProg, argc, argv);
    std::string a;
    while (args.next(a)) {
        if (a == "--size")
            o.size = effect::parse_size(args.value());
        else if (a == "--duration")
            o.duration = effect::parse_seconds(args.value());
        else if (a == "--threads") {
            const std::string v = args.value();
            char* end = nullptr;
            const long n = std::strtol(v.c_str(), &end, 10);
            if (v.empty() || *end != '\0' || n < 1 || n > 64)
                effect::die(kProg, "--threads takes 1..64, got " + v);
            o.threads = static_cast<int>(n);
        }
        else if (a == "-h" || a == "--help") {
            std::fprintf(stderr, "usage: anonbatch [--size SIZE] [--duration S] [--threads N]\n");
            std::exit(0);
        } else
            effect::die(kProg, "unknown argument " + a);
    }
    if (o.size < kPage || o.duration <= 0 || o.threads < 1 || o.threads > 64)
        effect::die(kProg, "bad --size, --duration or --threads");
    return o;
}

// Thread id's work: fill its share of the pages (every threads-th, from id),
// then touch pages at random over the whole area until stop.
void worker(int id, int threads, unsigned char* area, uint64_t pages, const PageFiller& filler,
            std::atomic<uint64_t>& done) {
    uint64_t local = 0;
    auto count = [&] {
        if (++local == 16) {
            done.fetch_add(local, std::memory_order_relaxed);
            local = 0;
        }
    };
    for (uint64_t p = static_cast<uint64_t>(id); p < pages && !g_stop.load(std::memory_order_relaxed);
         p += static_cast<uint64_t>(threads)) {
        filler.fill(area + p * kPage, p);
        count();
    }
    effect::Rng rng(static_cast<uint64_t>(id) * 104729 + 31);
    uint64_t sink = 0;
    while (!g_stop.load(std::memory_order_relaxed)) {
        const uint64_t p = rng.below(pages);
        unsigned char* page = area + p * kPage;
        uint64_t line[kLine / 8];
        std::memcpy(line, page + rng.below(kPage / kLine) * kLine, kLine);
        for (const uint64_t w : line)
            sink += w;
        std::memcpy(page, &sink, sizeof sink);
        count();
    }
    done.fetch_add(local);
}

}  // namespace

int main(int argc, char** argv) {
    const Options opt = parse(argc, argv);
    const uint64_t pages = opt.size / kPage;
    void* m = mmap(nullptr, pages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        effect::die(kProg, std::string("mmap: ") + std::strerror(errno));
    // Base pages only: the kernel swaps a huge page out whole, which would
    // make the job's working set coarser than the workload's.
    madvise(m, pages * kPage, MADV_NOHUGEPAGE);
    auto* area = static_cast<unsigned char*>(m);
    effect::on_stop_signals(on_signal);

    const PageFiller filler;
    std::atomic<uint64_t> done{0};
    std::vector<std::thread> workers;
    const uint64_t start = effect::now_ns();
    for (int id = 0; id < opt.threads; ++id)
        workers.emplace_back([&, id] { worker(id, opt.threads, area, pages, filler, done); });

    const uint64_t end = start + static_cast<uint64_t>(opt.duration * 1e9);
    uint64_t sec = 0, last = 0;
    while (!g_stop.load()) {
        const uint64_t next = start + (sec + 1) * 1'000'000'000ULL;
        const uint64_t t = effect::now_ns();
        if (t < next) {
            usleep(static_cast<useconds_t>((next - t) / 1000));
            continue;
        }
        const uint64_t n = done.load();
        ++sec;
        std::printf("{\"prog\":\"%s\",\"t\":%" PRIu64 ",\"ts\":%.3f,\"iops\":%" PRIu64 ",\"mb_s\":%.2f}\n", kProg, sec,
                    effect::wall_clock_at(t), n - last, static_cast<double>((n - last) * kPage) / 1048576.0);
        std::fflush(stdout);
        last = n;
        if (next >= end)
            break;
    }
    g_stop = true;
    for (auto& w : workers)
        w.join();
    const double secs = static_cast<double>(effect::now_ns() - start) / 1e9;
    const uint64_t n = done.load();
    std::printf("{\"prog\":\"%s\",\"summary\":true,\"seconds\":%.2f,\"pages\":%" PRIu64 ",\"mb_s\":%.2f}\n", kProg, secs,
                n, static_cast<double>(n * kPage) / 1048576.0 / secs);
    std::fflush(stdout);
    return 0;
}
