// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Heap allocations (operator new) since the program started, for benches
// that report them per unit of work. Linking alloc_count.cc replaces the
// global operator new and delete of the whole program (malloc and free,
// counted); its own translation unit, so that no caller sees the pair.
#pragma once

#include <cstdint>

uint64_t heap_allocations();
