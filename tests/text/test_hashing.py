from __future__ import annotations

import re

import numpy as np
import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st

from neardup import (
    Config,
    EmptyDocument,
    HashKey,
    InvalidConfig,
    ShingleSpec,
    hash_documents,
    shingles,
)
from neardup.kernels import _arrays as KA
from neardup.kernels import _hashes as KH
from neardup.text.hashing import SchemeDescriptor, hash_encoded, hash_shingle, shingle_bound
from neardup.text.normalize import EncodedTexts


def _siphash_ref(key: bytes, msg: bytes) -> int:
    """Straight transcription of the SipHash-2-4 paper, independent of the kernel."""
    mask = (1 << 64) - 1

    def rotl(x: int, b: int) -> int:
        return ((x << b) | (x >> (64 - b))) & mask

    k0 = int.from_bytes(key[:8], "little")
    k1 = int.from_bytes(key[8:], "little")
    v = [
        k0 ^ 0x736F6D6570736575,
        k1 ^ 0x646F72616E646F6D,
        k0 ^ 0x6C7967656E657261,
        k1 ^ 0x7465646279746573,
    ]

    def rnd() -> None:
        v[0] = (v[0] + v[1]) & mask
        v[1] = rotl(v[1], 13)
        v[1] ^= v[0]
        v[0] = rotl(v[0], 32)
        v[2] = (v[2] + v[3]) & mask
        v[3] = rotl(v[3], 16)
        v[3] ^= v[2]
        v[0] = (v[0] + v[3]) & mask
        v[3] = rotl(v[3], 21)
        v[3] ^= v[0]
        v[2] = (v[2] + v[1]) & mask
        v[1] = rotl(v[1], 17)
        v[1] ^= v[2]
        v[2] = rotl(v[2], 32)

    blocks = len(msg) // 8
    for i in range(blocks):
        m = int.from_bytes(msg[8 * i : 8 * i + 8], "little")
        v[3] ^= m
        rnd()
        rnd()
        v[0] ^= m
    last = (len(msg) & 0xFF) << 56 | int.from_bytes(msg[8 * blocks :], "little")
    v[3] ^= last
    rnd()
    rnd()
    v[0] ^= last
    v[2] ^= 0xFF
    for _ in range(4):
        rnd()
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def test_siphash_published_vectors() -> None:
    key = bytes(range(16))
    k0, k1 = int.from_bytes(key[:8], "little"), int.from_bytes(key[8:], "little")
    msg = np.frombuffer(bytes(range(15)), dtype=np.uint8)
    # SipHash paper, appendix A, and the reference vectors' first entry.
    assert KH.siphash24(msg, 0, 15, np.uint64(k0), np.uint64(k1)) == 0xA129CA6149BE45E5
    assert KH.siphash24(msg, 0, 0, np.uint64(k0), np.uint64(k1)) == 0x726FDB47DD0E0E31


@given(data=st.binary(max_size=80), key=st.binary(min_size=16, max_size=16))
def test_siphash_kernel_matches_reference(data: bytes, key: bytes) -> None:
    arr = np.frombuffer(data, dtype=np.uint8) if data else np.zeros(1, np.uint8)
    k0, k1 = int.from_bytes(key[:8], "little"), int.from_bytes(key[8:], "little")
    assert int(KH.siphash24(arr, 0, len(data), np.uint64(k0), np.uint64(k1))) == _siphash_ref(
        key, data
    )


@given(data=st.binary(max_size=100), seed=st.integers(0, 2**64 - 1))
def test_xxh64_kernel_matches_xxhash(data: bytes, seed: int) -> None:
    arr = np.frombuffer(data, dtype=np.uint8) if data else np.zeros(1, np.uint8)
    assert int(KH.xxh64(arr, 0, len(data), np.uint64(seed))) == xxhash.xxh64_intdigest(data, seed)


_M = (1 << 64) - 1


def _fmix64(h: int) -> int:
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & _M
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & _M
    return h ^ (h >> 33)


def _ref_hash(shingle: str, kind: str, seed: int = 42) -> int:
    """Independent Python definition of the shingle hash."""
    if kind == "byte":
        return xxhash.xxh64_intdigest(bytes(ord(c) for c in shingle), seed)
    if kind == "char":
        return xxhash.xxh64_intdigest(shingle.encode("utf-8", "surrogatepass"), seed)
    toks = shingle.split(" ")
    acc = 2870177450012600261 ^ len(toks)
    for t in toks:
        th = xxhash.xxh64_intdigest(t.encode("utf-8", "surrogatepass"), seed)
        acc = _fmix64((((acc ^ th) * 11400714785074694791) + 9650029242287828579) & _M)
    return acc


_SPECS = [
    ShingleSpec(kind="word", k=3),
    ShingleSpec(kind="char", k=4),
    ShingleSpec(kind="byte", k=5),
    ShingleSpec(kind="word", k=1),
    ShingleSpec(kind="word", k=3, tokenizer=1),
]


def _spec_id(spec: ShingleSpec) -> str:
    return f"{spec}@{spec.tokenizer}"


@pytest.mark.parametrize("spec", _SPECS, ids=_spec_id)
@given(texts=st.lists(st.text(max_size=40), min_size=1, max_size=5))
def test_batch_hashes_equal_python_reference(spec: ShingleSpec, texts: list[str]) -> None:
    cfg = Config(shingle=spec)
    sets = hash_documents(texts, cfg)
    for i, text in enumerate(texts):
        try:
            ref = shingles(text, spec)
        except EmptyDocument:
            assert sets.raw_counts[i] == 0 and sets.get(i).size == 0
            continue
        expected = sorted({_ref_hash(sh, spec.kind) for sh in ref})
        assert sets.get(i).tolist() == expected
        assert sets.raw_counts[i] == len(ref)


def test_words_of_tokenizer_1_are_unicode_word_runs() -> None:
    text = "Ünïcode wörds, naïve café — 東京 2024_v2!"
    toks = re.findall(r"\w+", get_norm(text))
    assert shingles(text, ShingleSpec(kind="word", k=1, tokenizer=1)) == toks
    assert toks[4] == "東京"


def test_words_of_the_default_tokenizer_split_unspaced_scripts() -> None:
    text = "Ünïcode wörds, naïve café — 東京 2024_v2!"
    assert shingles(text, ShingleSpec(kind="word", k=1)) == [
        *("ünïcode", "wörds", "naïve", "café", "東", "京", "2024_v2"),
    ]


def get_norm(text: str) -> str:
    from neardup import get_normalizer

    return get_normalizer("nfkc-casefold")(text)


def test_short_document_yields_one_shingle_and_empty_is_reported() -> None:
    cfg = Config(shingle=ShingleSpec(kind="word", k=5))
    sets = hash_documents(["two words", "", "   ", "!!!"], cfg)
    assert sets.raw_counts.tolist() == [1, 0, 0, 0]
    assert shingles("two words", cfg.shingle) == ["two words"]
    with pytest.raises(EmptyDocument):
        shingles("!!!", cfg.shingle)


def test_truncation_is_reported() -> None:
    cfg = Config(shingle=ShingleSpec(kind="char", k=2, max_shingles=5))
    sets = hash_documents(["abcdefghij", "abc"], cfg)
    assert sets.truncated.tolist() == [True, False]
    assert sets.raw_counts.tolist() == [5, 2]


def test_keyed_scheme_needs_a_key_and_differs_per_tenant() -> None:
    cfg = Config(hash_algorithm="siphash24")
    with pytest.raises(InvalidConfig, match="needs a HashKey"):
        hash_documents(["x y z"], cfg)
    with pytest.raises(InvalidConfig, match="not a keyed PRF"):
        hash_documents(["x y z"], Config(), key=HashKey.derive(b"m" * 32, "t"))
    master = b"0123456789abcdef0123456789abcdef"
    ka, kb = HashKey.derive(master, "tenant-a"), HashKey.derive(master, "tenant-b")
    assert ka == HashKey.derive(master, "tenant-a")
    assert ka.key != kb.key and ka.fingerprint != kb.fingerprint
    assert HashKey.derive(master, "tenant-a", scheme_version=2).key != ka.key
    assert "key=" not in repr(ka) and ka.key.hex() not in repr(ka)
    ha = hash_documents(["red fox runs very fast"], cfg, key=ka).get(0)
    hb = hash_documents(["red fox runs very fast"], cfg, key=kb).get(0)
    assert set(ha.tolist()).isdisjoint(hb.tolist())
    # The single-shingle API agrees with the batch kernel.
    assert hash_shingle("red fox runs very fast", cfg, key=ka) == int(ha[0])
    with pytest.raises(InvalidConfig):
        HashKey.derive(b"short", "t")


def test_sets_take_and_jaccard() -> None:
    sets = hash_documents(["a b c d e f g", "a b c d e f h", "z"], Config(shingle=ShingleSpec(k=2)))
    assert sets.jaccard(0, 1) == pytest.approx(5 / 7)
    sub = sets.take([2, 0])
    assert len(sub) == 2 and sub.get(1).tolist() == sets.get(0).tolist()


@pytest.mark.parametrize("spec", _SPECS, ids=_spec_id)
def test_single_shingle_api_matches_batch(spec: ShingleSpec) -> None:
    cfg = Config(shingle=spec)
    text = "Über naïve café — 東京 2024 red fox runs"
    expected = (
        sorted({hash_shingle(s, cfg) for s in shingles(text, spec)})
        if spec.kind != "byte"
        else sorted({hash_shingle(bytes(ord(c) for c in s), cfg) for s in shingles(text, spec)})
    )
    assert hash_documents([text], cfg).get(0).tolist() == expected


def test_word_ngrams_are_order_sensitive() -> None:
    cfg = Config(shingle=ShingleSpec(kind="word", k=2))
    assert hash_shingle("red fox", cfg) != hash_shingle("fox red", cfg)
    assert hash_shingle("red fox", cfg) != hash_shingle("redfox", cfg)


@given(values=st.lists(st.integers(0, 2**64 - 1), max_size=300))
def test_sort_hashes_sorts_any_input(values: list[int]) -> None:
    src = np.array(values, dtype=np.uint64)
    dst = np.empty_like(src)
    KA.sort_hashes(src, dst)
    assert dst.tolist() == sorted(values)


def test_sort_hashes_survives_crafted_skew() -> None:
    # All values share their top bits (what crafted collisions would do): the
    # bounded insertion pass gives up and falls back to a full sort.
    src = (np.arange(5000, dtype=np.uint64)[::-1] * np.uint64(7)) & np.uint64(0xFFFFFF)
    dst = np.empty_like(src)
    KA.sort_hashes(src, dst)
    assert np.array_equal(dst, np.sort(src))


@given(
    before=st.lists(st.integers(0, 2**64 - 1), max_size=20),
    values=st.lists(st.integers(0, 2**64 - 1) | st.sampled_from([5, 2**63]), max_size=300),
    after=st.lists(st.integers(0, 2**64 - 1), max_size=20),
)
def test_sort_hashes_at_sorts_a_range_and_leaves_the_rest(
    before: list[int], values: list[int], after: list[int]
) -> None:
    src = np.array(before + values + after, dtype=np.uint64)
    dst = np.full(len(values) + 3, 11, dtype=np.uint64)
    counts = KA.bucket_counts(len(values))
    counts[:] = -1
    KA.sort_hashes_at(src, len(before), len(values), dst, counts)
    assert dst[: len(values)].tolist() == sorted(values)
    assert dst[len(values) :].tolist() == [11, 11, 11]  # nothing past the range written
    assert src.tolist() == before + values + after


def test_sort_hashes_at_falls_back_on_skew_within_the_range() -> None:
    skewed = (np.arange(3000, dtype=np.uint64)[::-1] * np.uint64(3)) & np.uint64(0xFFFFF)
    src = np.concatenate([np.array([2**64 - 1], np.uint64), skewed])
    dst = np.empty(skewed.shape[0], dtype=np.uint64)
    counts = KA.bucket_counts(skewed.shape[0])
    KA.sort_hashes_at(src, 1, skewed.shape[0], dst, counts)
    assert np.array_equal(dst, np.sort(skewed))


@given(values=st.lists(st.integers(0, 2**64 - 1) | st.sampled_from([0, 7, 2**63]), max_size=300))
def test_argsort_keys_is_a_stable_argsort(values: list[int]) -> None:
    keys = np.array(values, dtype=np.uint64)
    assert KA.argsort_keys(keys).tolist() == np.argsort(keys, kind="stable").tolist()


def test_argsort_keys_survives_crafted_skew() -> None:
    keys = (np.arange(4000, dtype=np.uint64)[::-1] * np.uint64(3)) & np.uint64(0xFFFF)
    assert KA.argsort_keys(keys).tolist() == np.argsort(keys, kind="stable").tolist()


@pytest.mark.parametrize(
    "sizes", [[], [0], [5, 0, 7], [600_000, 1, 700_000, 0, 300_000], [2_000_000]]
)
def test_parallel_concat_equals_numpy(sizes: list[int]) -> None:
    from neardup.text.hashing import _concat_parallel

    rng = np.random.default_rng(len(sizes))
    parts = [rng.integers(0, 2**63, n, dtype=np.uint64) for n in sizes]
    got = _concat_parallel(parts)
    want = np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)
    assert got.dtype == np.uint64 and np.array_equal(got, want)


def test_hash_sink_places_batches_in_order_whoever_registers_first() -> None:
    import threading

    from neardup.text.hashing import HashSink

    sink = HashSink(100)
    got: dict[int, np.ndarray | None] = {}

    def put(batch: int, size: int) -> None:
        got[batch] = sink.place(batch, size)

    late = threading.Thread(target=put, args=(1, 7))
    late.start()  # waits for batch 0
    late.join(0.05)
    assert late.is_alive() and 1 not in got
    put(0, 5)
    late.join(5)
    assert not late.is_alive()
    put(2, 0)
    a0, a1, a2 = got[0], got[1], got[2]
    assert a0 is not None and a1 is not None and a2 is not None
    a0[:] = 1
    a1[:] = 2
    assert len(a2) == 0 and sink.filled == 12 and sink.contiguous
    sink.release(1)  # already placed: no effect
    assert sink.contiguous


def test_hash_sink_overflow_and_release_end_contiguity() -> None:
    from neardup.text.hashing import HashSink

    sink = HashSink(10)
    assert sink.place(0, 6) is not None
    assert sink.place(1, 6) is None  # does not fit
    assert sink.place(2, 1) is None  # nor anything after it
    assert not sink.contiguous

    sink = HashSink(10)
    sink.release(0)  # e.g. the batch failed before it had a size
    assert sink.place(1, 1) is None and not sink.contiguous
    with pytest.raises(ValueError, match="twice"):
        sink.place(1, 1)


# The characters that pack the most word tokens into the fewest bytes: one-byte
# words and separators, characters that are tokens by themselves (three bytes),
# marks that join the token before them or nothing, two-byte word characters.
_DENSE = st.text(alphabet="a1_ .東タก\u0301я", max_size=60)


@pytest.mark.parametrize("spec", [ShingleSpec(kind="word", k=1), ShingleSpec(kind="word", k=2),
                                  ShingleSpec(kind="word", k=1, tokenizer=1)], ids=_spec_id)
@given(texts=st.lists(_DENSE, min_size=1, max_size=12))
def test_word_shingles_fit_the_room_the_kernel_is_given(
    spec: ShingleSpec, texts: list[str]
) -> None:
    # The kernel writes each document's hashes into shingle_bound() slots without
    # checking: a document with more would overwrite its neighbour's, which the
    # comparison with the reference of each document alone would show.
    sets = hash_documents(texts, Config(shingle=spec))
    room = shingle_bound(sets.byte_lengths, spec.kind)
    assert (sets.raw_counts <= np.maximum(room, 1)).all()
    for i, text in enumerate(texts):
        try:
            ref = shingles(text, spec)
        except EmptyDocument:
            assert sets.raw_counts[i] == 0
            continue
        assert sets.get(i).tolist() == sorted({_ref_hash(sh, spec.kind) for sh in ref})


def test_the_word_bound_is_reached() -> None:
    one_word = Config(shingle=ShingleSpec(kind="word", k=1))
    sets = hash_documents(["a b c", "a東a東", "東東東"], one_word)
    assert sets.raw_counts.tolist() == [3, 4, 3]
    assert shingle_bound(sets.byte_lengths, "word").tolist() == [3, 5, 5]


def test_raw_bytes_cut_inside_a_character_hash_alike_in_any_batch() -> None:
    # Raw bytes are hashed as given (MinHasher.signature(bytes)).  b"a\xe6" is a
    # word character and the lead byte of a three-byte character cut short; the
    # kernel's buffer still holds, past it, the rest of "東" from the document
    # before it in its block (two documents per block at 1,024).  A cut sequence
    # is no word character: one token, the same as the document hashed alone.
    one_word = Config(shingle=ShingleSpec(kind="word", k=1))
    docs = [b"xx\x9d\xb1", b"a\xe6"] * 512
    scheme = SchemeDescriptor.from_config(one_word)
    sets = hash_encoded(EncodedTexts.from_bytes(docs), one_word, None, scheme)
    assert (sets.raw_counts <= shingle_bound(sets.byte_lengths, "word")).all()
    for first in (0, 1):
        alone = hash_encoded(EncodedTexts.from_bytes([docs[first]]), one_word, None, scheme)
        assert all(sets.get(i).tolist() == alone.get(0).tolist() for i in range(first, 1024, 2))
    assert sets.raw_counts[1::2].tolist() == [1] * 512
    assert sets.get(1).tolist() == hash_encoded(
        EncodedTexts.from_bytes([b"a"]), one_word, None, scheme
    ).get(0).tolist()
