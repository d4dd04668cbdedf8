// SPDX-License-Identifier: LGPL-2.1-or-later
//
// burster: the request spikes of the effectiveness benchmark's burst
// scenario (bench/effect/README.md) — a service that, every so often,
// allocates a lot of memory at once, uses it for a while and frees it.
//
//   burster [--size 150M] [--every 20] [--hold 10] [--duration S] [--delay 0]
//       After DELAY seconds, every EVERY seconds: maps SIZE of private
//       anonymous memory, writes every 4 KiB page of it (timed: the burst's
//       "touch" time, what a spike waits for when the memory is not free),
//       keeps it HOLD seconds, then unmaps it. Until DURATION has passed
//       (0: until SIGTERM). One JSON line per burst when it is freed:
//       {"prog":"burster","burst":K,"ts":START,"touched_ts":T,"end_ts":E,
//       "touch_ms":MS,"mb":MB} (wall-clock seconds), then a summary.

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common.h"

namespace {

constexpr const char* kProg = "burster";
constexpr uint64_t kPage = 4096;

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true); }

struct Options {
    uint64_t size = 150ULL << 20;
    double every = 20;
    double hold = 10;
    double duration = 0;
    double delay = 0;
};

Options parse(int argc, char** argv) {
    Options o;
    effect::Args args(kProg, argc, argv);
    std::string a;
    while (args.next(a)) {
        if (a == "--size")
            o.size = effect::parse_size(args.value());
        else if (a == "--every")
            o.every = effect::parse_seconds(args.value());
        else if (a == "--hold")
            o.hold = effect::parse_seconds(args.value());
        else if (a == "--duration")
            o.duration = effect::parse_seconds(args.value());
        else if (a == "--delay")
            o.delay = effect::parse_seconds(args.value());
        else if (a == "-h" || a == "--help") {
            std::fprintf(stderr, "usage: burster [--size SIZE] [--every S] [--hold S] [--duration S] [--delay S]\n");
            std::exit(0);
        } else
            effect::die(kProg, "unknown argument " + a);
    }
    if (o.size < kPage || o.every <= 0 || o.hold < 0 || o.hold >= o.every || o.duration < 0 || o.delay < 0)
        effect::die(kProg, "bad --size, --every, --hold (less than --every), --duration or --delay");
    return o;
}

// Sleeps until the monotonic instant t_ns or a stop; false on a stop.
bool sleep_until(uint64_t t_ns) {
    while (!g_stop.load()) {
        const uint64_t now = effect::now_ns();
        if (now >= t_ns)
            return true;
        usleep(static_cast<useconds_t>(std::min<uint64_t>(t_ns - now, 100'000'000ULL) / 1000));
    }
    return false;
}

double wall(uint64_t mono_ns) { return effect::wall_clock_at(mono_ns); }

}  // namespace

int main(int argc, char** argv) {
    const Options opt = parse(argc, argv);
    effect::on_stop_signals(on_signal);
    const uint64_t pages = opt.size / kPage;
    const auto s_ns = [](double s) { return static_cast<uint64_t>(s * 1e9); };
    const uint64_t start = effect::now_ns() + s_ns(opt.delay);
    const uint64_t end = opt.duration > 0 ? effect::now_ns() + s_ns(opt.duration) : ~0ULL;
    uint64_t bursts = 0;
    double touch_total_ms = 0;
    for (uint64_t k = 0;; ++k) {
        const uint64_t at = start + k * s_ns(opt.every);
        if (at + s_ns(opt.hold) > end || !sleep_until(at))
            break;
        const uint64_t t0 = effect::now_ns();
        void* m = mmap(nullptr, pages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            effect::die(kProg, std::string("mmap: ") + std::strerror(errno));
        auto* p = static_cast<unsigned char*>(m);
        for (uint64_t i = 0; i < pages; ++i)
            std::memcpy(p + i * kPage, &i, sizeof i);  // a page that is not all zeros
        const uint64_t t1 = effect::now_ns();
        const bool held = sleep_until(t1 + s_ns(opt.hold));
        munmap(m, pages * kPage);
        const uint64_t t2 = effect::now_ns();
        const double touch_ms = static_cast<double>(t1 - t0) / 1e6;
        touch_total_ms += touch_ms;
        std::printf("{\"prog\":\"%s\",\"burst\":%" PRIu64 ",\"ts\":%.3f,\"touched_ts\":%.3f,\"end_ts\":%.3f,"
                    "\"touch_ms\":%.1f,\"mb\":%.1f}\n",
                    kProg, k + 1, wall(t0), wall(t1), wall(t2), touch_ms,
                    static_cast<double>(pages * kPage) / 1048576.0);
        std::fflush(stdout);
        ++bursts;
        if (!held)
            break;
    }
    std::printf("{\"prog\":\"%s\",\"summary\":true,\"bursts\":%" PRIu64 ",\"touch_ms_mean\":%.1f}\n", kProg, bursts,
                bursts ? touch_total_ms / static_cast<double>(bursts) : 0.0);
    std::fflush(stdout);
    return 0;
}
