"""Frozen, keyword-only, validated configuration with stable fingerprints.

Every config validates itself in ``__post_init__`` — before any array is allocated —
and raises :class:`~neardup.InvalidConfig` naming the field, the value and the fix.
``fingerprint`` is a pure function of the fields and is written into every
signature set, index file and decision.

Example:
    >>> cfg = Config(threshold=0.8)
    >>> cfg.layout   # (bands, rows) chosen for recall at the threshold
    (21, 6)
    >>> Config(num_perm=31, bands=8)
    Traceback (most recent call last):
    ...
    neardup.core._errors.InvalidConfig: invalid num_perm=31: ...
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from neardup.core._errors import InvalidConfig
from neardup.core._fingerprint import FORMAT_VERSION, fingerprint
from neardup.core.layout import default_layout

__all__ = ["DEFAULT_MEMORY_LIMIT", "Config", "RunOptions", "ShingleSpec"]

ShingleKind = Literal["word", "char", "byte"]
HashAlgorithm = Literal["xxh64", "siphash24"]
SignatureKind = Literal["minhash", "oph"]
VerifyMode = Literal["exact", "estimate"]

_MAX_PERM = 4096

HASH_CHUNK_BYTES = 4 * 1024**2
"""Text hashed per kernel call in batch runs.  Larger chunks mean fewer kernel
calls, each of which has to take the GIL from the reading thread; 4-8 MiB with
1 MiB read blocks was measured ~0.3 s faster on 313k documents than 2 MiB with
16 MiB blocks, once numpy's huge-page faults were out of the way."""

SCRATCH_BYTES = 40 * 1024**2
"""Most scratch a batch run plans for: hashing works in chunks of about
``HASH_CHUNK_BYTES`` of text, each needing up to 9 bytes of buffers per text byte
(a document longer than a chunk is a chunk of its own and adds 9 bytes per byte of
it; the plan does not count that)."""


DEFAULT_MEMORY_LIMIT = 4 * 1024**3
"""Bytes a batch run plans to use at most unless told otherwise (4 GiB)."""


def scratch_bytes(text_bytes: int) -> int:
    """Hashing scratch planned for a chunk of ``text_bytes`` (plus 1 MiB of slack)."""
    return min(SCRATCH_BYTES, 9 * text_bytes + (1 << 20))


NORMALIZER_VERSIONS: dict[str, int] = {"nfkc-casefold": 1, "nfkc": 1, "raw": 1}
"""The built-in normalizers and the one version of each this release implements
(their code is in :mod:`neardup.text.normalize`; a config names one as ``name`` or
``name@version``)."""


def check_normalizer(name: str) -> tuple[str, int]:
    """``(name, version)`` of a normalizer setting, or :class:`InvalidConfig`.

    >>> check_normalizer("nfkc-casefold@1")
    ('nfkc-casefold', 1)
    """
    base, _, version = str(name).partition("@")
    known = NORMALIZER_VERSIONS.get(base)
    if known is None:
        raise InvalidConfig(
            "normalizer", name, "unknown normalizer", f"use one of {tuple(NORMALIZER_VERSIONS)}"
        )
    if version and version != str(known):
        raise InvalidConfig(
            "normalizer",
            name,
            f"version {version} is not available",
            f"use {base}@{known} (the only version this release implements)",
        )
    return base, known


TOKENIZER_VERSIONS: dict[int, str] = {
    1: "maximal runs of \\w (every release before tokenizer versions)",
    2: "script-aware: one token per letter of scripts written without spaces",
}
"""The word tokenizers this release implements (defined in :mod:`neardup.text.words`)."""

TOKENIZER = 2
"""The word tokenizer of a :class:`ShingleSpec` that names none."""

LEGACY_TOKENIZER = 1
"""The word tokenizer of a record (saved index, signature set, tenant configuration,
snapshot) that names none: such records were written before tokenizers had
versions.  Records name any other tokenizer, and leave this one out, so that they
stay byte-identical to what earlier releases wrote (fingerprints included)."""


def check_tokenizer(value: object) -> int:
    """The tokenizer version ``value`` names, or :class:`InvalidConfig`.

    >>> check_tokenizer(1)
    1
    """
    if isinstance(value, bool) or not isinstance(value, int) or value not in TOKENIZER_VERSIONS:
        raise InvalidConfig(
            "tokenizer",
            value,
            "unknown word tokenizer",
            f"use {TOKENIZER} (script-aware, the default) or 1 (the tokenizer of older "
            "releases, to reproduce their runs)",
        )
    return int(value)


def _check_int(name: str, value: object, lo: int, hi: int, fix: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidConfig(name, value, "must be an integer", fix)
    if not lo <= value <= hi:
        raise InvalidConfig(name, value, f"must be in [{lo}, {hi}]", fix)


@dataclass(frozen=True, kw_only=True, slots=True)
class ShingleSpec:
    """How a document becomes a set of shingles.

    * ``kind="word"``: n-grams of word tokens (:mod:`neardup.text.words`: a run of
      letters and digits of a script written with spaces, or one letter of Chinese,
      Japanese, Thai and the other scripts written without), joined by one space
      before hashing; ``tokenizer`` picks the definition of a token (2, the default,
      is script-aware; 1, maximal runs of ``\\w``, is the one of older releases);
    * ``kind="char"``: n-grams of Unicode code points;
    * ``kind="byte"``: k-grams of the UTF-8 bytes.

    A document with fewer than ``k`` units yields one shingle of what it has; a
    document with no unit is empty.  At most ``max_shingles`` shingles are taken,
    the first ones in document order; truncation is reported.

    ``ShingleSpec.parse("word:5")`` reads the CLI form.  ``tokenizer`` only
    matters for word shingles; char and byte specs always hold :data:`TOKENIZER`.
    """

    kind: ShingleKind = "word"
    k: int = 5
    max_shingles: int = 1_000_000
    tokenizer: int = TOKENIZER

    def __post_init__(self) -> None:
        if self.kind not in ("word", "char", "byte"):
            raise InvalidConfig("shingle.kind", self.kind, "unknown kind", "use word, char or byte")
        check_tokenizer(self.tokenizer)
        if self.kind != "word":
            # No tokens: specs that differ only here are the same spec.
            object.__setattr__(self, "tokenizer", TOKENIZER)
        _check_int("shingle.k", self.k, 1, 1024, "use a shingle size between 1 and 1024, e.g. 5")
        _check_int(
            "shingle.max_shingles",
            self.max_shingles,
            1,
            1 << 40,
            "use a positive cap such as 1000000",
        )

    @classmethod
    def parse(
        cls, text: str, *, max_shingles: int = 1_000_000, tokenizer: int = TOKENIZER
    ) -> ShingleSpec:
        if not isinstance(text, str):
            raise InvalidConfig(
                "shingle", text, "must be a string KIND:K", "write e.g. word:5, char:5 or byte:8"
            )
        kind, sep, k = text.partition(":")
        # ASCII digits only: str.isdigit() also accepts "²", which int() refuses.
        if not sep or not re.fullmatch(r"[0-9]{1,9}", k):
            raise InvalidConfig(
                "shingle", text, "expected KIND:K", "write e.g. word:5, char:5 or byte:8"
            )
        if kind not in ("word", "char", "byte"):
            raise InvalidConfig("shingle", text, f"unknown kind {kind!r}", "use word, char or byte")
        return cls(
            kind=kind,  # type: ignore[arg-type]
            k=int(k),
            max_shingles=max_shingles,
            tokenizer=tokenizer,
        )

    def __str__(self) -> str:
        return f"{self.kind}:{self.k}"

    def recorded(self) -> dict[str, Any]:
        """The fields as records hold them: ``tokenizer`` only for word shingles of a
        tokenizer other than :data:`LEGACY_TOKENIZER` (see there)."""
        d: dict[str, Any] = {"kind": self.kind, "k": self.k, "max_shingles": self.max_shingles}
        if self.kind == "word" and self.tokenizer != LEGACY_TOKENIZER:
            d["tokenizer"] = self.tokenizer
        return d


@dataclass(frozen=True, kw_only=True, slots=True)
class Config:
    """Everything that determines signatures, candidates and decisions.

    Parameters (all keyword-only):
        threshold: a pair is a near duplicate when its *exact* Jaccard similarity
            over the shingle-hash sets is >= threshold.  In (0, 1].
        normalizer: name of a built-in normalizer (see ``neardup.text.normalize``).
        shingle: a :class:`ShingleSpec`.
        hash_algorithm: ``xxh64`` (fast, for trusted batch input) or ``siphash24``
            (a keyed PRF, required for untrusted input; needs a :class:`HashKey`).
        seed: selects the hash functions and permutations when no key is used.
        signature: ``minhash`` (k independent permutations) or ``oph``
            (one-permutation MinHash with optimal densification, O(n + k)).
        num_perm: signature length k.
        bands, rows: LSH layout.  Given alone, each must divide ``num_perm``; given
            together, ``bands * rows <= num_perm`` (rows past the bands still sharpen
            the estimate).  When both are None the layout is chosen for recall at
            the threshold (:func:`neardup.default_layout`).
        recall_target: the candidate probability the default layout must reach at
            the threshold itself.
        max_candidates: per document and band, how many preceding bucket members
            are paired with it; pairs cut by this cap are counted, never silent.
        max_bucket_size: an index bucket stops growing at this size (overflow counted).
        verify: ``exact`` (default) or ``estimate`` (signature agreement; results
            are labelled as estimates everywhere).
        max_document_bytes: the largest document compared, in bytes of its
            normalized UTF-8 text (10 MiB).  What happens to a larger one depends
            on the path.  The batch paths never compare it and keep it:
            ``find_duplicates``, ``dedup_records``, ``filter_dataset``,
            ``run_dedup`` and ``neardup dedup`` count and list it
            (``DedupResult.too_large``, ``stats["too_large"]``); ``neardup
            audit`` and ``eval``, built on ``find_duplicates``, never pair it;
            ``neardup signatures`` writes it without a signature (``skipped``);
            ``unique_records`` yields it without indexing it.  The calls on one
            document or one batch raise :class:`~neardup.DocumentTooLarge`:
            ``MinHasher.signature`` (raw ``bytes`` count as given) and
            ``signatures``, ``hash_documents``, ``Deduplicator.add``/``query``;
            the service answers such an item with a ``reject`` decision naming it.

    How a run works (memory limit, worker threads, out-of-core working files) is
    not part of it: that is :class:`RunOptions`.
    """

    threshold: float = 0.8
    normalizer: str = "nfkc-casefold"
    shingle: ShingleSpec = field(default_factory=ShingleSpec)
    hash_algorithm: HashAlgorithm = "xxh64"
    seed: int = 42
    signature: SignatureKind = "minhash"
    num_perm: int = 128
    bands: int | None = None
    rows: int | None = None
    recall_target: float = 0.995
    max_candidates: int = 64
    max_bucket_size: int = 10_000
    verify: VerifyMode = "exact"
    max_document_bytes: int = 10 * 1024 * 1024

    def __post_init__(self) -> None:
        t = self.threshold
        if isinstance(t, bool) or not isinstance(t, int | float) or not (0.0 < float(t) <= 1.0):
            raise InvalidConfig("threshold", t, "must be in (0, 1]", "use e.g. threshold=0.8")
        check_normalizer(self.normalizer)
        if not isinstance(self.shingle, ShingleSpec):
            raise InvalidConfig(
                "shingle",
                self.shingle,
                "must be a ShingleSpec",
                "pass ShingleSpec(kind='word', k=5) or ShingleSpec.parse('word:5')",
            )
        if self.hash_algorithm not in ("xxh64", "siphash24"):
            raise InvalidConfig(
                "hash_algorithm", self.hash_algorithm, "unknown algorithm", "use xxh64 or siphash24"
            )
        _check_int("seed", self.seed, 0, (1 << 64) - 1, "use an integer in [0, 2**64)")
        if self.signature not in ("minhash", "oph"):
            raise InvalidConfig("signature", self.signature, "unknown kind", "use minhash or oph")
        _check_int("num_perm", self.num_perm, 1, _MAX_PERM, "use e.g. num_perm=128")
        if self.verify not in ("exact", "estimate"):
            raise InvalidConfig("verify", self.verify, "unknown mode", "use exact or estimate")
        r = self.recall_target
        if isinstance(r, bool) or not isinstance(r, int | float) or not 0.0 < float(r) < 1.0:
            raise InvalidConfig("recall_target", r, "must be in (0, 1)", "use e.g. 0.995")
        _check_int("max_candidates", self.max_candidates, 1, 1 << 30, "use e.g. 64")
        _check_int("max_bucket_size", self.max_bucket_size, 2, 1 << 40, "use e.g. 10000")
        _check_int(
            "max_document_bytes", self.max_document_bytes, 1, 1 << 40, "use e.g. 10485760 (10 MiB)"
        )
        self._check_layout()

    def _check_layout(self) -> None:
        b, r, k = self.bands, self.rows, self.num_perm
        if b is None and r is None:
            return
        if b is not None:
            _check_int("bands", b, 1, k, f"use a divisor of num_perm={k}")
        if r is not None:
            _check_int("rows", r, 1, k, f"use a divisor of num_perm={k}")
        if b is not None and r is not None:
            # Both given: the layout may leave rows unbanded (they still sharpen the
            # similarity estimate), but it cannot use more rows than there are.
            if b * r > k:
                raise InvalidConfig(
                    "bands",
                    b,
                    f"bands*rows = {b * r} exceeds num_perm={k}",
                    f"use rows={k // b} or num_perm={b * r}",
                )
            return
        if b is not None and k % b != 0:
            lo = (k // b) * b
            raise InvalidConfig(
                "num_perm",
                k,
                f"not divisible by bands={b}",
                f"use num_perm={lo or b} or {lo + b} ({b} bands), or leave bands/rows unset",
            )
        if r is not None and k % r != 0:
            raise InvalidConfig(
                "rows",
                r,
                f"does not divide num_perm={k}",
                f"use num_perm={math.ceil(k / r) * r}, or leave bands/rows unset",
            )

    @property
    def layout(self) -> tuple[int, int]:
        """The (bands, rows) actually used."""
        if self.bands is not None:
            return self.bands, self.rows or self.num_perm // self.bands
        if self.rows is not None:
            return self.num_perm // self.rows, self.rows
        return default_layout(self.threshold, self.num_perm, recall=self.recall_target)

    def estimated_memory_per_document(self, *, avg_bytes: int = 2048) -> int:
        """Planned bytes per document of ``avg_bytes`` (UTF-8) in a batch run.

        Counts the signature (4·k), band keys (8·b), the shingle-hash set (8 bytes
        per distinct shingle: about one per 6 bytes for word shingles, one per byte
        otherwise), three copies of the text (as read, as kept for output, and
        normalized) and per-document bookkeeping.  Batch runs add a fixed
        :data:`SCRATCH_BYTES` for the hashing buffers, which are reused per chunk.
        """
        bands, _ = self.layout
        avg = max(avg_bytes, 1)
        per_shingle = 6 if self.shingle.kind == "word" else 1
        shingles = min(max(avg // per_shingle, 1), self.shingle.max_shingles)
        return 4 * self.num_perm + 8 * bands + 8 * shingles + 3 * avg + 160

    def max_documents_in_memory(
        self, memory_limit: int = DEFAULT_MEMORY_LIMIT, *, avg_bytes: int = 2048
    ) -> int:
        """How many documents of ``avg_bytes`` fit in ``memory_limit`` bytes."""
        room = max(memory_limit - SCRATCH_BYTES, 0)
        return room // self.estimated_memory_per_document(avg_bytes=avg_bytes)

    def to_dict(self) -> dict[str, Any]:
        """Every field, layout resolved, and the format version (every field can
        change a result: :meth:`result_fields` is this).  The shingle spec is
        :meth:`ShingleSpec.recorded`: a config of tokenizer 1 has the fields and the
        fingerprint it had before tokenizers had versions."""
        d = asdict(self)
        d["shingle"] = self.shingle.recorded()
        d["bands"], d["rows"] = self.layout
        d["format_version"] = FORMAT_VERSION
        return d

    def result_fields(self) -> dict[str, Any]:
        """Every field that can change a result, layout resolved (what
        :attr:`fingerprint` is computed from)."""
        return self.to_dict()

    @property
    def fingerprint(self) -> str:
        """Stable 16-hex-digit fingerprint of every field that can change a result
        (layout resolved).  :class:`RunOptions` never enter it: they decide how a run
        works (in memory or out of core, on how many threads), never what it finds."""
        return fingerprint(self.result_fields())

    def differences(self, recorded: dict[str, Any]) -> str:
        """The fields of :meth:`result_fields` that differ from ``recorded`` (another
        config's), as ``--option: recorded vs this`` joined by ``; ``; empty if none."""
        mine = _flat(self.result_fields())
        theirs = _flat(recorded)
        out = []
        order = {name: i for i, name in enumerate(_FIELD_ORDER)}
        for name in sorted(set(mine) | set(theirs), key=lambda n: (order.get(n, len(order)), n)):
            if name == "tokenizer" and not (name in mine and name in theirs):
                continue  # one side has no words: its --shingle line says so
            if mine.get(name) != theirs.get(name):
                label = f"--{name.replace('_', '-')}" if name in _CLI_FIELDS else name
                line = f"{label}: {theirs.get(name)!r} in the index, {mine.get(name)!r} now"
                if name == "tokenizer":
                    # The one change a default brought: say both ways out.
                    line += (
                        f" (pass --tokenizer {theirs[name]} to keep using the index, or "
                        f"rebuild it with --tokenizer {mine[name]})"
                    )
                out.append(line)
        return "; ".join(out)


@dataclass(frozen=True, kw_only=True, slots=True)
class RunOptions:
    """How a batch run works, never what it finds (no fingerprint includes these).

    Parameters (all keyword-only):
        memory_limit: bytes a run may plan to use, checked before anything is
            allocated (:class:`~neardup.MemoryLimitExceeded` otherwise); when an
            in-memory run would need more, JSONL inputs are processed out of core.
        workers: threads of the compiled kernels (None: all usable cores); checked
            against this machine when the run starts.
        spill: work out of core even when the input fits in memory.
        work_dir: folder for the out-of-core working files (None: beside the
            output); removed at the end.
    """

    memory_limit: int = DEFAULT_MEMORY_LIMIT
    workers: int | None = None
    spill: bool = False
    work_dir: str | None = None

    def __post_init__(self) -> None:
        _check_int("memory_limit", self.memory_limit, 1 << 20, 1 << 50, "use e.g. 4 GiB")
        w = self.workers
        if w is not None and (isinstance(w, bool) or not isinstance(w, int)):
            raise InvalidConfig("workers", w, "must be an integer or None", "use e.g. workers=4")
        if not isinstance(self.spill, bool):
            raise InvalidConfig("spill", self.spill, "must be True or False", "use spill=True")
        if self.work_dir is not None and not isinstance(self.work_dir, str):
            raise InvalidConfig("work_dir", self.work_dir, "must be a path", "pass a str or None")


_CLI_FIELDS = frozenset(
    {
        "threshold",
        "normalizer",
        "shingle",
        "tokenizer",
        "max_shingles",
        "seed",
        "signature",
        "num_perm",
        "bands",
        "rows",
        "verify",
        "max_document_bytes",
    }
)


_FIELD_ORDER = (
    *("threshold", "shingle", "tokenizer", "max_shingles", "normalizer", "hash_algorithm"),
    "seed",
    *("signature", "num_perm", "bands", "rows", "recall_target", "max_candidates"),
    *("max_bucket_size", "verify", "max_document_bytes", "format_version"),
)


def _flat(d: dict[str, Any]) -> dict[str, Any]:
    """``shingle`` as the option spells it (``word:5``), its ``max_shingles`` and (word
    shingles only) its ``tokenizer`` apart; a record naming no tokenizer has the
    legacy one."""
    out = dict(d)
    sh = out.pop("shingle", None)
    if isinstance(sh, dict):
        out["shingle"] = f"{sh.get('kind')}:{sh.get('k')}"
        out["max_shingles"] = sh.get("max_shingles")
        if sh.get("kind") == "word":
            out["tokenizer"] = sh.get("tokenizer", LEGACY_TOKENIZER)
    elif sh is not None:
        out["shingle"] = sh
    return out
