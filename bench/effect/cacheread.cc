// SPDX-License-Identifier: LGPL-2.1-or-later
//
// cacheread: buffered random reads over a set of files, for the
// effectiveness benchmark (bench/effect/README.md) — the page-cache-heavy
// batch job, modelled on the seeds' `fio --buffered=1 --rw=randread`.
//
//   cacheread [--duration S] [--block 4096] [--threads 1] FILE...
//       Reads BLOCK-sized, BLOCK-aligned pieces at uniformly random offsets
//       of the files (a file is picked in proportion to its size), with
//       POSIX_FADV_RANDOM so there is no readahead. Over files much larger
//       than RAM this is a single-use streamer; over a set smaller than RAM
//       it is a reused file working set. One JSON line per second with MB/s.
//   cacheread --mmap ...
//       The same reads from a shared read-only mapping of the files
//       (MADV_RANDOM) instead of pread: an index or column store that maps
//       its files. Mapped pages are not cheap cache to MGLRU; it ages them
//       through the page tables like anon memory, so reclaim has to weigh
//       them against other cgroups' anon pages instead of dropping them
//       first (with pread on 6.1 it never swapped anything).
//   cacheread --print-size SIZE     prints SIZE ("320M") in bytes
//   cacheread --create SIZE [--sparse] FILE
//       Makes FILE of SIZE bytes: written with incompressible data, or with
//       --sparse a hole (reads of a hole still fill the page cache, with
//       zeroed pages and no device I/O, so a "file larger than RAM" costs
//       no disk space).

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common.h"

namespace {

constexpr const char* kProg = "cacheread";

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true); }

struct File {
    int fd = -1;
    uint64_t blocks = 0;
    const char* map = nullptr;  // with --mmap
};

int create(const std::string& path, uint64_t size, bool sparse) {
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        effect::die(kProg, path + ": " + std::strerror(errno));
    if (sparse) {
        if (ftruncate(fd, static_cast<off_t>(size)) != 0)
            effect::die(kProg, path + ": ftruncate: " + std::strerror(errno));
    } else {
        // 1 MiB of random data, written over and over with a block number
        // stamped into every 4 KiB (no two blocks alike, quick to make).
        std::vector<uint64_t> buf(1 << 17);
        effect::Rng rng(size);
        for (auto& w : buf)
            w = rng.next();
        uint64_t done = 0;
        while (done < size) {
            for (size_t i = 0; i < buf.size(); i += 512)
                buf[i] = done / 4096 + i / 512;
            const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size() * 8, size - done));
            const ssize_t r = write(fd, buf.data(), n);
            if (r <= 0)
                effect::die(kProg, path + ": write: " + std::strerror(errno));
            done += static_cast<uint64_t>(r);
        }
        if (fsync(fd) != 0)
            effect::die(kProg, path + ": fsync: " + std::strerror(errno));
    }
    close(fd);
    std::printf("{\"prog\":\"cacheread\",\"event\":\"created\",\"file\":\"%s\",\"mb\":%.1f,\"sparse\":%s}\n",
                path.c_str(), static_cast<double>(size) / 1048576.0, sparse ? "true" : "false");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    double duration = 60;
    uint64_t block = 4096;
    int threads = 1;
    uint64_t create_size = 0;
    bool sparse = false;
    bool use_mmap = false;
    std::vector<std::string> paths;
    effect::Args args(kProg, argc, argv);
    std::string a;
    while (args.next(a)) {
        if (a == "--duration")
            duration = effect::parse_seconds(args.value());
        else if (a == "--block")
            block = effect::parse_size(args.value());
        else if (a == "--threads")
            threads = std::stoi(args.value());
        else if (a == "--create")
            create_size = effect::parse_size(args.value());
        else if (a == "--sparse")
            sparse = true;
        else if (a == "--mmap")
            use_mmap = true;
        else if (a == "--print-size") {  // for scripts: "320M" -> bytes
            std::printf("%" PRIu64 "\n", effect::parse_size(args.value()));
            return 0;
        }
        else if (a == "-h" || a == "--help") {
            std::fprintf(stderr, "usage: cacheread [--duration S] [--block B] [--threads N] [--mmap] FILE...\n"
                                 "       cacheread --create SIZE [--sparse] FILE\n");
            return 0;
        } else if (!a.empty() && a[0] == '-')
            effect::die(kProg, "unknown option " + a);
        else
            paths.push_back(a);
    }
    if (paths.empty())
        effect::die(kProg, "no files given");
    if (create_size > 0) {
        if (paths.size() != 1)
            effect::die(kProg, "--create takes one file");
        return create(paths[0], create_size, sparse);
    }
    if (duration <= 0 || block < 512 || threads < 1 || threads > 64)
        effect::die(kProg, "bad --duration, --block or --threads");

    effect::on_stop_signals(on_signal);

    std::vector<File> files;
    uint64_t total_blocks = 0;
    for (const auto& p : paths) {
        File f;
        f.fd = open(p.c_str(), O_RDONLY);
        if (f.fd < 0)
            effect::die(kProg, p + ": " + std::strerror(errno));
        struct stat st {};
        fstat(f.fd, &st);
        f.blocks = static_cast<uint64_t>(st.st_size) / block;
        if (f.blocks == 0)
            effect::die(kProg, p + ": smaller than one block");
        posix_fadvise(f.fd, 0, 0, POSIX_FADV_RANDOM);
        if (use_mmap) {
            void* m = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, f.fd, 0);
            if (m == MAP_FAILED)
                effect::die(kProg, p + ": mmap: " + std::strerror(errno));
            madvise(m, static_cast<size_t>(st.st_size), MADV_RANDOM);
            f.map = static_cast<const char*>(m);
        }
        total_blocks += f.blocks;
        files.push_back(f);
    }

    std::atomic<uint64_t> nreads{0};
    std::vector<std::thread> workers;
    for (int id = 0; id < threads; ++id) {
        workers.emplace_back([&, id] {
            effect::Rng rng(static_cast<uint64_t>(id) * 104729 + 17);
            std::vector<char> buf(block);
            uint64_t local = 0;
            unsigned sink = 0;
            while (!g_stop.load(std::memory_order_relaxed)) {
                uint64_t b = rng.below(total_blocks);
                size_t fi = 0;
                while (b >= files[fi].blocks) {
                    b -= files[fi].blocks;
                    ++fi;
                }
                if (files[fi].map) {
                    std::memcpy(buf.data(), files[fi].map + b * block, block);
                    sink += static_cast<unsigned char>(buf[block / 2]);
                } else if (pread(files[fi].fd, buf.data(), block, static_cast<off_t>(b * block)) < 0)
                    effect::die(kProg, std::string("pread: ") + std::strerror(errno));
                if (++local == 16) {
                    nreads.fetch_add(local, std::memory_order_relaxed);
                    local = 0;
                }
            }
            nreads.fetch_add(local);
            if (sink == 1)  // keep the mapped reads
                std::fprintf(stderr, " ");
        });
    }

    const uint64_t start = effect::now_ns();
    const uint64_t end = start + static_cast<uint64_t>(duration * 1e9);
    uint64_t sec = 0, last = 0;
    while (!g_stop.load()) {
        const uint64_t next = start + (sec + 1) * 1'000'000'000ULL;
        uint64_t t = effect::now_ns();
        if (t < next) {
            usleep(static_cast<useconds_t>((next - t) / 1000));
            continue;
        }
        const uint64_t n = nreads.load();
        struct timespec rt {};
        clock_gettime(CLOCK_REALTIME, &rt);
        ++sec;
        std::printf("{\"prog\":\"cacheread\",\"t\":%" PRIu64 ",\"ts\":%.3f,\"iops\":%" PRIu64 ",\"mb_s\":%.2f}\n", sec,
                    static_cast<double>(rt.tv_sec) + static_cast<double>(rt.tv_nsec) / 1e9, n - last,
                    static_cast<double>((n - last) * block) / 1048576.0);
        std::fflush(stdout);
        last = n;
        if (next >= end)
            break;
    }
    g_stop = true;
    for (auto& w : workers)
        w.join();
    const double secs = static_cast<double>(effect::now_ns() - start) / 1e9;
    const uint64_t n = nreads.load();
    std::printf("{\"prog\":\"cacheread\",\"summary\":true,\"seconds\":%.2f,\"reads\":%" PRIu64 ",\"mb_s\":%.2f}\n",
                secs, n, static_cast<double>(n * block) / 1048576.0 / secs);
    std::fflush(stdout);
    return 0;
}
