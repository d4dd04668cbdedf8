// SPDX-License-Identifier: LGPL-2.1-or-later
#include <benchmark/benchmark.h>
BENCHMARK_MAIN();
