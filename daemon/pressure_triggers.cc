// SPDX-License-Identifier: LGPL-2.1-or-later
#include "pressure_triggers.h"

#include <spdlog/spdlog.h>
#include <sys/epoll.h>

#include <cstring>
#include <utility>

namespace memprotd {

PressureTriggers::PressureTriggers(sd_event* event, std::string cgroup_root,
                                   std::function<void(const std::string&)> fired,
                                   std::function<void(const std::string&)> gone)
    : event_(event), cgroup_root_(std::move(cgroup_root)), fired_(std::move(fired)), gone_(std::move(gone)) {}

PressureTriggers::~PressureTriggers() { close_all(); }

void PressureTriggers::close(Trigger& t) {
    t.source = sd_event_source_disable_unref(t.source);
    t.psi.close();
}

void PressureTriggers::close_all() {
    for (auto& [cgroup, t] : triggers_)
        close(*t);
    triggers_.clear();
}

void PressureTriggers::update(const Plan& plan, uint64_t threshold_us, uint64_t window_us) {
    if (!event_)
        return;
    std::map<std::string, const PlanEntry*> wanted;
    for (const PlanEntry& e : plan.slices)
        wanted.emplace(e.cgroup, &e);
    for (auto it = triggers_.begin(); it != triggers_.end();) {
        if (wanted.contains(it->first)) {
            ++it;
            continue;
        }
        close(*it->second);
        it = triggers_.erase(it);
    }
    for (const auto& [cgroup, entry] : wanted) {
        if (triggers_.contains(cgroup))
            continue;
        auto t = std::make_unique<Trigger>();
        t->owner = this;
        t->unit = entry->unit;
        Result<PsiTrigger> psi = PsiTrigger::open(cgroup_root_ + cgroup + "/memory.pressure", threshold_us, window_us);
        if (!psi) {
            spdlog::debug("no PSI trigger: {}", psi.error().to_string());
        } else {
            t->psi = std::move(*psi);
            const int r = sd_event_add_io(event_, &t->source, t->psi.fd(), EPOLLPRI, on_io, t.get());
            if (r < 0) {
                spdlog::debug("{}: cannot watch the PSI trigger: {}", entry->unit, std::strerror(-r));
                t->psi.close();
            }
        }
        triggers_.emplace(cgroup, std::move(t));
    }
}

int PressureTriggers::on_io(sd_event_source* /*s*/, int /*fd*/, uint32_t revents, void* userdata) {
    auto* t = static_cast<Trigger*>(userdata);
    PressureTriggers* self = t->owner;
    if (revents & (EPOLLERR | EPOLLHUP)) {
        spdlog::debug("{}: cgroup gone, PSI trigger closed", t->unit);
        const std::string unit = t->unit;
        close(*t);
        if (self->gone_)
            self->gone_(unit);
        return 0;
    }
    if (revents & EPOLLPRI) {
        spdlog::debug("{}: memory pressure trigger fired", t->unit);
        if (self->fired_)
            self->fired_(t->unit);
    }
    return 0;
}

}  // namespace memprotd
