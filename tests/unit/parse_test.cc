// SPDX-License-Identifier: LGPL-2.1-or-later
#include "parse.h"

#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace memprotd {
namespace {

using ::testing::HasSubstr;

// memory.stat of a busy slice on a 6.1 guest, in the kernel's key order.
constexpr std::string_view kMemoryStat61 =
    "anon 1470869504\n"
    "file 3012853760\n"
    "kernel 96337920\n"
    "kernel_stack 2523136\n"
    "pagetables 10743808\n"
    "sec_pagetables 0\n"
    "percpu 1263584\n"
    "sock 8192\n"
    "vmalloc 24576\n"
    "shmem 4546560\n"
    "zswap 0\n"
    "zswapped 0\n"
    "file_mapped 346390528\n"
    "file_dirty 1212416\n"
    "file_writeback 0\n"
    "swapcached 0\n"
    "anon_thp 318767104\n"
    "file_thp 0\n"
    "shmem_thp 0\n"
    "inactive_anon 1187299328\n"
    "active_anon 287543296\n"
    "inactive_file 2110967808\n"
    "active_file 897339392\n"
    "unevictable 0\n"
    "slab_reclaimable 70098504\n"
    "slab_unreclaimable 11283648\n"
    "slab 81382152\n"
    "workingset_refault_anon 0\n"
    "workingset_refault_file 48213\n"
    "workingset_activate_anon 0\n"
    "workingset_activate_file 10345\n"
    "workingset_restore_anon 0\n"
    "workingset_restore_file 4012\n"
    "workingset_nodereclaim 0\n"
    "pgscan 912431\n"
    "pgsteal 893112\n"
    "pgscan_kswapd 850213\n"
    "pgscan_direct 62218\n"
    "pgsteal_kswapd 835117\n"
    "pgsteal_direct 57995\n"
    "pgfault 50214337\n"
    "pgmajfault 21455\n"
    "pgrefill 212290\n"
    "pgactivate 1133487\n"
    "pgdeactivate 198231\n"
    "pglazyfree 0\n"
    "pglazyfreed 0\n"
    "zswpin 0\n"
    "zswpout 0\n"
    "thp_fault_alloc 1488\n"
    "thp_collapse_alloc 12\n";

constexpr std::string_view kMeminfo61 =
    "MemTotal:       24594324 kB\n"
    "MemFree:         9127240 kB\n"
    "MemAvailable:   18431572 kB\n"
    "Buffers:          412208 kB\n"
    "Cached:          8790316 kB\n"
    "SwapCached:            0 kB\n"
    "Active:          5124788 kB\n"
    "Inactive:        8815176 kB\n"
    "SwapTotal:       2097148 kB\n"
    "SwapFree:        2097148 kB\n"
    "Dirty:              1336 kB\n"
    "AnonHugePages:    565248 kB\n"
    "HugePages_Total:       0\n"
    "HugePages_Free:        0\n"
    "HugePages_Rsvd:        0\n"
    "HugePages_Surp:        0\n"
    "Hugepagesize:       2048 kB\n"
    "Hugetlb:               0 kB\n"
    "DirectMap4k:      493476 kB\n"
    "DirectMap2M:    17211392 kB\n"
    "DirectMap1G:     8388608 kB\n";

// Exactly as 6.1 lru_gen_seq_show() prints, trailing spaces included.
constexpr std::string_view kLruGen61 =
    "memcg     1 /\n"
    " node     0\n"
    "          0      13784       1014      22337 \n"
    "          1      13784          0          0 \n"
    "          2      13784          0          0 \n"
    "          3       5312      38162      17186 \n"
    "memcg     2 /sys-fs-fuse-connections.mount\n"
    " node     0\n"
    "          0      13788          0          0 \n"
    "          1      13788          0          0 \n"
    "          2      13788          0          0 \n"
    "          3      13788          0          0 \n";

// ---- memory.current and friends -------------------------------------------

TEST(U64OrMax, ParsesANumberWithATrailingNewline) {
    const auto r = parse_u64_or_max("1470869504\n", "memory.current");
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_EQ(*r, 1470869504u);
}

TEST(U64OrMax, ParsesANumberWithoutATrailingNewlineOrWithTrailingWhitespace) {
    EXPECT_EQ(*parse_u64_or_max("42", "f"), 42u);
    EXPECT_EQ(*parse_u64_or_max("42 \t\n", "f"), 42u);
}

TEST(U64OrMax, MapsMaxToUnlimited) {
    const auto r = parse_u64_or_max("max\n", "memory.max");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, kUnlimited);
}

TEST(U64OrMax, AcceptsTheLargestU64) {
    const auto r = parse_u64_or_max("18446744073709551615\n", "memory.low");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, UINT64_MAX);
}

TEST(U64OrMax, RejectsAValueThatOverflowsU64InsteadOfWrapping) {
    const auto r = parse_u64_or_max("18446744073709551616\n", "memory.low");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().file, "memory.low");
    EXPECT_EQ(r.error().line, 1);
    EXPECT_THAT(r.error().message, HasSubstr("out of range"));
}

TEST(U64OrMax, RejectsEmptyInput) {
    for (const std::string_view text : {"", "\n", "  \n\n"}) {
        const auto r = parse_u64_or_max(text, "memory.current");
        ASSERT_FALSE(r.ok()) << "[" << text << "]";
        EXPECT_EQ(r.error().file, "memory.current");
        EXPECT_THAT(r.error().message, HasSubstr("empty"));
    }
}

TEST(U64OrMax, RejectsTextThatIsNotANumberQuotingIt) {
    const auto r = parse_u64_or_max("abc\n", "memory.high");
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.error().message, HasSubstr("got 'abc'"));
}

TEST(U64OrMax, RejectsSignsFractionsAndMisspelledMax) {
    for (const std::string_view text : {"-1", "+1", "1.5", "maxx", "MAX", "1 2", "0x10"})
        EXPECT_FALSE(parse_u64_or_max(text, "f").ok()) << text;
}

TEST(U64OrMax, NamesTheLineOfTheValueAfterLeadingBlankLines) {
    const auto r = parse_u64_or_max("\n\n12x\n", "memory.current");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().line, 3);
}

TEST(U64OrMax, RejectsASecondLineNamingIt) {
    const auto r = parse_u64_or_max("1\n2\n", "memory.current");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().line, 2);
}

// ---- memory.stat --------------------------------------------------------------

TEST(MemoryStat, ParsesARealistic61FileKeepingEveryKeyInFileOrder) {
    MemoryStat stat;
    const auto r = parse_memory_stat(kMemoryStat61, "workload.slice/memory.stat", stat);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    ASSERT_EQ(stat.size(), 51u);
    EXPECT_EQ(stat.entries().front().key, "anon");
    EXPECT_EQ(stat.entries().front().value, 1470869504u);
    EXPECT_EQ(stat.entries().back().key, "thp_collapse_alloc");
    EXPECT_EQ(stat.get("inactive_file"), 2110967808u);
    EXPECT_EQ(stat.get("file_mapped"), 346390528u);
    EXPECT_EQ(stat.get("workingset_refault_file"), 48213u);
    EXPECT_EQ(stat.get("pgsteal"), 893112u);
}

TEST(MemoryStat, KnownKeysAreTheSameAsLookingThemUp) {
    MemoryStat stat;
    ASSERT_TRUE(parse_memory_stat(kMemoryStat61, "f", stat).ok());
    for (size_t i = 0; i < static_cast<size_t>(StatKey::Count); ++i) {
        const auto k = static_cast<StatKey>(i);
        EXPECT_EQ(known_stat_key(stat_key_name(k)), k);
        ASSERT_TRUE(stat.find(stat_key_name(k)).has_value()) << stat_key_name(k) << " not in the 6.1 file";
        EXPECT_EQ(stat.known(k), stat.get(stat_key_name(k))) << stat_key_name(k);
    }
    EXPECT_FALSE(known_stat_key("thp_collapse_alloc").has_value());
    EXPECT_FALSE(known_stat_key("anon2").has_value());
    // Reused for a file without them: absent keys read 0; a duplicate keeps
    // its first value, as find() does.
    ASSERT_TRUE(parse_memory_stat("file 5\nfile 6\n", "f", stat).ok());
    EXPECT_EQ(stat.known(StatKey::File), 5u);
    EXPECT_EQ(stat.known(StatKey::Anon), 0u);
    EXPECT_EQ(stat.known(StatKey::Pgsteal), 0u);
}

TEST(MemoryStat, KeepsUnknownKeysInFileOrder) {
    MemoryStat stat;
    ASSERT_TRUE(parse_memory_stat("anon 1\nzz_future_key 7\nfile 2\npgdemote_proactive 3\n", "f", stat).ok());
    ASSERT_EQ(stat.size(), 4u);
    EXPECT_EQ(stat.entries()[1].key, "zz_future_key");
    EXPECT_EQ(stat.entries()[1].value, 7u);
    EXPECT_EQ(stat.entries()[3].key, "pgdemote_proactive");
}

TEST(MemoryStat, KeepsBothEntriesOfADuplicateKey) {
    MemoryStat stat;
    ASSERT_TRUE(parse_memory_stat("anon 1\nanon 2\n", "f", stat).ok());
    ASSERT_EQ(stat.size(), 2u);
    EXPECT_EQ(stat.entries()[0].value, 1u);
    EXPECT_EQ(stat.entries()[1].value, 2u);
}

TEST(MemoryStat, ClearsEntriesOfAnEarlierParseWhenReused) {
    MemoryStat stat;
    ASSERT_TRUE(parse_memory_stat(kMemoryStat61, "f", stat).ok());
    ASSERT_TRUE(parse_memory_stat("file 5\n", "f", stat).ok());
    EXPECT_EQ(stat.size(), 1u);
    EXPECT_EQ(stat.get("file"), 5u);
    EXPECT_FALSE(stat.find("anon").has_value());
}

TEST(MemoryStat, ToleratesNoTrailingNewlineAndTrailingWhitespace) {
    MemoryStat stat;
    ASSERT_TRUE(parse_memory_stat("anon 1 \nfile 2\t", "f", stat).ok());
    EXPECT_EQ(stat.get("anon"), 1u);
    EXPECT_EQ(stat.get("file"), 2u);
    EXPECT_EQ(stat.size(), 2u);
}

TEST(MemoryStat, RejectsALineWithoutAValueNamingLineAndKey) {
    MemoryStat stat;
    const auto r = parse_memory_stat("anon 1\nfile 2\nshmem\nkernel 3\n", "a/memory.stat", stat);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().file, "a/memory.stat");
    EXPECT_EQ(r.error().line, 3);
    EXPECT_EQ(r.error().key, "shmem");
    EXPECT_THAT(r.error().message, HasSubstr("missing value"));
}

TEST(MemoryStat, RejectsANonNumericValueNamingLineAndKey) {
    MemoryStat stat;
    const auto r = parse_memory_stat("anon 1\nfile abc\n", "f", stat);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().line, 2);
    EXPECT_EQ(r.error().key, "file");
    EXPECT_EQ(r.error().message, "expected an unsigned integer, got 'abc'");
}

TEST(MemoryStat, KeepsTheLinesBeforeTheBadOne) {
    MemoryStat stat;
    ASSERT_FALSE(parse_memory_stat("anon 1\nfile 2\nshmem x\n", "f", stat).ok());
    EXPECT_EQ(stat.size(), 2u);
    EXPECT_EQ(stat.get("file"), 2u);
}

TEST(MemoryStat, RejectsATruncatedFile) {
    MemoryStat stat;
    const auto r = parse_memory_stat("anon 1\nfile 2\nfile_ma", "f", stat);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().line, 3);
    EXPECT_EQ(r.error().key, "file_ma");
}

TEST(MemoryStat, AcceptsTheLargestU64AndRejectsOneMore) {
    MemoryStat stat;
    ASSERT_TRUE(parse_memory_stat("pgfault 18446744073709551615\n", "f", stat).ok());
    EXPECT_EQ(stat.get("pgfault"), UINT64_MAX);
    const auto r = parse_memory_stat("pgfault 18446744073709551616\n", "f", stat);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().key, "pgfault");
    EXPECT_THAT(r.error().message, HasSubstr("out of range"));
}

TEST(MemoryStat, RejectsNegativeValuesAndTextAfterTheValue) {
    MemoryStat stat;
    EXPECT_FALSE(parse_memory_stat("anon -1\n", "f", stat).ok());
    const auto r = parse_memory_stat("anon 1 2\n", "f", stat);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.error().message, HasSubstr("unexpected text"));
}

TEST(MemoryStat, RejectsEmptyInput) {
    MemoryStat stat;
    stat.append("stale", 1);
    const auto r = parse_memory_stat("", "f", stat);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.error().message, HasSubstr("empty"));
    EXPECT_TRUE(stat.empty());
}

// ---- memory.events ------------------------------------------------------------

TEST(MemoryEvents, FillsKnownKeysAndIgnoresNewOnes) {
    const auto r = parse_memory_events(
        "low 3\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\nsock_throttled 9\n", "memory.events");
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_EQ(r->low, 3u);
    EXPECT_EQ(r->max, 12u);
    EXPECT_EQ(r->oom, 1u);
    EXPECT_EQ(r->oom_kill, 1u);
    EXPECT_EQ(r->oom_group_kill, 0u);
}

TEST(MemoryEvents, RejectsANonNumericValueNamingTheKey) {
    const auto r = parse_memory_events("low 3\nhigh x\n", "memory.events");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().line, 2);
    EXPECT_EQ(r.error().key, "high");
}

TEST(MemoryEvents, RejectsEmptyInput) { EXPECT_FALSE(parse_memory_events("\n", "memory.events").ok()); }

// ---- PSI ------------------------------------------------------------------------

TEST(Psi, ParsesSomeAndFullLines) {
    const auto r = parse_psi(
        "some avg10=1.53 avg60=0.87 avg300=0.21 total=2851209\n"
        "full avg10=0.50 avg60=0.25 avg300=0.06 total=1133487\n",
        "memory.pressure");
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_DOUBLE_EQ(r->some.avg10, 1.53);
    EXPECT_DOUBLE_EQ(r->some.avg60, 0.87);
    EXPECT_DOUBLE_EQ(r->some.avg300, 0.21);
    EXPECT_EQ(r->some.total_us, 2851209u);
    ASSERT_TRUE(r->full.has_value());
    EXPECT_DOUBLE_EQ(r->full->avg10, 0.50);
    EXPECT_EQ(r->full->total_us, 1133487u);
}

TEST(Psi, AcceptsAFileWithOnlyASomeLineAndNoTrailingNewline) {
    const auto r = parse_psi("some avg10=100.00 avg60=12.34 avg300=0.00 total=0", "cpu.pressure");
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_DOUBLE_EQ(r->some.avg10, 100.0);
    EXPECT_FALSE(r->full.has_value());
}

TEST(Psi, RequiresTotalOnEveryLine) {
    const auto r = parse_psi(
        "some avg10=0.00 avg60=0.00 avg300=0.00 total=5\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00\n",
        "memory.pressure");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().line, 2);
    EXPECT_EQ(r.error().key, "total");
    EXPECT_THAT(r.error().message, HasSubstr("missing total="));
}

TEST(Psi, RequiresEveryAverage) {
    for (const std::string_view text : {"some avg60=0.00 avg300=0.00 total=1", "some avg10=0.00 avg300=0.00 total=1",
                                        "some avg10=0.00 avg60=0.00 total=1"})
        EXPECT_FALSE(parse_psi(text, "f").ok()) << text;
}

TEST(Psi, RejectsAnUnknownLeadingWord) {
    const auto r = parse_psi("some avg10=0.00 avg60=0.00 avg300=0.00 total=1\nhalf avg10=0.00\n", "f");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().line, 2);
    EXPECT_THAT(r.error().message, HasSubstr("'half'"));
}

TEST(Psi, RequiresASomeLine) {
    const auto r = parse_psi("full avg10=0.00 avg60=0.00 avg300=0.00 total=1\n", "f");
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.error().message, HasSubstr("missing 'some'"));
}

TEST(Psi, RejectsADuplicateLine) {
    const auto r = parse_psi(
        "some avg10=0.00 avg60=0.00 avg300=0.00 total=1\nsome avg10=0.00 avg60=0.00 avg300=0.00 total=2\n", "f");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().line, 2);
}

TEST(Psi, RejectsAveragesThatAreNotPlainDecimals) {
    for (const std::string_view avg : {"abc", "nan", "inf", "1e5", "-1.00", "1.", ".5", "", "1.2.3"}) {
        const std::string text = fmt::format("some avg10={} avg60=0.00 avg300=0.00 total=1\n", avg);
        const auto r = parse_psi(text, "f");
        ASSERT_FALSE(r.ok()) << avg;
        EXPECT_EQ(r.error().key, "avg10") << avg;
    }
}

TEST(Psi, AcceptsTheLargestTotalAndRejectsOneMore) {
    const auto ok = parse_psi("some avg10=0.00 avg60=0.00 avg300=0.00 total=18446744073709551615\n", "f");
    ASSERT_TRUE(ok.ok());
    EXPECT_EQ(ok->some.total_us, UINT64_MAX);
    const auto r = parse_psi("some avg10=0.00 avg60=0.00 avg300=0.00 total=18446744073709551616\n", "f");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().key, "total");
    EXPECT_THAT(r.error().message, HasSubstr("out of range"));
}

TEST(Psi, RejectsAFieldWithoutEquals) {
    EXPECT_FALSE(parse_psi("some avg10 0.00 avg60=0.00 avg300=0.00 total=1\n", "f").ok());
}

TEST(Psi, RejectsEmptyInput) {
    const auto r = parse_psi("", "memory.pressure");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().file, "memory.pressure");
}

// ---- /proc/meminfo -------------------------------------------------------------

TEST(Meminfo, ConvertsKilobytesToBytes) {
    const auto r = parse_meminfo(kMeminfo61, "/proc/meminfo");
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_EQ(r->mem_total, 24594324ull * 1024);
    EXPECT_EQ(r->mem_available, 18431572ull * 1024);
    EXPECT_EQ(r->swap_total, 2097148ull * 1024);
    EXPECT_EQ(r->swap_free, 2097148ull * 1024);
    ASSERT_TRUE(r->mem_free.has_value());
    EXPECT_EQ(*r->mem_free, 9127240ull * 1024);
}

TEST(Meminfo, DefaultsOptionalFieldsToZeroWhenAbsent) {
    const auto r = parse_meminfo("MemTotal:       1024 kB", "/proc/meminfo");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->mem_total, 1024u * 1024);
    EXPECT_EQ(r->mem_available, 0u);
    EXPECT_FALSE(r->mem_free.has_value()) << "MemFree absent is unknown, not 0";
    EXPECT_EQ(r->swap_total, 0u);
}

TEST(Meminfo, RequiresMemTotal) {
    const auto r = parse_meminfo("MemFree:  10 kB\nHugePages_Total:       0\n", "/proc/meminfo");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().key, "MemTotal");
}

TEST(Meminfo, RejectsAValueThatOverflowsWhenConvertedToBytes) {
    // 2^54 kB = 2^64 bytes.
    const auto r = parse_meminfo("MemTotal: 18014398509481984 kB\n", "/proc/meminfo");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().key, "MemTotal");
    EXPECT_THAT(r.error().message, HasSubstr("out of range"));
    EXPECT_TRUE(parse_meminfo("MemTotal: 18014398509481983 kB\n", "/proc/meminfo").ok());
}

TEST(Meminfo, RejectsANonNumericValueOfANeededKeyNamingLineAndKey) {
    const auto r = parse_meminfo("MemTotal: 100 kB\nSwapTotal: lots kB\n", "/proc/meminfo");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().line, 2);
    EXPECT_EQ(r.error().key, "SwapTotal");
    EXPECT_THAT(r.error().message, HasSubstr("'lots'"));
}

TEST(Meminfo, RejectsANeededKeyWithoutItsUnit) {
    const auto r = parse_meminfo("MemTotal: 100\n", "/proc/meminfo");
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.error().message, HasSubstr("kB"));
}

TEST(Meminfo, RejectsALineWithoutAColon) {
    const auto r = parse_meminfo("MemTotal: 100 kB\nMemFr", "/proc/meminfo");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().line, 2);
}

TEST(Meminfo, RejectsEmptyInput) { EXPECT_FALSE(parse_meminfo("", "/proc/meminfo").ok()); }

// ---- lru_gen/enabled -------------------------------------------------------------

TEST(LruGenEnabled, ParsesHexWithOrWithoutNewline) {
    EXPECT_EQ(*parse_lru_gen_enabled("0x0007\n", "enabled"), 7u);
    EXPECT_EQ(*parse_lru_gen_enabled("0x0000", "enabled"), 0u);
    EXPECT_EQ(*parse_lru_gen_enabled("0x000a \n", "enabled"), 10u);
}

TEST(LruGenEnabled, RejectsDecimalGarbageOverflowAndEmptyInput) {
    for (const std::string_view text : {"7\n", "0x\n", "0xzz\n", "y\n", "0x100000000\n", "", "0x7 1\n"})
        EXPECT_FALSE(parse_lru_gen_enabled(text, "enabled").ok()) << "[" << text << "]";
}

// ---- debugfs lru_gen -------------------------------------------------------------

TEST(LruGen, ParsesA61FileWithTrailingSpaces) {
    const auto r = parse_lru_gen(kLruGen61, "/sys/kernel/debug/lru_gen");
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    ASSERT_EQ(r->memcgs.size(), 2u);
    const LruGenMemcg& root = r->memcgs[0];
    EXPECT_EQ(root.id, 1u);
    EXPECT_EQ(root.path, "/");
    ASSERT_EQ(root.nodes.size(), 1u);
    EXPECT_EQ(root.nodes[0].node, 0);
    ASSERT_EQ(root.nodes[0].generations.size(), 4u);
    const LruGeneration& young = root.nodes[0].generations[3];
    EXPECT_EQ(young.seq, 3u);
    EXPECT_EQ(young.age_ms, 5312u);
    EXPECT_EQ(young.anon_pages, 38162u);
    EXPECT_EQ(young.file_pages, 17186u);
    EXPECT_EQ(root.nodes[0].generations[0].file_pages, 22337u);
    EXPECT_EQ(r->memcgs[1].path, "/sys-fs-fuse-connections.mount");
    EXPECT_EQ(r->memcgs[1].id, 2u);
}

TEST(LruGen, TreatsAMemcgWithoutAPathAsAnEmptyPath) {
    const auto r = parse_lru_gen("memcg     5 \n node     0\n          7        100          1          2 \n", "f");
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    ASSERT_EQ(r->memcgs.size(), 1u);
    EXPECT_EQ(r->memcgs[0].id, 5u);
    EXPECT_EQ(r->memcgs[0].path, "");
    ASSERT_EQ(r->memcgs[0].nodes.size(), 1u);
    EXPECT_EQ(r->memcgs[0].nodes[0].generations.size(), 1u);
}

TEST(LruGen, KeepsSpacesInsideAPath) {
    const auto r = parse_lru_gen("memcg    12 /user.slice/my app.scope\n node     0\n 1 2 3 4\n", "f");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->memcgs[0].path, "/user.slice/my app.scope");
}

TEST(LruGen, AttachesLaterNodesToTheMemcgBeforeThem) {
    const auto r = parse_lru_gen(
        "memcg     1 /\n"
        " node     0\n"
        "          5        100         10         20 \n"
        " node     1\n"
        "          5        100         30         40 \n"
        "          6         50         31         41 \n"
        "memcg     9 /a.slice\n"
        " node     0\n"
        "          2         10          1          1 \n"
        " node     1\n"
        "          2         10          2          2 \n",
        "f");
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    ASSERT_EQ(r->memcgs.size(), 2u);
    ASSERT_EQ(r->memcgs[0].nodes.size(), 2u);
    EXPECT_EQ(r->memcgs[0].nodes[1].node, 1);
    ASSERT_EQ(r->memcgs[0].nodes[1].generations.size(), 2u);
    EXPECT_EQ(r->memcgs[0].nodes[1].generations[1].file_pages, 41u);
    ASSERT_EQ(r->memcgs[1].nodes.size(), 2u);
    EXPECT_EQ(r->memcgs[1].nodes[1].generations[0].anon_pages, 2u);
}

// lru_gen_full, 6.1 format: tier rows and an mm-walk row follow each
// generation, and counts of a type whose generation is gone are marked 'x'.
TEST(LruGen, SkipsTheExtraRowsOfTheFullFileAndCountsMarkedGenerationsAsEmpty) {
    std::string text = "memcg     1 /\n node     0\n";
    const uint64_t counts[][2] = {{0, 7}, {1014, 22337}, {0, 0}, {38162, 17186}};
    for (uint64_t seq = 0; seq < 4; ++seq) {
        const char mark = seq == 0 ? 'x' : ' ';
        text += fmt::format(" {:10} {:10} {:10}{} {:10} \n", seq, 13784 - seq, counts[seq][0], mark, counts[seq][1]);
        for (int tier = 0; tier < 4; ++tier)
            text += fmt::format("            {:10} {:10}R {:10}T {:10}  {:10}R {:10}T {:10} \n", tier, 0, 12, 0, 3,
                                40, 0);
        text += fmt::format("                      {:10}L {:10}O {:10}Y {:10}N {:10}F {:10}A\n", 1, 2, 3, 4, 5, 6);
    }
    const auto r = parse_lru_gen(text, "lru_gen_full");
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    ASSERT_EQ(r->memcgs.size(), 1u);
    const auto& gens = r->memcgs[0].nodes.at(0).generations;
    ASSERT_EQ(gens.size(), 4u);
    EXPECT_EQ(gens[0].anon_pages, 0u);
    EXPECT_EQ(gens[0].file_pages, 7u);
    EXPECT_EQ(gens[3].anon_pages, 38162u);
    EXPECT_EQ(gens[3].age_ms, 13781u);
}

TEST(LruGen, RejectsANonNumericGenerationRowNamingTheColumn) {
    const auto r = parse_lru_gen("memcg 1 /\n node 0\n 3 5312 abc 17186\n", "f");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().line, 3);
    EXPECT_EQ(r.error().key, "nr_anon");
}

TEST(LruGen, RejectsATruncatedGenerationRow) {
    const auto r = parse_lru_gen("memcg 1 /\n node 0\n 0 13784 1014 22337\n 3 5312", "f");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().line, 4);
    EXPECT_THAT(r.error().message, HasSubstr("truncated"));
}

TEST(LruGen, RejectsANodeBeforeAnyMemcg) {
    const auto r = parse_lru_gen(" node 0\n 0 1 2 3\n", "f");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().line, 1);
}

TEST(LruGen, RejectsAGenerationBeforeAnyNode) {
    const auto r = parse_lru_gen("memcg 1 /\n 0 1 2 3\n", "f");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().line, 2);
}

TEST(LruGen, RejectsAMemcgIdThatIsNotANumber) {
    const auto r = parse_lru_gen("memcg abc /\n", "f");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().key, "memcg");
}

TEST(LruGen, AcceptsA64BitMemcgIdAndRejectsOverflow) {
    const auto ok = parse_lru_gen("memcg 18446744073709551615 /\n node 0\n", "f");
    ASSERT_TRUE(ok.ok());
    EXPECT_EQ(ok->memcgs[0].id, UINT64_MAX);
    EXPECT_FALSE(parse_lru_gen("memcg 18446744073709551616 /\n node 0\n", "f").ok());
}

TEST(LruGen, RejectsAnUnexpectedLine) {
    const auto r = parse_lru_gen("memcg 1 /\n node 0\n hello world\n", "f");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().line, 3);
}

TEST(LruGen, RejectsEmptyInput) {
    const auto r = parse_lru_gen("\n", "lru_gen");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().file, "lru_gen");
}

// ---- cgroup.controllers ------------------------------------------------------------

TEST(Controllers, FindsAControllerAmongOthers) {
    constexpr std::string_view text = "cpuset cpu io memory hugetlb pids rdma misc\n";
    EXPECT_TRUE(controllers_contain(text, "memory"));
    EXPECT_TRUE(controllers_contain(text, "misc"));
    EXPECT_TRUE(controllers_contain(text, "cpuset"));
}

TEST(Controllers, DoesNotMatchPartsOfNames) {
    EXPECT_FALSE(controllers_contain("cpuset cpu io memory\n", "mem"));
    EXPECT_FALSE(controllers_contain("cpuset cpu io\n", "memory"));
    EXPECT_FALSE(controllers_contain("", "memory"));
    EXPECT_FALSE(controllers_contain("cpu io\n", ""));
}

// ---- /proc/self/mounts -------------------------------------------------------------

constexpr std::string_view kMounts =
    "sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0\n"
    "proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0\n"
    "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate,memory_recursiveprot 0 0\n"
    "tmpfs /run tmpfs rw,nosuid,nodev,size=4914128k,nr_inodes=819200,mode=755 0 0\n";

TEST(MountOptions, ReturnsTheOptionsOfTheCgroup2MountAtThePoint) {
    const auto opts = cgroup2_mount_options(kMounts, "/sys/fs/cgroup");
    ASSERT_TRUE(opts.has_value());
    EXPECT_EQ(*opts, "rw,nosuid,nodev,noexec,relatime,nsdelegate,memory_recursiveprot");
}

TEST(MountOptions, ReturnsNothingOnAHybridHost) {
    constexpr std::string_view hybrid =
        "tmpfs /sys/fs/cgroup tmpfs ro,nosuid,nodev,noexec,mode=755 0 0\n"
        "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate 0 0\n"
        "cgroup /sys/fs/cgroup/memory cgroup rw,nosuid,nodev,noexec,relatime,memory 0 0\n";
    EXPECT_FALSE(cgroup2_mount_options(hybrid, "/sys/fs/cgroup").has_value());
    EXPECT_TRUE(cgroup2_mount_options(hybrid, "/sys/fs/cgroup/unified").has_value());
    EXPECT_FALSE(cgroup2_mount_options("", "/sys/fs/cgroup").has_value());
}

TEST(MountOptions, MatchesAMountPointWithEscapedSpaces) {
    const auto opts = cgroup2_mount_options("none /mnt/my\\040cg cgroup2 rw,relatime 0 0\n", "/mnt/my cg");
    ASSERT_TRUE(opts.has_value());
    EXPECT_EQ(*opts, "rw,relatime");
}

TEST(MountOptions, PrefersTheLastMountOnThePoint) {
    const auto opts = cgroup2_mount_options(
        "cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n"
        "cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate,memory_recursiveprot 0 0",
        "/sys/fs/cgroup");
    ASSERT_TRUE(opts.has_value());
    EXPECT_EQ(*opts, "rw,nsdelegate,memory_recursiveprot");
}

TEST(MountOptions, ReadsMountinfoJoiningMountAndSuperblockOptions) {
    constexpr std::string_view mountinfo =
        "24 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
        "28 24 0:25 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
        "rw,nsdelegate,memory_recursiveprot\n";
    const auto opts = cgroup2_mount_options(mountinfo, "/sys/fs/cgroup");
    ASSERT_TRUE(opts.has_value());
    EXPECT_THAT(*opts, HasSubstr("memory_recursiveprot"));
    EXPECT_THAT(*opts, HasSubstr("nosuid"));
}

}  // namespace
}  // namespace memprotd
