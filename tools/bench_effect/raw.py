# SPDX-License-Identifier: LGPL-2.1-or-later
"""A run's raw files kept beside its result: OUT/NAME.raw.tar.xz (gzip
when Python lacks lzma), read back by --analyze, pruned by --prune."""

import glob
import json
import os
import re
import shutil
import tarfile

from .common import SRC, log

try:
    import lzma  # noqa: F401  (tarfile's "xz" needs it)
    RAW_SUFFIX, RAW_MODE = ".raw.tar.xz", "w:xz"
except ImportError:
    RAW_SUFFIX, RAW_MODE = ".raw.tar.gz", "w:gz"
ARCHIVE_SUFFIXES = (".tar.xz", ".tar.gz", ".tgz", ".tar")
SKIP = {"chart"}  # the chart's data files: written again by each analysis


def is_archive(path):
    return os.path.isfile(path) and path.endswith(ARCHIVE_SUFFIXES)


def raw_archive(analyzed, stamp_dir, base):
    """BASE + RAW_SUFFIX holding the run directory stamp_dir (top level: its
    name), or a copy of `analyzed` when that was an archive already. Returns
    its path."""
    if analyzed and is_archive(analyzed):
        dest = base + RAW_SUFFIX if analyzed.endswith(RAW_SUFFIX[-3:]) else base + ".raw" + \
            analyzed[analyzed.index(".tar"):]
        if os.path.realpath(analyzed) != os.path.realpath(dest):
            shutil.copy2(analyzed, dest)
        return dest
    dest = base + RAW_SUFFIX
    top = os.path.basename(os.path.normpath(stamp_dir))
    with tarfile.open(dest, RAW_MODE) as tar:
        tar.add(stamp_dir, arcname=top,
                filter=lambda ti: None if ti.name.split("/")[1:2] and ti.name.split("/")[1] in SKIP else ti)
    return dest


def unpacked(path, tmp):
    """The run directory of `path`: itself when a directory, else the one
    top-level directory of the archive, extracted under tmp."""
    if os.path.isdir(path):
        return os.path.abspath(path)
    if not is_archive(path):
        raise SystemExit(f"bench-effect: --analyze {path}: neither a run directory nor a "
                         f"{'/'.join(ARCHIVE_SUFFIXES)} archive")
    with tarfile.open(path) as tar:
        tops = {m.name.split("/")[0] for m in tar.getmembers()}
        if len(tops) != 1:
            raise SystemExit(f"bench-effect: --analyze {path}: expected one run directory at the top, "
                             f"found {sorted(tops)}")
        if hasattr(tarfile, "data_filter"):
            tar.extractall(tmp, filter="data")
        else:
            tar.extractall(tmp)
    return os.path.join(tmp, tops.pop())


# The documents whose cited results keep their raw archives.
CITING = ("README.md", os.path.join("docs", "measured.md"), os.path.join("docs", "status.md"),
          os.path.join("bench", "effect", "README.md"))


def cited_results(src, names):
    """The names among `names` (NAME of results/NAME.json) that a document
    in CITING mentions as a whole name (p2-x-6.1 is not mentioned by
    p2-x-6.1-b1 nor by p2-x-6.12)."""
    text = ""
    for doc in CITING:
        try:
            with open(os.path.join(src, doc)) as f:
                text += f.read()
        except OSError:
            pass
    return {n for n in names if re.search(r"(?<![\w.-])" + re.escape(n) + r"(?![\w-]|\.\d)", text)}


def kept_results(out, src):
    """Names of the results in out whose raw archives prune_raw keeps: every
    protocol result (meta.protocol: the evidence a boot's --analyze
    reproduces), every result a document in CITING mentions, and every result
    one of those was pooled from."""
    metas = {}
    for res in glob.glob(os.path.join(out, "*.json")):
        try:
            with open(res) as f:
                meta = json.load(f).get("meta")
        except (OSError, ValueError, AttributeError):
            meta = None
        metas[os.path.basename(res)[:-len(".json")]] = meta if isinstance(meta, dict) else {}
    kept = cited_results(src, metas) | {n for n, m in metas.items() if m.get("protocol")}
    for name in list(kept):
        kept |= {os.path.basename(p)[:-len(".json")] for p in metas[name].get("pooled_from") or []}
    return kept


def prune_raw(out, keep, src=None):
    """Deletes the raw archives of all but the newest `keep` results in out
    (newest by the result JSON's modification time), sparing those
    kept_results names; their JSON and Markdown stay."""
    if keep < 0:
        raise SystemExit(f"bench-effect: --prune {keep}: a count of results, 0 or more")
    cited = kept_results(out, src or SRC)
    results = sorted(glob.glob(os.path.join(out, "*.json")), key=os.path.getmtime, reverse=True)
    freed = 0
    for res in results[keep:]:
        if os.path.basename(res)[:-len(".json")] in cited:
            continue
        for arch in glob.glob(res[:-len(".json")] + ".raw.tar*"):
            freed += os.path.getsize(arch)
            os.unlink(arch)
            log(f"pruned {arch}")
    log(f"kept the raw archives of the newest {keep} result(s) and of every protocol or cited one; "
        f"freed {freed / 2**20:.1f} MiB")
