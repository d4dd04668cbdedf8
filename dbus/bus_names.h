// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The names org.memprotd1 is known by on the bus, shared by the daemon's
// adaptor, memprotctl and the tests. dbus/org.memprotd1.Manager.xml, the
// bus policy (org.memprotd1.conf) and the activation file spell the same
// names and must change with them.
#pragma once

namespace memprotd {

// Well-known name memprotd owns, its one object, and that object's interface.
inline constexpr const char* kBusName = "org.memprotd1";
inline constexpr const char* kObjectPath = "/org/memprotd1";
inline constexpr const char* kInterface = "org.memprotd1.Manager";

// When set and not empty, the address of the bus to use instead of the
// system bus (tests, private demos), for the daemon and memprotctl alike.
inline constexpr const char* kBusAddressEnv = "MEMPROTD_BUS_ADDRESS";

// Errors of memprotd's own beyond org.freedesktop.DBus.Error.*.
inline constexpr const char* kErrorConfigInvalid = "org.memprotd1.Error.ConfigInvalid";
inline constexpr const char* kErrorNotSupported = "org.memprotd1.Error.NotSupported";

}  // namespace memprotd
