# SPDX-License-Identifier: LGPL-2.1-or-later
# tools/demo's guest part: memprotd on a real kernel and systemd under a mixed
# load (an anon workload beside a page-cache streamer), status before and after.
. "$MEMPROTD_SOURCE_ROOT/tests/vm/lib.sh"
install_memprotd
mkdir -p /etc/memprotd/policy.d
cp "$MEMPROTD_SOURCE_ROOT/units/policy.d/50-workload.conf.example" /etc/memprotd/policy.d/50-workload.conf
cp "$MEMPROTD_SOURCE_ROOT/units/policy.d/60-batch.conf.example" /etc/memprotd/policy.d/60-batch.conf
sed -i '/^MinProtection=/d; /^Floor=/d' /etc/memprotd/policy.d/50-workload.conf
systemd-run --quiet --slice=workload.slice --unit=kv \
    stress-ng --vm 1 --vm-bytes 300M --vm-keep --vm-method write64 --timeout 1h
systemd-run --quiet --slice=batch.slice --unit=streamer \
    sh -c 'while :; do dd if=/dev/vda of=/dev/null bs=1M 2>/dev/null; done'
sleep 5
systemctl enable --now memprotd
sleep 3
echo; echo "===== memprotctl status, just started ====="
memprotctl status
sleep 90
echo; echo "===== memprotctl status, 90 s later ====="
memprotctl status
echo; echo "===== memprotctl explain workload.slice ====="
memprotctl explain workload.slice
echo; echo "===== memprotctl explain batch.slice ====="
memprotctl explain batch.slice
echo; echo "===== journalctl -u memprotd ====="
journalctl -u memprotd --no-pager -o cat | tail -n 15
# What the demo claims, checked: the daemon runs and at least one protection
# it wrote is in force in cgroupfs.
echo; echo "===== checks ====="
check "memprotd is active" systemctl is-active --quiet memprotd
check "memprotd wrote protection values" test "$(status_field total_writes)" -gt 0
check "workload.slice is protected in cgroupfs (memory.low > 0)" test "$(memory_low_of workload.slice)" -gt 0
finish
