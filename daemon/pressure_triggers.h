// SPDX-License-Identifier: LGPL-2.1-or-later
//
// One PSI trigger per managed slice (memory.pressure, "some THRESHOLD
// WINDOW": PressureThreshold=, PressureWindow=), watched on the daemon's
// sd-event loop, so pressure asks for a tick before the interval is up.
//
// Threading: the loop thread only; the callbacks run from the loop.
#pragma once

#include <systemd/sd-event.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "plan.h"
#include "psi_trigger.h"

namespace memprotd {

class PressureTriggers {
public:
    // `fired(unit)`: a slice's trigger fired. `gone(unit)`: its cgroup was
    // removed (the next sample drops the slice). `event` must outlive this.
    PressureTriggers(sd_event* event, std::string cgroup_root, std::function<void(const std::string&)> fired,
                     std::function<void(const std::string&)> gone);
    ~PressureTriggers();
    PressureTriggers(const PressureTriggers&) = delete;
    PressureTriggers& operator=(const PressureTriggers&) = delete;

    // Arms a trigger for each of the plan's slices that has none and closes
    // those of slices the plan no longer has. A trigger that cannot be armed
    // is kept closed, so it is not retried (and logged) every tick; it is
    // retried when the slice comes back or after close_all().
    void update(const Plan& plan, uint64_t threshold_us, uint64_t window_us);
    // Closes every trigger (a reload re-arms them with its threshold and window).
    void close_all();

private:
    struct Trigger {
        PressureTriggers* owner = nullptr;
        std::string unit;
        PsiTrigger psi;
        sd_event_source* source = nullptr;
    };
    static int on_io(sd_event_source* s, int fd, uint32_t revents, void* userdata);
    static void close(Trigger& t);

    sd_event* event_;
    std::string cgroup_root_;
    std::function<void(const std::string&)> fired_;
    std::function<void(const std::string&)> gone_;
    std::map<std::string, std::unique_ptr<Trigger>> triggers_;  // by cgroup path
};

}  // namespace memprotd
