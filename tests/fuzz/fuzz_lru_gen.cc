// SPDX-License-Identifier: LGPL-2.1-or-later
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "fuzz_check.h"
#include "parse.h"

namespace {

// The 6.1 plain format (lru_gen_seq_show()).
std::string print(const memprotd::LruGen& g) {
    std::string out;
    for (const auto& m : g.memcgs) {
        out += fmt::format("memcg {:5} {}\n", m.id, m.path);
        for (const auto& n : m.nodes) {
            out += fmt::format(" node {:5}\n", n.node);
            for (const auto& gen : n.generations)
                out += fmt::format(" {:10} {:10} {:10}  {:10} \n", gen.seq, gen.age_ms, gen.anon_pages,
                                   gen.file_pages);
        }
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace memprotd;
    const std::string_view text(reinterpret_cast<const char*>(data), size);

    const Result<LruGen> r = parse_lru_gen(text, fuzz::kFile);
    if (!r.ok()) {
        fuzz::check_error(r.error());
        return 0;
    }
    FUZZ_CHECK(!r->memcgs.empty());

    const Result<LruGen> again = parse_lru_gen(print(*r), fuzz::kFile);
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(again->memcgs.size() == r->memcgs.size());
    for (size_t i = 0; i < r->memcgs.size(); ++i) {
        const LruGenMemcg& a = r->memcgs[i];
        const LruGenMemcg& b = again->memcgs[i];
        FUZZ_CHECK(a.id == b.id && a.path == b.path && a.nodes.size() == b.nodes.size());
        for (size_t j = 0; j < a.nodes.size(); ++j) {
            FUZZ_CHECK(a.nodes[j].node == b.nodes[j].node);
            FUZZ_CHECK(a.nodes[j].node >= 0);
            FUZZ_CHECK(a.nodes[j].generations.size() == b.nodes[j].generations.size());
            for (size_t k = 0; k < a.nodes[j].generations.size(); ++k) {
                const LruGeneration& x = a.nodes[j].generations[k];
                const LruGeneration& y = b.nodes[j].generations[k];
                FUZZ_CHECK(x.seq == y.seq && x.age_ms == y.age_ms && x.anon_pages == y.anon_pages &&
                           x.file_pages == y.file_pages);
            }
        }
    }
    return 0;
}
