# SPDX-License-Identifier: LGPL-2.1-or-later
# tools/demo's guest part: memprotd installed from its .deb as a user does
# (apt install, the example policies, systemctl reload) on a real kernel and
# systemd under a mixed load (an anon workload beside a page-cache streamer),
# status right away and 90 s later. The .deb is the one tools/demo built in
# $MEMPROTD_BUILD_ROOT/package.
. "$MEMPROTD_SOURCE_ROOT/tests/vm/lib.sh"
systemd-run --quiet --slice=workload.slice --unit=kv \
    stress-ng --vm 1 --vm-bytes 300M --vm-keep --vm-method write64 --timeout 1h
systemd-run --quiet --slice=batch.slice --unit=streamer \
    sh -c 'while :; do dd if=/dev/vda of=/dev/null bs=1M 2>/dev/null; done'
sleep 5
echo "===== the package: apt install (it starts memprotd), the example policies, systemctl reload ====="
install_memprotd_deb
# The examples the package ships, copied where their first lines say; no
# floor for the workload, so its protection is what memprotd measures.
examples=/usr/share/doc/memprotd/examples
mkdir -p /etc/memprotd/policy.d
cp "$examples/50-workload.conf.example" /etc/memprotd/policy.d/50-workload.conf
cp "$examples/60-batch.conf.example" /etc/memprotd/policy.d/60-batch.conf
sed -i '/^MinProtection=/d; /^Floor=/d' /etc/memprotd/policy.d/50-workload.conf
check "systemctl reload memprotd" systemctl reload memprotd
sleep 3
echo; echo "===== memprotctl status, just installed ====="
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
# What the demo claims, checked: the daemon runs with the example policies
# and at least one protection it wrote is in force in cgroupfs.
echo; echo "===== checks ====="
check "memprotd is active" systemctl is-active --quiet memprotd
check "the example policy is in force (workload.slice Weight=400)" \
    sh -c 'memprotctl show workload.slice --json | tr -d " \n" | grep -q "\"weight\":400"'
check "memprotd wrote protection values" test "$(status_field total_writes)" -gt 0
check "workload.slice is protected in cgroupfs (memory.low > 0)" test "$(memory_low_of workload.slice)" -gt 0
finish
