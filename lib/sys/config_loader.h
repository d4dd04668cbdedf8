// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Finds and reads configuration files the way systemd does: the same file
// name in an earlier directory masks it in later ones; drop-ins apply in
// lexical order of file name across all directories; a file that is empty or
// a symlink to /dev/null masks without adding anything.
#pragma once

#include <string>
#include <vector>

#include "config.h"

namespace memprotd {

// /etc/memprotd, /run/memprotd, /usr/local/lib/memprotd, /usr/lib/memprotd
std::vector<std::string> default_config_dirs();

// Reads memprotd.conf + memprotd.conf.d/*.conf and policy.d/*.conf from
// `dirs` (priority order). Missing directories are fine. memprotd.conf comes
// from the first directory that has one; drop-ins are the union by file name
// (earliest directory wins), sorted by file name. Only "*.conf" names count;
// directories are skipped. Masked files are left out of the result; files
// that exist but cannot be read (including dangling symlinks) and
// directories that cannot be listed go to ConfigInput::errors with strerror.
ConfigInput collect_config(const std::vector<std::string>& dirs);

// Convenience: collect + parse. `mem_total` as for parse_config.
ConfigParse load_config(const std::vector<std::string>& dirs, uint64_t mem_total = 0);

}  // namespace memprotd
