"""Stage 4 — signatures: k-permutation MinHash, one-permutation MinHash, b-bit.

**MinHash** (``signature="minhash"``): row ``p`` of a document's signature is
``min over shingle hashes x of ((a_p·x + b_p) mod 2**64) >> 32`` with ``a_p`` odd —
the multiply-add-shift family, computed in exact 64-bit wrap-around arithmetic
(no modulus taken after an overflow, which is what biases ``(a·x + b) % p`` done in
64-bit integers).  ``a_p, b_p`` come from SplitMix64 over the seed (or a seed
derived from the tenant key): a pure function of (scheme, seed or key), never a
shared RNG.  Cost O(n·k) per document.

**One-permutation MinHash** (``signature="oph"``): each shingle is hashed once and
falls in one of k bins; empty bins are filled by optimal densification
(Shrivastava 2017).  Cost O(n + k); agreement of two signatures is an unbiased
estimate of Jaccard like MinHash's.

For both, the fraction of agreeing rows estimates the Jaccard similarity J with
standard error about ``sqrt(J(1-J)/k)``.

**b-bit MinHash** keeps the lowest b bits of each row; agreement is debiased with
``(E - 2**-b) / (1 - 2**-b)`` (Li & König 2010, large-universe approximation).

Example:
    >>> from neardup import Config, MinHasher
    >>> mh = MinHasher(Config())
    >>> a = mh.signature("the quick brown fox jumps over the lazy dog")
    >>> b = mh.signature("the quick brown fox jumps over the lazy dog today")
    >>> exact = 5 / 6                      # 5 shared word 5-grams of 6
    >>> abs(a.similarity(b) - exact) <= 3 * a.standard_error(b)
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from neardup.core._errors import DocumentTooLarge, EmptyDocument, InvalidConfig, SchemeMismatch
from neardup.core.arrays import distinct
from neardup.core.checks import check_int, check_text, check_type, hash_array
from neardup.core.config import Config
from neardup.core.hexsig import signature_bytes
from neardup.kernels import _signatures as KS
from neardup.text.hashing import (
    HashKey,
    SchemeDescriptor,
    ShingleSets,
    hash_documents,
    hash_encoded,
)
from neardup.text.normalize import EncodedTexts

__all__ = ["BBitSignatures", "MinHasher", "Signature", "SignatureSet", "permutation_params"]

_SIG_FIX = "pass a Signature, e.g. MinHasher(config).signature(text)"

_M64 = (1 << 64) - 1


def _splitmix64(state: int) -> tuple[int, int]:
    state = (state + 0x9E3779B97F4A7C15) & _M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return state, z ^ (z >> 31)


def permutation_params(
    seed: int, num_perm: int
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    """The (a, b) multipliers and offsets of ``num_perm`` permutations for ``seed``.

    Pure function: the same (seed, num_perm) gives the same arrays in every process.
    """
    state = seed & _M64
    a = np.empty(num_perm, dtype=np.uint64)
    b = np.empty(num_perm, dtype=np.uint64)
    for p in range(num_perm):
        state, va = _splitmix64(state)
        state, vb = _splitmix64(state)
        a[p] = va | 1
        b[p] = vb
    return a, b


def _perm_seed(config: Config, key: HashKey | None) -> int:
    return key.derived_seed(b"permutations") if key is not None else config.seed


@dataclass(frozen=True, eq=False, slots=True)
class Signature:
    """One document's MinHash signature (``uint32`` rows) and its scheme."""

    values: npt.NDArray[np.uint32]
    scheme: SchemeDescriptor

    def __len__(self) -> int:
        return int(self.values.shape[0])

    def similarity(self, other: Signature) -> float:
        """Estimated Jaccard similarity: the fraction of agreeing rows.

        Raises SchemeMismatch when the two signatures were computed differently.
        """
        check_type("other", other, Signature, _SIG_FIX)
        self.scheme.require_same(other.scheme)
        return float(np.count_nonzero(self.values == other.values)) / len(self)

    def standard_error(self, other: Signature) -> float:
        """Standard error of :meth:`similarity` (sqrt(J(1-J)/k) at the estimate)."""
        j = self.similarity(other)
        return math.sqrt(max(j * (1.0 - j), 0.0) / len(self))

    def band(self, i: int) -> npt.NDArray[np.uint32]:
        """The rows of LSH band ``i``."""
        b, r = self.scheme.bands, self.scheme.rows
        i = check_int("band", i, 0, b - 1, f"use 0 <= band < {b}")
        return self.values[i * r : (i + 1) * r]

    def band_hash(self, i: int, *, seed: int = 0) -> int:
        """The 64-bit bucket key of band ``i`` (as the index computes it)."""
        self.band(i)
        seed = check_int("seed", seed, 0, (1 << 64) - 1, "use e.g. seed=0")
        out = np.empty((1, self.scheme.bands), dtype=np.uint64)
        KS.band_keys(
            self.values[None, :], 0, self.scheme.bands, self.scheme.rows, np.uint64(seed), out
        )
        return int(out[0, i])

    def to_bytes(self) -> bytes:
        """The rows as little-endian ``uint32``, 4 bytes each (what :meth:`from_bytes` reads)."""
        return self.values.astype("<u4").tobytes()

    def hex(self) -> str:
        """:meth:`to_bytes` as lowercase hex, 8 digits a row (what :meth:`from_hex` reads).

        >>> from neardup import Config, MinHasher
        >>> s = MinHasher(Config(num_perm=4, bands=2)).signature("a b c d e f")
        >>> Signature.from_hex(s.hex(), s.scheme).similarity(s)
        1.0
        """
        return self.to_bytes().hex()

    @classmethod
    def from_bytes(cls, data: bytes, scheme: SchemeDescriptor) -> Signature:
        """The signature of ``scheme`` whose :meth:`to_bytes` is ``data``.

        Raises InvalidConfig when ``data`` does not hold ``scheme.num_perm`` rows.
        """
        raw = signature_bytes("signature", data, item_bytes=4)
        return cls._of(raw, scheme)  # checks the scheme

    @classmethod
    def from_hex(cls, text: str, scheme: SchemeDescriptor) -> Signature:
        """The signature of ``scheme`` whose :meth:`hex` is ``text``.

        Raises InvalidConfig on text that is not hex, or not ``scheme.num_perm`` rows.
        """
        raw = signature_bytes("signature", text, item_bytes=4)
        return cls._of(raw, scheme)

    @classmethod
    def _of(cls, raw: bytes, scheme: SchemeDescriptor) -> Signature:
        check_type("scheme", scheme, SchemeDescriptor, "pass the scheme it was computed under")
        rows = len(raw) // 4
        if rows != scheme.num_perm:
            raise InvalidConfig(
                "signature",
                f"{rows} rows",
                f"the scheme has num_perm={scheme.num_perm} rows",
                "pass a signature computed under this scheme",
            )
        return cls(np.frombuffer(raw, dtype="<u4").astype(np.uint32), scheme)


@dataclass(frozen=True, eq=False, slots=True)
class SignatureSet:
    """Signatures of a batch: an (n, k) ``uint32`` matrix and one scheme."""

    matrix: npt.NDArray[np.uint32]
    scheme: SchemeDescriptor

    def __len__(self) -> int:
        return int(self.matrix.shape[0])

    def __getitem__(self, i: int) -> Signature:
        return Signature(self.matrix[i], self.scheme)

    def similarity(self, i: int, j: int) -> float:
        """:meth:`Signature.similarity` of documents ``i`` and ``j``."""
        return self[i].similarity(self[j])

    def band_keys(
        self,
        *,
        seed: int = 0,
        lo: int = 0,
        hi: int | None = None,
        order: Literal["C", "F"] = "C",
    ) -> npt.NDArray[np.uint64]:
        """(n, hi - lo) array of 64-bit bucket keys of bands [lo, hi) (default: all).

        ``order="F"`` lays each band's keys out contiguously (same values), which
        is what sorting the bands for a join reads.
        """
        top = self.scheme.bands if hi is None else hi
        if not 0 <= lo <= top <= self.scheme.bands:
            raise InvalidConfig(
                "bands",
                (lo, hi),
                f"outside 0..{self.scheme.bands}",
                f"use 0 <= lo <= hi <= {self.scheme.bands}",
            )
        if order not in ("C", "F"):
            raise InvalidConfig("order", order, "unknown memory order", "use 'C' or 'F'")
        out = np.empty((len(self), top - lo), dtype=np.uint64, order=order)
        KS.band_keys(self.matrix, lo, top, self.scheme.rows, np.uint64(seed), out)
        return out

    def concat(self, other: SignatureSet) -> SignatureSet:
        check_type("other", other, SignatureSet, "pass a SignatureSet of the same scheme")
        self.scheme.require_same(other.scheme, "signature sets")
        return SignatureSet(np.concatenate([self.matrix, other.matrix]), self.scheme)

    def to_bbit(self, b: int) -> BBitSignatures:
        return BBitSignatures.from_signatures(self, b)


@dataclass(frozen=True, eq=False, slots=True)
class BBitSignatures:
    """b-bit MinHash: the lowest ``b`` bits of each row, packed 8/b per byte."""

    packed: npt.NDArray[np.uint8]
    b: int
    num_perm: int
    scheme: SchemeDescriptor

    @classmethod
    def from_signatures(cls, sigs: SignatureSet, b: int) -> BBitSignatures:
        if b not in (1, 2, 4, 8):
            raise InvalidConfig(
                "b", b, "b-bit MinHash supports b in {1, 2, 4, 8}", "use b=1, 2, 4 or 8"
            )
        low = (sigs.matrix & np.uint32((1 << b) - 1)).astype(np.uint8)
        per = 8 // b
        k = sigs.matrix.shape[1]
        pad = (-k) % per
        if pad:
            low = np.pad(low, ((0, 0), (0, pad)))
        groups = low.reshape(low.shape[0], -1, per)
        shifts = (np.arange(per, dtype=np.uint8) * b).astype(np.uint8)
        packed = np.bitwise_or.reduce(groups << shifts, axis=2).astype(np.uint8)
        return cls(packed, b, k, sigs.scheme)

    def unpack(self) -> npt.NDArray[np.uint8]:
        per = 8 // self.b
        shifts = (np.arange(per, dtype=np.uint8) * self.b).astype(np.uint8)
        vals = (self.packed[:, :, None] >> shifts) & np.uint8((1 << self.b) - 1)
        return vals.reshape(self.packed.shape[0], -1)[:, : self.num_perm]

    def estimate(self, i: int, j: int) -> tuple[float, float]:
        """Debiased Jaccard estimate of rows i and j and its standard error."""
        vals = self.unpack()
        e = float(np.count_nonzero(vals[i] == vals[j])) / self.num_perm
        c = 2.0**-self.b
        est = min(max((e - c) / (1.0 - c), 0.0), 1.0)
        se = math.sqrt(max(e * (1.0 - e), 0.0) / self.num_perm) / (1.0 - c)
        return est, se


class MinHasher:
    """Computes signatures under one :class:`~neardup.Config` (and key, if keyed).

    Guarantees: the same config, key and input give byte-identical signatures in
    every process; the estimate of two signatures is unbiased for the Jaccard
    similarity of their shingle-hash sets.
    """

    def __init__(self, config: Config, *, key: HashKey | None = None) -> None:
        self.config = config
        self.key = key
        self.scheme = SchemeDescriptor.from_config(config, key)
        seed = _perm_seed(config, key)
        self._a, self._b = permutation_params(seed, config.num_perm)
        self._oph_seed = np.uint64(seed)

    def from_sets(self, sets: ShingleSets) -> SignatureSet:
        """Signatures of already hashed shingle sets (the batch path)."""
        check_type("sets", sets, ShingleSets, "pass hash_documents(texts, config)")
        sets.scheme.require_same_sets(self.scheme)
        out = np.empty((len(sets), self.config.num_perm), dtype=np.uint32)
        if len(sets):
            if self.config.signature == "minhash":
                KS.minhash_kperm(sets.data, sets.indptr, self._a, self._b, out)
            else:
                KS.minhash_oph(sets.data, sets.indptr, self.config.num_perm, self._oph_seed, out)
        return SignatureSet(out, self.scheme)

    def signatures(self, texts: Sequence[str]) -> SignatureSet:
        """Signatures of a batch of texts (normalized, shingled and hashed here)."""
        return self.from_sets(hash_documents(texts, self.config, key=self.key))

    def signature(self, doc: str | bytes) -> Signature:
        """Signature of one document given as text (normalized) or raw bytes (as is).

        Raises EmptyDocument when the document has no shingle, DocumentTooLarge
        when it is over ``max_document_bytes`` (text: normalized UTF-8; bytes: as given).
        """
        if isinstance(doc, bytes):
            if len(doc) > self.config.max_document_bytes:
                raise DocumentTooLarge(None, len(doc), self.config.max_document_bytes)
            sets = hash_encoded(EncodedTexts.from_bytes([doc]), self.config, self.key, self.scheme)
        else:
            sets = hash_documents([check_text("doc", doc)], self.config, key=self.key)
        if sets.raw_counts[0] == 0:
            raise EmptyDocument(None)
        return self.from_sets(sets)[0]

    def from_hashes(self, hashes: npt.ArrayLike) -> Signature:
        """Signature of a set of pre-hashed 64-bit shingles."""
        arr = distinct(hash_array("hashes", hashes))
        if arr.size == 0:
            raise EmptyDocument(None, "no shingle hash given")
        indptr = np.array([0, arr.size], dtype=np.int64)
        out = np.empty((1, self.config.num_perm), dtype=np.uint32)
        if self.config.signature == "minhash":
            KS.minhash_kperm(arr, indptr, self._a, self._b, out)
        else:
            KS.minhash_oph(arr, indptr, self.config.num_perm, self._oph_seed, out)
        return Signature(out[0], self.scheme)

    def require_compatible(self, sig: Signature) -> None:
        check_type("sig", sig, Signature, _SIG_FIX)
        if sig.scheme != self.scheme:
            raise SchemeMismatch(sig.scheme.fingerprint, self.scheme.fingerprint)
