# SPDX-License-Identifier: LGPL-2.1-or-later
# Helpers for VM scenarios; source with
#   . "$MEMPROTD_SOURCE_ROOT/tests/vm/lib.sh"
# check DESCRIPTION COMMAND...  prints PASS/FAIL and counts failures;
# finish exits non-zero when any check failed.
vm_failures=0
check() {
    local what=$1; shift
    if "$@" >/dev/null 2>&1; then
        echo "PASS: $what"
    else
        echo "FAIL: $what"
        vm_failures=$((vm_failures + 1))
    fi
}
finish() {
    if [ "$vm_failures" -gt 0 ]; then
        echo "$vm_failures check(s) FAILED"
        exit 1
    fi
    echo "all checks passed"
    exit 0
}
# The project's gtest binary, run with the guest flag set; a failing or
# missing binary counts as one failed check.
run_gtest() {
    local bin=$MEMPROTD_BUILD_ROOT/$1; shift
    if [ ! -x "$bin" ]; then
        echo "FAIL: $bin not built"
        vm_failures=$((vm_failures + 1))
        return
    fi
    if "$bin" "$@"; then
        echo "PASS: $(basename "$bin")"
    else
        echo "FAIL: $(basename "$bin") exited non-zero"
        vm_failures=$((vm_failures + 1))
    fi
}
