"""Corpora of the end-to-end benchmark, built deterministically and cached as JSONL.

* :func:`real_paragraphs` — distinct paragraphs of real text found on this machine,
  in a fixed order: the ``.py`` sources of the Python standard library, then those
  of the installed site-packages, then Debian's text under ``/usr/share/doc``
  (``copyright`` files, READMEs, changelogs — ``.gz`` files are decompressed).
  Every source's file list is sorted; files are split on blank lines; paragraphs of
  ``min_chars`` to ``max_chars`` characters are kept; an identical paragraph seen
  before (in any source) is skipped.
* :func:`build_real_corpus` — those paragraphs (the *base*) plus
  ``len(base) // 10`` planted near duplicates
  (:func:`neardup.testing.plant_near_duplicates`, edit rates 0–8 %).
* :func:`build_scale_corpus` — ``n`` paragraph-sized synthetic documents
  (:func:`neardup.testing.synthetic_documents`, 50 words, ~300 bytes each) of which 10 % are
  planted near duplicates of the others.

Corpora are written as JSONL lines ``{"id": <int>, "text": <str>}`` under
``benchmarks/.corpus/`` (git-ignored) with a ``.meta.json`` beside them (sources,
counts, bytes, SHA-256 of the file); an existing file with matching parameters is
reused.  Only this script is committed, never the data.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import site
import struct
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CACHE_DIR = HERE / ".corpus"
SPLIT = re.compile(r"\n\s*\n")  # the same paragraph split as neardup.testing.stdlib_paragraphs
MIN_CHARS = 200
MAX_CHARS = 100_000
EDIT_RATES = [0.0, 0.01, 0.02, 0.04, 0.08]
PLANT_SEED = 20240607
SCALE_SEED = 20240608
SCALE_WORDS = 50
DOC_ROOT = Path("/usr/share/doc")
# Text files of /usr/share/doc (after removing a ``.gz`` suffix); HTML, images,
# scripts and examples are left out.
_DOC_NAME = re.compile(
    r"^(copyright|readme.*|changelog.*|news.*|changes.*|todo.*|authors.*|thanks.*|"
    r"credits.*|faq.*|history.*|bugs.*|.*\.txt|.*\.md|.*\.rst)$",
    re.IGNORECASE,
)
FORMAT = 1  # bump when the construction changes (invalidates cached corpora)


def stdlib_root() -> Path:
    return Path(os.__file__).resolve().parent


def site_packages_root() -> Path:
    """The site-packages of the running interpreter (the benchmark venv)."""
    for p in site.getsitepackages():
        if Path(p).is_dir() and Path(p).name == "site-packages":
            return Path(p).resolve()
    raise SystemExit("no site-packages folder found")


def source_files() -> dict[str, list[Path]]:
    """The sorted file list of every source."""
    std = stdlib_root()
    sp = site_packages_root()
    doc = sorted(
        p for p in DOC_ROOT.rglob("*")
        if p.is_file() and not p.is_symlink()
        and _DOC_NAME.match(p.name[:-3] if p.name.endswith(".gz") else p.name)
    ) if DOC_ROOT.is_dir() else []
    return {
        "stdlib_py": sorted(p for p in std.rglob("*.py") if "site-packages" not in p.parts),
        "site_packages_py": sorted(p for p in sp.rglob("*.py") if p.is_file()),
        "debian_doc": doc,
    }


def _read_text(path: Path) -> str | None:
    try:
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
        text = data.decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError, gzip.BadGzipFile):
        return None
    return None if "\x00" in text else text


def iter_paragraphs(
    files: Sequence[Path], min_chars: int = MIN_CHARS, max_chars: int = MAX_CHARS
) -> Iterator[str]:
    for path in files:
        text = _read_text(path)
        if text is None:
            continue
        for para in SPLIT.split(text):
            para = para.strip()
            if min_chars <= len(para) <= max_chars:
                yield para


def real_paragraphs(limit: int | None = None) -> tuple[list[str], dict[str, Any]]:
    """Up to ``limit`` distinct real paragraphs (all when None) and per-source stats."""
    seen: set[str] = set()
    out: list[str] = []
    stats: dict[str, Any] = {}
    for name, files in source_files().items():
        before = len(out)
        n_bytes = 0
        used_files = 0
        for para in iter_paragraphs(files):
            if limit is not None and len(out) >= limit:
                break
            if para in seen:
                continue
            seen.add(para)
            out.append(para)
            n_bytes += len(para.encode("utf-8", "surrogatepass"))
        else:
            used_files = len(files)
        stats[name] = {
            "files": len(files),
            "files_read_fully": used_files,
            "paragraphs": len(out) - before,
            "bytes": n_bytes,
        }
    return out, stats


def _write_jsonl(path: Path, texts: Sequence[str]) -> str:
    """Write ``{"id": i, "text": t}`` lines atomically; return the file's SHA-256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    h = hashlib.sha256()
    with open(tmp, "wb") as fh:
        for i, t in enumerate(texts):
            line = (json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n").encode(
                "utf-8", "surrogatepass"
            )
            h.update(line)
            fh.write(line)
    tmp.replace(path)
    return h.hexdigest()


def _cached(path: Path, params: dict[str, Any]) -> dict[str, Any] | None:
    meta_path = path.with_suffix(".meta.json")
    if not (path.exists() and meta_path.exists()):
        return None
    meta = json.loads(meta_path.read_text())
    if meta.get("params") != params or meta.get("file_bytes") != path.stat().st_size:
        return None
    meta["reused_cached_file"] = True
    return meta


def _finish(path: Path, texts: Sequence[str], params: dict[str, Any],
            extra: dict[str, Any], t0: float) -> dict[str, Any]:
    digest = _write_jsonl(path, texts)
    text_bytes = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    meta = {
        "path": str(path),
        "params": params,
        "n_docs": len(texts),
        "text_bytes": text_bytes,
        "text_mb": round(text_bytes / 1e6, 2),
        "file_bytes": path.stat().st_size,
        "mean_bytes_per_doc": round(text_bytes / len(texts), 1) if texts else 0.0,
        "sha256": digest,
        "build_s": round(time.perf_counter() - t0, 2),
        **extra,
    }
    path.with_suffix(".meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    meta["reused_cached_file"] = False
    return meta


def build_real_corpus(
    limit: int | None = None, *, cache_dir: Path = CACHE_DIR, name: str | None = None
) -> dict[str, Any]:
    """The real corpus (base paragraphs + 10 % planted copies) as a JSONL file.

    Returns its metadata (``path``, counts, bytes, per-source stats, ``parents``
    path).  ``parents[i]`` is the base index a planted copy came from (-1 for base
    documents) and is written to ``<name>.parents.json``.
    """
    import neardup
    import neardup.testing

    params = {
        "kind": "real", "format": FORMAT, "limit": limit, "min_chars": MIN_CHARS,
        "max_chars": MAX_CHARS, "edit_rates": EDIT_RATES, "plant_seed": PLANT_SEED,
        "copies": "len(base) // 10", "python": sys.version.split()[0],
        "site_packages": str(site_packages_root()), "stdlib": str(stdlib_root()),
    }
    path = cache_dir / f"{name or ('real-' + (str(limit) if limit else 'all'))}.jsonl"
    meta = _cached(path, params)
    if meta is not None:
        return meta
    t0 = time.perf_counter()
    base, sources = real_paragraphs(limit)
    texts, parents = neardup.testing.plant_near_duplicates(
        base, copies=len(base) // 10, edit_rate=EDIT_RATES, seed=PLANT_SEED
    )
    parents_path = path.with_suffix(".parents.json")
    parents_path.parent.mkdir(parents=True, exist_ok=True)
    parents_path.write_text(json.dumps(parents))
    return _finish(path, texts, params, {
        "base_docs": len(base),
        "planted_copies": len(texts) - len(base),
        "sources": sources,
        "parents_path": str(parents_path),
    }, t0)


def build_scale_corpus(
    n: int, *, cache_dir: Path = CACHE_DIR, name: str | None = None
) -> dict[str, Any]:
    """``n`` synthetic 50-word documents: 90 % base, 10 % planted near duplicates."""
    import neardup
    import neardup.testing

    copies = n // 10
    params = {
        "kind": "synthetic", "format": FORMAT, "n": n, "words": SCALE_WORDS,
        "synthetic_seed": SCALE_SEED, "copies": copies, "edit_rates": EDIT_RATES,
        "plant_seed": PLANT_SEED,
    }
    path = cache_dir / f"{name or f'scale-{n}'}.jsonl"
    meta = _cached(path, params)
    if meta is not None:
        return meta
    t0 = time.perf_counter()
    base = neardup.testing.synthetic_documents(n - copies, seed=SCALE_SEED, words=SCALE_WORDS)
    texts, _ = neardup.testing.plant_near_duplicates(
        base, copies=copies, edit_rate=EDIT_RATES, seed=PLANT_SEED
    )
    return _finish(path, texts, params, {
        "base_docs": len(base),
        "planted_copies": copies,
        "sources": {"neardup.testing.synthetic_documents": {"docs": len(base), "words": SCALE_WORDS}},
    }, t0)


LOCALE_ROOTS = (Path("/usr/share/locale"), Path("/usr/share/locale-langpack"))
MIN_MESSAGE_CHARS = 60  # shortest record of the short-record shapes


def changelog_entries() -> Iterator[str]:
    """Entries of Debian's package changelogs (``changelog.Debian.gz``), one record
    each: header line, bullet items, sign-off line — a fixed template."""
    for path in sorted(DOC_ROOT.glob("*/changelog.Debian.gz")) if DOC_ROOT.is_dir() else []:
        text = _read_text(path)
        if text is None:
            continue
        cur: list[str] = []
        for line in text.splitlines():
            cur.append(line)
            if line.startswith(" -- "):
                entry = "\n".join(cur).strip()
                cur = []
                if entry:
                    yield entry


def mo_entries(data: bytes) -> Iterator[tuple[bytes, bytes]]:
    """``(msgid, msgstr)`` of a compiled gettext catalogue (GNU ``.mo`` layout: magic,
    revision, count, offsets of the two (length, offset) tables), as stored: the header
    entry included, a ``msgctxt`` before ``\\x04`` and plural forms after ``\\x00``.

    Data too short or without the magic number yields nothing; tables that point past
    the data raise :class:`struct.error` when reached, so a caller decides whether the
    entries before it count.

    >>> list(mo_entries(b"not a catalogue"))
    []
    """
    if len(data) < 20:
        return
    magic = struct.unpack_from("<I", data)[0]
    end = "<" if magic == 0x950412DE else ">" if magic == 0xDE120495 else ""
    if not end:
        return
    _, n, orig, trans = struct.unpack_from(end + "4I", data, 4)
    for i in range(n):
        ilen, ioff = struct.unpack_from(end + "2I", data, orig + 8 * i)
        slen, soff = struct.unpack_from(end + "2I", data, trans + 8 * i)
        yield data[ioff : ioff + ilen], data[soff : soff + slen]


def catalogue_messages(min_chars: int = MIN_MESSAGE_CHARS) -> Iterator[str]:
    """Translated messages of the machine's gettext catalogues (``*.mo``), every
    script: short, and full of shared phrasing (usage lines, error templates).
    Catalogue headers (empty msgid) and plural forms past the first are left out."""
    files: list[Path] = []
    for root in LOCALE_ROOTS:
        if root.is_dir():
            files.extend(sorted(root.glob("*/LC_MESSAGES/*.mo")))
    for path in files:
        try:
            pairs = list(mo_entries(path.read_bytes()))  # a damaged file counts not at all
        except (OSError, struct.error):
            continue
        for msgid, msgstr in pairs:
            if not msgid:
                continue
            try:
                msg = msgstr.split(b"\x00")[0].decode("utf-8").strip()
            except UnicodeDecodeError:
                continue
            if len(msg) >= min_chars:
                yield msg


def api_records(min_chars: int = MIN_MESSAGE_CHARS) -> Iterator[str]:
    """Generated API documentation of the Python sources on this machine (standard
    library, then site-packages): one record per function or method,
    ``module.Class.name(signature)`` and the first paragraph of its docstring."""
    import ast

    src = source_files()

    def walk(node: ast.AST, prefix: str) -> Iterator[str]:
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = (ast.get_docstring(ch) or "").split("\n\n")[0].strip()
                yield f"{prefix}{ch.name}({ast.unparse(ch.args)})\n{doc}".strip()
            elif isinstance(ch, ast.ClassDef):
                yield from walk(ch, f"{prefix}{ch.name}.")

    for path in [*src["stdlib_py"], *src["site_packages_py"]]:
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError, OSError):
            continue
        for rec in walk(tree, f"{path.stem}."):
            if len(rec) >= min_chars:
                yield rec


MAN_ROOT = Path("/usr/share/man")
# Requests that end a man page paragraph, and those whose arguments are text.
_MAN_BREAK = re.compile(
    r"^\.(SH|SS|PP|P|LP|TP|IP|HP|sp|br|RS|RE|TQ|nf|fi|EX|EE|in|ti|Sh|Ss|Pp|It|Bl|El|Bd|Ed)\b"
)
_MAN_FONT = re.compile(
    r"^\.(B|I|BR|RB|IR|RI|BI|IB|SM|SB|Nm|Ar|Fl|Op|Xr|Pa|Dq|Sq|Em|Li|Cm|Ev|Va|Ql)\s+(.*)$"
)
_MAN_ESCAPES = [
    (re.compile(r"\\f(\[[^\]]*\]|\(..|.)"), ""),
    (re.compile(r"\\\((aq|cq)"), "'"),
    (re.compile(r"\\\((lq|rq|dq)"), '"'),
    (re.compile(r"\\\((em|en|hy)"), "-"),
    (re.compile(r"\\\(co"), "(c)"),
    (re.compile(r"\\\*\(..|\\\*\[[^\]]*\]|\\\*."), ""),
    (re.compile(r"\\s[-+]?\d"), ""),
    (re.compile(r"\\[&|^%c]"), ""),
    (re.compile(r"\\-"), "-"),
    (re.compile(r"\\e"), "\\\\"),
    (re.compile(r"\\ "), " "),
]


def _man_text(lines: list[str]) -> str:
    text = " ".join(lines)
    for pat, rep in _MAN_ESCAPES:
        text = pat.sub(rep, text)
    return re.sub(r"\s+", " ", text).strip()


def manpage_paragraphs(min_chars: int = MIN_MESSAGE_CHARS) -> Iterator[str]:
    """Paragraphs of the machine's man pages (``/usr/share/man``, every language),
    troff requests and font escapes stripped: real technical documentation, short,
    and heavily templated where the pages are generated (command-line tools that
    document every flag of every subcommand with the same sentences)."""
    files = sorted(MAN_ROOT.rglob("*.gz")) if MAN_ROOT.is_dir() else []
    for path in files:
        text = _read_text(path)
        if text is None:
            continue
        cur: list[str] = []
        for line in [*text.splitlines(), ".PP"]:
            if line.startswith(('.\\"', "'\\\"")):
                continue
            if _MAN_BREAK.match(line) or not line.strip():
                para = _man_text(cur)
                cur = []
                if len(para) >= min_chars:
                    yield para
            elif m := _MAN_FONT.match(line):
                cur.append(m.group(2).replace('"', ""))
            elif not line.startswith((".", "'")):
                cur.append(line)


SHAPES = ("templated", "scripts", "manpages")


def shaped_records(shape: str, limit: int | None = None) -> tuple[list[str], dict[str, Any]]:
    """Up to ``limit`` distinct short records of one shape, in a fixed order.

    * ``templated``: API records (:func:`api_records`) with one Debian changelog
      entry after every seven (:func:`changelog_entries`);
    * ``scripts``: gettext catalogue messages of every language
      (:func:`catalogue_messages`);
    * ``manpages``: paragraphs of the man pages (:func:`manpage_paragraphs`).
    """
    if shape == "templated":
        streams = {"api_records": api_records(), "changelog_entries": changelog_entries()}
        pick = ["api_records"] * 7 + ["changelog_entries"]
    elif shape == "scripts":
        streams = {"catalogue_messages": catalogue_messages()}
        pick = ["catalogue_messages"]
    elif shape == "manpages":
        streams = {"manpage_paragraphs": manpage_paragraphs()}
        pick = ["manpage_paragraphs"]
    else:
        raise ValueError(f"shape must be one of {SHAPES}, not {shape!r}")
    seen: set[str] = set()
    out: list[str] = []
    counts = dict.fromkeys(streams, 0)
    live = set(streams)
    i = 0
    while live and (limit is None or len(out) < limit):
        src = pick[i % len(pick)]
        i += 1
        if src not in live:
            continue
        rec = next(streams[src], None)
        if rec is None:
            live.discard(src)
            continue
        if rec in seen:
            continue
        seen.add(rec)
        out.append(rec)
        counts[src] += 1
    return out, counts


def build_templated_corpus(
    limit: int | None = None,
    *,
    shape: str = "templated",
    cache_dir: Path = CACHE_DIR,
    name: str | None = None,
) -> dict[str, Any]:
    """Short records of one shape (see :func:`shaped_records`) + about 10 % planted
    near duplicates (``limit`` documents in all), as a JSONL file; returns its
    metadata like :func:`build_real_corpus`."""
    import neardup
    import neardup.testing

    params = {
        "kind": shape, "format": FORMAT, "limit": limit,
        "min_chars": MIN_MESSAGE_CHARS, "edit_rates": EDIT_RATES,
        "plant_seed": PLANT_SEED, "copies": "limit // 11, or len(base) // 10 for all",
        "python": sys.version.split()[0], "site_packages": str(site_packages_root()),
    }
    path = cache_dir / f"{name or (shape + '-' + (str(limit) if limit else 'all'))}.jsonl"
    meta = _cached(path, params)
    if meta is not None:
        return meta
    t0 = time.perf_counter()
    base, sources = shaped_records(shape, None if limit is None else limit - limit // 11)
    copies = len(base) // 10 if limit is None else limit - len(base)
    texts, parents = neardup.testing.plant_near_duplicates(
        base, copies=copies, edit_rate=EDIT_RATES, seed=PLANT_SEED
    )
    parents_path = path.with_suffix(".parents.json")
    parents_path.parent.mkdir(parents=True, exist_ok=True)
    parents_path.write_text(json.dumps(parents))
    lens = sorted(len(t.encode("utf-8")) for t in texts)
    return _finish(path, texts, params, {
        "base_docs": len(base),
        "planted_copies": len(texts) - len(base),
        "sources": sources,
        "median_bytes_per_doc": lens[len(lens) // 2] if lens else 0,
        "parents_path": str(parents_path),
    }, t0)


def read_texts(path: str | Path) -> list[str]:
    """The ``text`` fields of a corpus JSONL file, in order."""
    with open(path, "rb") as fh:
        return [json.loads(line)["text"] for line in fh]


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(description="Build (or reuse) the end-to-end corpora.")
    p.add_argument("--docs", type=int, default=None, help="base paragraphs (default: all)")
    p.add_argument("--scale", type=int, default=0, help="also build the scale corpus of N docs")
    a = p.parse_args(argv)
    print(json.dumps(build_real_corpus(a.docs), indent=2))
    if a.scale:
        print(json.dumps(build_scale_corpus(a.scale), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
