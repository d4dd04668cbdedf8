#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# Writes the interface XML as a C++ raw string, for memprotd --bus-introspect.
# usage: embed_xml.py INPUT.xml OUTPUT.h
import sys

DELIM = "MEMPROTD_XML"

with open(sys.argv[1], encoding="utf-8") as f:
    text = f.read()
if ")" + DELIM in text:
    sys.exit(f"{sys.argv[1]} contains the raw string delimiter )" + DELIM)
with open(sys.argv[2], "w", encoding="utf-8") as out:
    out.write("// Generated from org.memprotd1.Manager.xml; do not edit.\n#pragma once\n\n")
    out.write("namespace memprotd {\n\n")
    out.write("inline constexpr const char kManagerIntrospectionXml[] = R\"" + DELIM + "(")
    out.write(text)
    out.write(")" + DELIM + "\";\n\n}  // namespace memprotd\n")
