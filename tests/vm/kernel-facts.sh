# SPDX-License-Identifier: LGPL-2.1-or-later
# The guest offers what memprotd needs: cgroup2 with memory_recursiveprot and
# the memory controller, PSI, MGLRU (on) with its debugfs file; the project's
# readers agree (test-vm-kernel). Captures the real files into the result dir
# (tools/vm/run-scenario copies them to tests/data/guest-*/ with
# MEMPROTD_VM_CAPTURE=1).
. "$MEMPROTD_SOURCE_ROOT/tests/vm/lib.sh"

echo "kernel $(uname -r), $(systemctl --version | head -n1)"
check "/sys/fs/cgroup is cgroup2" test "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs
check "cgroup2 mounted with memory_recursiveprot" \
    grep -Eq '^cgroup2 /sys/fs/cgroup cgroup2 .*memory_recursiveprot' /proc/self/mounts
check "memory in cgroup.controllers" grep -qw memory /sys/fs/cgroup/cgroup.controllers
check "/proc/pressure/memory readable" grep -q '^some avg10=' /proc/pressure/memory
check "system.slice/memory.pressure readable" grep -q '^full avg10=' /sys/fs/cgroup/system.slice/memory.pressure
check "lru_gen/enabled reads 0x0007" test "$(cat /sys/kernel/mm/lru_gen/enabled)" = 0x0007
check "/sys/kernel/debug/lru_gen readable" test -r /sys/kernel/debug/lru_gen
check "lru_gen lists memcgs" grep -q '^memcg ' /sys/kernel/debug/lru_gen
check "lru_gen lists /system.slice" grep -Eq '^memcg +[0-9]+ /system.slice$' /sys/kernel/debug/lru_gen

cap=$MEMPROTD_RESULT_DIR/capture
mkdir -p "$cap"
cp /sys/fs/cgroup/system.slice/memory.stat "$cap/system.slice.memory.stat"
cp /sys/fs/cgroup/system.slice/memory.pressure "$cap/system.slice.memory.pressure"
cp /sys/fs/cgroup/system.slice/memory.events "$cap/system.slice.memory.events"
cp /sys/fs/cgroup/cgroup.controllers "$cap/root.cgroup.controllers"
cp /proc/pressure/memory "$cap/proc.pressure.memory"
cp /proc/meminfo "$cap/proc.meminfo"
cp /proc/self/mounts "$cap/proc.self.mounts"
cp /sys/kernel/mm/lru_gen/enabled "$cap/lru_gen.enabled"
cp /sys/kernel/debug/lru_gen "$cap/debugfs.lru_gen"
cp /sys/kernel/debug/lru_gen_full "$cap/debugfs.lru_gen_full"
{
    echo "Captured by tests/vm/kernel-facts.sh in the memprotd test guest (MGLRU on)."
    echo "kernel: $(uname -r) ($(uname -v))"
    echo "systemd: $(systemctl --version | head -n1)"
    echo "date: $(date -u +%Y-%m-%d)"
    echo "page size: $(getconf PAGESIZE)"
} > "$cap/README"

run_gtest tests/vm/test-vm-kernel
finish
