#!/usr/bin/env python3
"""Emit the quant lookup tables as a C++/CUDA header (build step, never hand-edited).

Reads data/quant-tables/<name>.txt (one 0x value per line after '#' header lines), checks
every file against SHA256SUMS, checks each table's declared name, count and element type,
and writes plain constexpr arrays of fixed-width integers. The tables are format constants
(spec/quant-formats.md §4.7, formats/README.md "tables/"): a silent change would corrupt
every i-quant, so any mismatch stops the build with a message naming the file.

usage: gen_quant_tables.py --tables DIR --output FILE
"""

import argparse
import hashlib
import os
import re
import sys

# name -> (element C type, entry count). The engine's code refers to these names, so the
# set is fixed here rather than taken from whatever files happen to be in the folder.
EXPECTED = {
    "iq2xxs_grid": ("uint64", 256),
    "iq2xs_grid": ("uint64", 512),
    "iq2s_grid": ("uint64", 1024),
    "iq3xxs_grid": ("uint32", 256),
    "iq3s_grid": ("uint32", 512),
    "iq1s_grid": ("uint64", 2048),
    "iq1s_grid_gpu": ("uint32", 2048),
    "ksigns_iq2xs": ("uint8", 128),
    "kmask_iq2xs": ("uint8", 8),
    "ksigns64": ("uint64", 128),
    "kvalues_iq4nl": ("int8", 16),
    "kvalues_fp4": ("int8", 16),
}

CTYPE = {"uint64": "uint64_t", "uint32": "uint32_t", "uint8": "uint8_t", "int8": "int8_t"}
BITS = {"uint64": 64, "uint32": 32, "uint8": 8, "int8": 8}
HEADER_RE = re.compile(r"^# (\w+): (\d+) entries of (\w+); source: (.*)$")


def fail(msg):
    sys.stderr.write("gen_quant_tables: error: %s\n" % msg)
    sys.exit(1)


def read_sums(tables_dir):
    path = os.path.join(tables_dir, "SHA256SUMS")
    if not os.path.isfile(path):
        fail("%s is missing; every table must be covered by a checksum" % path)
    sums = {}
    with open(path, encoding="ascii") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2 or not re.fullmatch(r"[0-9a-f]{64}", parts[0]):
                fail("%s:%d: expected '<sha256> <file>', got %r" % (path, lineno, line))
            sums[parts[1].lstrip("*")] = parts[0]
    return sums


def verify_checksums(tables_dir, sums):
    for name in EXPECTED:
        fname = name + ".txt"
        if fname not in sums:
            fail("%s has no entry for %s" % (os.path.join(tables_dir, "SHA256SUMS"), fname))
    for fname, want in sorted(sums.items()):
        path = os.path.join(tables_dir, fname)
        if not os.path.isfile(path):
            fail("%s is listed in SHA256SUMS but missing" % path)
        with open(path, "rb") as f:
            got = hashlib.sha256(f.read()).hexdigest()
        if got != want:
            fail("checksum mismatch for %s: SHA256SUMS says %s, file hashes to %s; "
                 "the tables are format constants, restore the file (do not edit it)"
                 % (path, want, got))


def parse_table(path, name):
    ctype, count = EXPECTED[name]
    with open(path, encoding="ascii") as f:
        lines = [l.rstrip("\n") for l in f]
    m = HEADER_RE.match(lines[0]) if lines else None
    if not m:
        fail("%s:1: expected '# <name>: <count> entries of <type>; source: ...'" % path)
    if (m.group(1), int(m.group(2)), m.group(3)) != (name, count, ctype):
        fail("%s:1: declares %s: %s entries of %s, expected %s: %d entries of %s"
             % (path, m.group(1), m.group(2), m.group(3), name, count, ctype))
    # The "signed table: ... in hex" note describes the file, not the decimal array we emit.
    comments = [l[1:].strip() for l in lines
                if l.startswith("#") and not l.startswith("# signed table")]
    values = []
    for lineno, line in enumerate(lines, 1):
        if line.startswith("#") or not line.strip():
            continue
        if not re.fullmatch(r"0x[0-9a-fA-F]+", line.strip()):
            fail("%s:%d: expected one 0x hex value, got %r" % (path, lineno, line))
        v = int(line, 16)
        if v >= 1 << BITS[ctype]:
            fail("%s:%d: value %s does not fit %s" % (path, lineno, line, ctype))
        values.append(v)
    if len(values) != count:
        fail("%s: %d values, expected %d" % (path, len(values), count))
    if ctype == "int8":  # stored as two's-complement bytes (formats/README.md)
        values = [v - 256 if v >= 128 else v for v in values]
    return values, comments


def format_array(name, ctype, values, comments):
    digits = {"uint64": 16, "uint32": 8, "uint8": 2}.get(ctype)
    if digits is None:
        items = [str(v) for v in values]
        per_line = 16
    else:
        items = ["0x%0*x" % (digits, v) for v in values]
        per_line = max(1, 96 // (len(items[0]) + 2))
    suffix = "ull" if ctype == "uint64" else ("u" if ctype == "uint32" else "")
    items = [i + suffix for i in items]
    out = ["// %s" % c for c in comments]
    out.append("inline constexpr %s %s[%d] = {" % (CTYPE[ctype], name, len(values)))
    for i in range(0, len(items), per_line):
        out.append("    " + ", ".join(items[i:i + per_line]) + ",")
    out.append("};")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", required=True, help="folder with <name>.txt and SHA256SUMS")
    ap.add_argument("--output", required=True, help="header to write")
    args = ap.parse_args()

    verify_checksums(args.tables, read_sums(args.tables))
    parts = [
        "// GENERATED by tools/gen_quant_tables.py from data/quant-tables/*.txt. Do not edit:",
        "// the build regenerates it; change the tables (and SHA256SUMS) instead.",
        "// Plain arrays of fixed-width integers so that host code reads them directly and",
        "// CUDA code can copy them to __constant__ memory.",
        "#pragma once",
        "",
        "#include <cstdint>",
        "",
        "namespace strata::quant {",
        "",
    ]
    for name, (ctype, _) in EXPECTED.items():
        values, comments = parse_table(os.path.join(args.tables, name + ".txt"), name)
        parts.append(format_array(name, ctype, values, comments))
        parts.append("")
    parts.append("}  // namespace strata::quant")
    text = "\n".join(parts) + "\n"

    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    tmp = args.output + ".tmp"
    with open(tmp, "w", encoding="ascii") as f:
        f.write(text)
    os.replace(tmp, args.output)


if __name__ == "__main__":
    main()
