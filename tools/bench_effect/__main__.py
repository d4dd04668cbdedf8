# SPDX-License-Identifier: LGPL-2.1-or-later
"""python3 -m bench_effect (from tools/): the same as tools/bench-effect."""
import sys

from .cli import main

sys.exit(main())
