"""A multilingual near-duplicate corpus from real translated text, with planted copies.

The text is the translations that software ships in its gettext catalogues:

* Python wheels (or sdists, zip or tar files) holding ``*.po`` / ``*.mo`` files — by
  default ``--pip-download`` fetches :data:`PIP_SOURCES` (Django, Wagtail,
  django-allauth, Sphinx, pinned) with ``pip download --no-deps`` into a temporary
  folder, through whatever index pip is configured with;
* folders holding catalogues, e.g. ``/usr/share/locale`` (the ``.mo`` files the
  machine's Debian packages installed), given with ``--source``.

For each language (:data:`LANGS`; locale folders such as ``zh_CN`` and ``zh_Hans``
map to one label) the translated strings (``msgstr``; the first plural form; fuzzy
and untranslated entries and strings longer than :data:`MAX_ENTRY` characters left
out; a string seen before in the same language skipped) are joined in catalogue
order into paragraphs of at least ``min_chars`` characters (:data:`MIN_CHARS`,
lower for scripts written without spaces, whose characters carry more) and below
:data:`MAX_CHARS`.  English is the source strings (``msgid``).  Strings are joined
with a space, and in Chinese and Japanese with ``。`` (no space) unless the string
already ends in punctuation, as running text in those languages is written.

Every base paragraph gets ``copies`` planted copies.  A copy draws its edit rate
uniformly from :data:`EDIT_RATE` (0.5–1 %) and makes ``max(1, round(rate × units))``
edits, each a substitution, insertion or deletion (equally likely) at a random
place, where a unit is a letter or digit in scripts written without spaces (``zh``,
``ja``, ``th``, ``km``, ``my``: the inserted or substituted character is drawn
from the same paragraph) and a whitespace-separated word elsewhere (the word is
drawn from the same paragraph).  Everything is seeded: the same sources and
options give the same file.

Output: JSONL lines ``{"id", "text", "lang", "orig", "edits", "edit_rate"}`` in a
seeded shuffled order, ``id`` the line number, ``orig`` the id of the paragraph a
planted copy was made from (``null`` for base paragraphs), plus ``OUT.meta.json``
(sources with their SHA-256, counts per language, options).  Only this script is
committed, never the data::

    python benchmarks/multilingual_corpus.py --pip-download --source /usr/share/locale \\
        --out /tmp/ml.jsonl
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import random
import re
import struct
import subprocess
import sys
import tarfile
import tempfile
import unicodedata
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # also when loaded by path (the tests)
from corpus import mo_entries  # noqa: E402

CACHE_DIR = HERE / ".corpus"
FORMAT = 2  # bump when the construction changes (invalidates cached corpora)

PIP_SOURCES = ("django==5.2.20", "wagtail==8.0.1", "django-allauth==65.22.1", "sphinx==9.0.4")
# Locale folder name (before any ``.encoding`` or ``@modifier``) -> language label.
LOCALES: dict[str, str] = {
    "zh_Hans": "zh_Hans", "zh_CN": "zh_Hans", "zh_SG": "zh_Hans",
    "zh_Hant": "zh_Hant", "zh_TW": "zh_Hant", "zh_HK": "zh_Hant",
    "ja": "ja", "ja_JP": "ja", "ko": "ko", "ko_KR": "ko", "th": "th", "th_TH": "th",
    "km": "km", "km_KH": "km", "my": "my", "my_MM": "my",
    "ru": "ru", "ru_RU": "ru", "ar": "ar", "hi": "hi", "hi_IN": "hi",
    "de": "de", "de_DE": "de", "vi": "vi", "vi_VN": "vi",
}
LANGS = ("zh_Hans", "zh_Hant", "ja", "th", "km", "my", "ko", "ru", "ar", "hi", "de", "vi", "en")
# Scripts written without spaces between words: edits are per character there (a
# letter with its combining marks: what a reader counts as one character).
UNSPACED = frozenset({"zh_Hans", "zh_Hant", "ja", "th", "km", "my"})
# The scripts (first word of the Unicode character name) a string of an unspaced
# language must be written in, for at least half of its letters, to count as text of
# that language: catalogues also hold strings left in English or made of
# placeholders, which would be English paragraphs edited per character.
SCRIPTS: dict[str, frozenset[str]] = {
    "zh_Hans": frozenset({"CJK"}),
    "zh_Hant": frozenset({"CJK"}),
    "ja": frozenset({"CJK", "HIRAGANA", "KATAKANA", "HALFWIDTH"}),
    "th": frozenset({"THAI"}),
    "km": frozenset({"KHMER"}),
    "my": frozenset({"MYANMAR"}),
}
MIN_CHARS = 500
MIN_CHARS_UNSPACED = 300
MAX_CHARS = 800
MAX_ENTRY = 300
EDIT_RATE = (0.005, 0.01)
SEED = 20261206
_CJK_STOP = "。"
_PUNCT_END = re.compile(r"[\s.!?:;,。！？：；、…»”」』）)\]]$")


# --------------------------------------------------------------------------- catalogues


def parse_po(text: str) -> list[tuple[str, str]]:
    """``(msgid, msgstr)`` of a ``.po`` file's translated entries: fuzzy, obsolete and
    empty ones left out, the first plural form for plural entries."""
    out: list[tuple[str, str]] = []
    cur: dict[str, str] = {}
    key: str | None = None
    fuzzy = False

    def flush() -> None:
        nonlocal cur, fuzzy
        msgid = cur.get("msgid", "")
        msgstr = cur.get("msgstr", cur.get("msgstr[0]", ""))
        if msgid and msgstr and not fuzzy:
            out.append((msgid, msgstr))
        cur, fuzzy = {}, False

    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#~"):
            if not line:
                flush()
                key = None
            continue
        if line.startswith("#"):
            if line.startswith("#,") and "fuzzy" in line:
                if cur:
                    flush()
                fuzzy = True
            continue
        m = re.match(r"(msgctxt|msgid_plural|msgid|msgstr(?:\[\d+\])?)\s+(\".*\")$", line)
        try:
            if m:
                key = m.group(1)
                if key in ("msgid", "msgctxt") and "msgid" in cur:
                    keep_fuzzy = fuzzy
                    flush()
                    fuzzy = keep_fuzzy
                cur[key] = ast.literal_eval(m.group(2))
            elif line.startswith('"') and key is not None:
                cur[key] = cur.get(key, "") + ast.literal_eval(line)
        except (ValueError, SyntaxError):  # a malformed line: drop the entry
            cur, key = {}, None
    flush()
    return out


def parse_mo(data: bytes) -> list[tuple[str, str]]:
    """``(msgid, msgstr)`` of a compiled catalogue (GNU ``.mo``, read by
    :func:`corpus.mo_entries`): the header and empty translations left out, the context
    dropped, the first plural form; a damaged table or a string that is not UTF-8 ends
    the catalogue (the entries before it are kept)."""
    out = []
    try:
        for raw_id, raw_str in mo_entries(data):
            msgid = raw_id.split(b"\x00")[0].decode("utf-8")
            msgstr = raw_str.split(b"\x00")[0].decode("utf-8")
            if msgid and msgstr:
                out.append((msgid.split("\x04")[-1], msgstr))  # \x04 ends a msgctxt
    except (struct.error, UnicodeDecodeError):
        return out
    return out


def locale_of(path: str) -> str | None:
    """The language label of a catalogue path ``…/<locale>/LC_MESSAGES/x.po``."""
    parts = path.replace("\\", "/").split("/")
    if "LC_MESSAGES" not in parts:
        return None
    i = parts.index("LC_MESSAGES")
    if i == 0:
        return None
    loc = re.split(r"[.@]", parts[i - 1])[0]
    return LOCALES.get(loc)


def _is_catalogue(name: str) -> bool:
    return "/LC_MESSAGES/" in name.replace("\\", "/") and name.endswith((".po", ".mo"))


def _members(source: Path) -> Iterator[tuple[str, bytes]]:
    """``(name, bytes)`` of the catalogues in a folder, a zip/wheel or a tar file,
    sorted by name; a ``.po`` beside its own ``.mo`` is preferred (it is the source)."""
    found: dict[str, bytes] = {}
    if source.is_dir():
        for p in sorted(source.rglob("*")):
            rel = p.relative_to(source).as_posix()
            if p.is_file() and _is_catalogue("/" + rel):
                found[rel] = p.read_bytes()
    elif zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as z:
            for n in z.namelist():
                if _is_catalogue(n):
                    found[n] = z.read(n)
    elif tarfile.is_tarfile(source):
        with tarfile.open(source) as t:
            for m in t.getmembers():
                f = t.extractfile(m) if m.isfile() and _is_catalogue(m.name) else None
                if f is not None:
                    found[m.name] = f.read()
    else:
        raise SystemExit(f"--source {source}: not a folder, zip/wheel or tar file")
    for name in sorted(found):
        if name.endswith(".mo") and name[:-3] + ".po" in found:
            continue
        yield name, found[name]


def _source_digest(source: Path) -> str:
    h = hashlib.sha256()
    if source.is_dir():
        for name, data in _members(source):
            h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    else:
        h.update(source.read_bytes())
    return h.hexdigest()[:16]


def read_catalogues(sources: Iterable[Path]) -> tuple[dict[str, list[str]], list[dict[str, Any]]]:
    """Strings per language label in source and catalogue order (English: msgids),
    each string once per language, and a description of each source."""
    per: dict[str, list[str]] = {lang: [] for lang in LANGS}
    seen: dict[str, set[str]] = {lang: set() for lang in LANGS}
    described = []

    def add(lang: str, s: str) -> None:
        s = " ".join(s.split())
        if s and len(s) <= MAX_ENTRY and s not in seen[lang] and written_in(s, lang):
            seen[lang].add(s)
            per[lang].append(s)

    for src in sources:
        n_files = 0
        for name, data in _members(src):
            lang = locale_of(name)
            if lang is None:
                continue
            n_files += 1
            if name.endswith(".po"):
                pairs = parse_po(data.decode("utf-8", "replace"))
            else:
                pairs = parse_mo(data)
            for msgid, msgstr in pairs:
                add("en", msgid)
                if msgstr.strip() != msgid.strip():
                    add(lang, msgstr)
        described.append({"source": src.name if not src.is_dir() else str(src),
                          "sha256": _source_digest(src), "catalogues_used": n_files})
    return per, described


# --------------------------------------------------------------------------- paragraphs


def paragraphs(strings: list[str], lang: str, min_chars: int, max_chars: int) -> list[str]:
    """Consecutive strings joined into paragraphs of ``min_chars`` to ``max_chars``."""
    cjk = lang in ("zh_Hans", "zh_Hant", "ja")
    out: list[str] = []
    cur = ""
    for s in strings:
        if cur:
            sep = ("" if _PUNCT_END.search(cur) else _CJK_STOP) if cjk else " "
            nxt = cur + sep + s
        else:
            nxt = s
        if len(nxt) >= max_chars:
            if len(cur) >= min_chars:
                out.append(cur)
            cur = s
            continue
        cur = nxt
        if len(cur) >= min_chars:
            out.append(cur)
            cur = ""
    return out


# --------------------------------------------------------------------------- planted copies


def written_in(text: str, lang: str) -> bool:
    """Whether at least half of ``text``'s letters are of ``lang``'s script (always
    true for a spaced language: its words are edited whatever their script)."""
    scripts = SCRIPTS.get(lang)
    if scripts is None:
        return True
    letters = [c for c in text if unicodedata.category(c)[0] == "L"]
    own = sum(1 for c in letters if unicodedata.name(c, "?").split(" ")[0] in scripts)
    return bool(letters) and 2 * own >= len(letters)


def clusters(text: str) -> list[str]:
    """``text`` as characters a reader counts: a letter or digit with the combining
    marks after it is one; any other character is one on its own."""
    out: list[str] = []
    for ch in text:
        if out and unicodedata.category(ch)[0] == "M" and _alnum(out[-1][0]):
            out[-1] += ch
        else:
            out.append(ch)
    return out


def _alnum(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "LNM" and not ch.isspace()


def _kind(ch: str) -> tuple[str, str]:
    """A character's script (first word of its Unicode name) and category."""
    return unicodedata.name(ch, "?").split(" ")[0], unicodedata.category(ch)


def edit_chars(text: str, rate: float, rng: random.Random) -> tuple[str, int]:
    """``text`` with ``max(1, round(rate * characters))`` character edits, where a
    character is a letter or digit with its marks (:func:`clusters`); one put in is
    one of the paragraph's, of the script and category of its neighbour."""
    chars = clusters(text)
    pool = [c for c in chars if _alnum(c[0])]
    n = max(1, round(rate * len(pool)))
    for _ in range(n):
        pos = [i for i, c in enumerate(chars) if _alnum(c[0])]
        if not pos:
            break
        i = rng.choice(pos)
        like = [c for c in pool if _kind(c[0]) == _kind(chars[i][0]) and c != chars[i]] or pool
        op = rng.randrange(3)
        if op == 0:
            chars[i] = rng.choice(like)
        elif op == 1:
            chars.insert(i, rng.choice(like))
        else:
            del chars[i]
    return "".join(chars), n


def edit_words(text: str, rate: float, rng: random.Random) -> tuple[str, int]:
    """``text`` with ``max(1, round(rate * words))`` word edits (words: maximal runs
    of non-whitespace; the result's words are joined by single spaces)."""
    words = text.split()
    pool = list(words)
    n = max(1, round(rate * len(words)))
    for _ in range(n):
        if not words:
            break
        i = rng.randrange(len(words))
        op = rng.randrange(3)
        if op == 0:
            alts = [w for w in pool if w != words[i]]
            words[i] = rng.choice(alts) if alts else words[i] + words[i]
        elif op == 1:
            words.insert(i, rng.choice(pool))
        else:
            del words[i]
    return " ".join(words), n


def plant(base: dict[str, list[str]], copies: int, seed: int) -> list[dict[str, Any]]:
    """Records of the base paragraphs and their planted copies, shuffled, ids set."""
    recs: list[dict[str, Any]] = []
    for lang in LANGS:
        for j, text in enumerate(base.get(lang, [])):
            key = len(recs)
            recs.append({"text": text, "lang": lang, "orig": None, "edits": 0,
                         "edit_rate": 0.0, "_key": key})
            for c in range(copies):
                rng = random.Random(f"{seed}:{lang}:{j}:{c}")
                rate = round(rng.uniform(*EDIT_RATE), 5)
                fn = edit_chars if lang in UNSPACED else edit_words
                new, n = fn(text, rate, rng)
                recs.append({"text": new, "lang": lang, "orig": key, "edits": n,
                             "edit_rate": rate, "_key": None})
    random.Random(seed).shuffle(recs)
    new_id = {r["_key"]: i for i, r in enumerate(recs) if r["_key"] is not None}
    out = []
    for i, r in enumerate(recs):
        orig = None if r["orig"] is None else new_id[r["orig"]]
        out.append({"id": i, "text": r["text"], "lang": r["lang"], "orig": orig,
                    "edits": r["edits"], "edit_rate": r["edit_rate"]})
    return out


# --------------------------------------------------------------------------- building


def pip_download(specs: Iterable[str], dest: Path) -> list[Path]:
    """``pip download --no-deps`` of ``specs`` into ``dest`` (pip's configured index)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(dest),
           *specs]
    subprocess.run(cmd, check=True)
    return sorted(p for p in dest.iterdir() if p.is_file())


def build(sources: list[Path], out: Path, *, max_docs_per_lang: int | None = None,
          copies: int = 1, seed: int = SEED, min_chars: int = MIN_CHARS,
          min_chars_unspaced: int = MIN_CHARS_UNSPACED, max_chars: int = MAX_CHARS,
          langs: Iterable[str] = LANGS) -> dict[str, Any]:
    """Write the corpus to ``out`` and its description to ``out.meta.json``; return it."""
    strings, described = read_catalogues(sources)
    wanted = set(langs)
    base: dict[str, list[str]] = {}
    for lang in LANGS:
        if lang not in wanted:
            continue
        lo = min_chars_unspaced if lang in UNSPACED else min_chars
        paras = paragraphs(strings[lang], lang, lo, max_chars)
        if max_docs_per_lang is not None and len(paras) > max_docs_per_lang:
            # An evenly spread, seeded sample, so every source keeps its share.
            pick = sorted(random.Random(f"{seed}:{lang}:sample").sample(
                range(len(paras)), max_docs_per_lang))
            paras = [paras[i] for i in pick]
        base[lang] = paras
    recs = plant(base, copies, seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as fh:
        for r in recs:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    per_lang: dict[str, dict[str, Any]] = {}
    for r in recs:
        d = per_lang.setdefault(r["lang"], {"base": 0, "copies": 0, "chars": 0, "bytes": 0})
        d["copies" if r["orig"] is not None else "base"] += 1
        d["chars"] += len(r["text"])
        d["bytes"] += len(r["text"].encode("utf-8"))
    meta = {
        "format": FORMAT,
        "path": str(out),
        "sha256": hashlib.sha256(out.read_bytes()).hexdigest()[:16],
        "n_docs": len(recs),
        "text_bytes": sum(d["bytes"] for d in per_lang.values()),
        "per_lang": per_lang,
        "sources": described,
        "strings_per_lang": {k: len(v) for k, v in strings.items()},
        "params": {"copies": copies, "seed": seed, "min_chars": min_chars,
                   "min_chars_unspaced": min_chars_unspaced, "max_chars": max_chars,
                   "max_entry": MAX_ENTRY, "edit_rate": list(EDIT_RATE),
                   "max_docs_per_lang": max_docs_per_lang, "unspaced": sorted(UNSPACED),
                   "langs": [lang for lang in LANGS if lang in wanted]},
    }
    Path(str(out) + ".meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return meta


def add_source_args(p: argparse.ArgumentParser) -> None:
    """The corpus options, shared with ``bench_multilingual.py``."""
    p.add_argument("--source", type=Path, action="append", default=[],
                   help="a folder, wheel, zip or tar file holding */LC_MESSAGES/*.po|.mo "
                        "catalogues (repeatable), e.g. /usr/share/locale")
    p.add_argument("--pip-download", action="store_true",
                   help=f"also pip download {', '.join(PIP_SOURCES)} (--no-deps) into a "
                        "temporary folder and read their catalogues")
    p.add_argument("--max-docs-per-lang", type=int, default=None,
                   help="base paragraphs per language at most (a seeded sample; "
                        "default: all)")
    p.add_argument("--copies", type=int, default=1,
                   help="planted copies per base paragraph (default 1)")
    p.add_argument("--seed", type=int, default=SEED, help=f"(default {SEED})")


def sources_from_args(a: argparse.Namespace, tmp: Path) -> list[Path]:
    sources = list(a.source)
    if a.pip_download:
        sources[:0] = pip_download(PIP_SOURCES, tmp)
    if not sources:
        raise SystemExit("no source: give --source PATH (e.g. /usr/share/locale) and/or "
                         "--pip-download")
    return sources


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_source_args(p)
    p.add_argument("--out", type=Path, required=True, help="the JSONL file to write")
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ml-corpus-") as tmp:
        meta = build(sources_from_args(a, Path(tmp)), a.out,
                     max_docs_per_lang=a.max_docs_per_lang, copies=a.copies, seed=a.seed)
    print(json.dumps({k: meta[k] for k in ("path", "n_docs", "text_bytes", "per_lang")},
                     indent=1), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
