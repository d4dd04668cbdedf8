# SPDX-License-Identifier: LGPL-2.1-or-later
"""tools/bench-effect as a package: common (policies, scenarios, defaults),
vm (booting the guest per scenario and sampling QEMU on the host), analysis
(a run's raw files into figures and targets), report (JSON, Markdown, chart,
bench/effect/README.md) and cli (the command line)."""
