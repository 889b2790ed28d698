"""neardup.batch.feeder: texts normalized and hashed at once, or on worker threads."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import neardup.batch.feeder as F
from neardup import Config, ShingleSpec
from neardup.batch.feeder import Hashed, HashFeeder, normalize_and_hash
from neardup.testing import stdlib_paragraphs
from neardup.text.hashing import SchemeDescriptor, hash_documents
from scanned_blocks import scanned_block

_FIELDS = ("data", "indptr", "raw_counts", "truncated", "content_hash", "byte_lengths")


def _same(got: Hashed, ref: Hashed) -> None:
    for name in _FIELDS:
        assert np.array_equal(getattr(got.sets, name), getattr(ref.sets, name)), name
    assert np.array_equal(got.too_large, ref.too_large)


@pytest.mark.parametrize(
    "capacity",
    [0, 10**7, 2000],  # no sink; a sink every chunk fits in; one that overflows midway
)
def test_hash_feeder_equals_batch_hashing(capacity: int) -> None:
    cfg = Config()
    scheme = SchemeDescriptor.from_config(cfg)
    texts = [*stdlib_paragraphs(limit=300), "", "Ｆｏｘ  RUNS", "x" * 5000]
    ref = normalize_and_hash(texts, cfg, None, scheme, None)
    feeder = HashFeeder(cfg, None, scheme, chunk_bytes=4000, capacity=capacity)
    try:
        for lo in range(0, len(texts), 37):  # uneven batches, several chunks each
            feeder.feed(texts[lo : lo + 37])
        got = feeder.finish()
    finally:
        feeder.close()
    for name in ("data", "indptr", "raw_counts", "truncated", "content_hash", "byte_lengths"):
        assert np.array_equal(getattr(got.sets, name), getattr(ref.sets, name)), name
    assert np.array_equal(got.too_large, ref.too_large)
    sink = feeder._sink
    if capacity == 10**7:
        # Every chunk's hashes were compacted in place: the result is the sink.
        assert sink is not None and sink.contiguous
        assert np.shares_memory(got.sets.data, sink.array)
    elif capacity == 2000:
        assert sink is not None and not sink.contiguous
    empty = HashFeeder(cfg, None, scheme, capacity=capacity)
    assert len(empty.finish().sets) == 0


def test_hash_feeder_reraises_worker_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    real = F.hash_kernel
    calls: list[int] = []

    def flaky(raw, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(len(raw))
        if len(calls) == 2:
            raise RuntimeError("boom")
        return real(raw, *args, **kwargs)

    monkeypatch.setattr(F, "hash_kernel", flaky)
    cfg = Config()
    # With a sink: the failed and the drained chunks still give up their places, so
    # no worker waits forever for them.
    feeder = F.HashFeeder(
        cfg, None, SchemeDescriptor.from_config(cfg), chunk_bytes=1, capacity=10**6
    )
    workers = len(feeder._threads)
    feeder.feed(["some text here"] * 40)  # more chunks than the queue holds
    with pytest.raises(RuntimeError, match="boom"):
        feeder.finish()
    feeder.close()
    # The chunks after the error were drained, not hashed (other workers may have
    # taken one each before they saw it).
    assert 2 <= len(calls) <= 1 + workers


# ---------------------------------------------------------------------------
# normalize_and_hash

_TEXTS = st.lists(
    st.text(max_size=40) | st.text(st.sampled_from("ab cD\u00e9\u00c9\uff26 \t\n."), max_size=40),
    max_size=8,
)


@settings(max_examples=25, deadline=None)  # a kernel call per chunk: ~10 ms each
@given(texts=_TEXTS, chunk=st.integers(1, 120))
def test_chunks_do_not_change_the_hashes(texts: list[str], chunk: int) -> None:
    # Documents are hashed independently: where the chunks begin does not matter,
    # and the result is hash_documents' for the same texts.
    cfg = Config(shingle=ShingleSpec(kind="word", k=2))
    scheme = SchemeDescriptor.from_config(cfg)
    whole = normalize_and_hash(texts, cfg, None, scheme, None, chunk_bytes=1 << 30)
    _same(normalize_and_hash(texts, cfg, None, scheme, None, chunk_bytes=chunk), whole)
    ref = hash_documents(texts, cfg)
    for name in _FIELDS:
        assert np.array_equal(getattr(whole.sets, name), getattr(ref, name)), name
    assert not whole.too_large.any() and len(whole.sets) == len(texts)


def test_progress_and_documents_too_large() -> None:
    cfg = Config(max_document_bytes=20, shingle=ShingleSpec(kind="char", k=3))
    scheme = SchemeDescriptor.from_config(cfg)
    texts = ["short one", "x" * 21, "another short", "\u00e9" * 11, "ok"]
    seen: list[tuple[str, int, int]] = []
    got = normalize_and_hash(texts, cfg, None, scheme, lambda *a: seen.append(a), chunk_bytes=10)
    assert got.too_large.tolist() == [False, True, False, True, False]  # UTF-8 bytes count
    assert got.sets.sizes()[[1, 3]].tolist() == [0, 0]  # an empty set, not an error
    assert [s for s, _, _ in seen] == ["shingle_hash"] * len(seen) and len(seen) > 1
    done = [d for _, d, _ in seen]
    assert done == sorted(done) and done[-1] == len(texts)
    assert {t for _, _, t in seen} == {len(texts)}
    assert got.normalize_s >= 0 and got.hash_s >= 0


def test_no_texts_give_empty_sets() -> None:
    cfg = Config()
    got = normalize_and_hash([], cfg, None, SchemeDescriptor.from_config(cfg), None)
    assert len(got.sets) == 0 and got.too_large.shape == (0,)
    assert got.sets.indptr.tolist() == [0]


# ---------------------------------------------------------------------------
# HashFeeder


def _block(texts: list[str]) -> tuple[np.ndarray, np.ndarray, dict[int, str]]:
    """What the JSONL scanner hands on: ASCII texts as bytes, the others as str."""
    return scanned_block(texts, {j: t for j, t in enumerate(texts) if not t.isascii()})


@settings(max_examples=25, deadline=None)
@given(
    batches=st.lists(
        st.tuples(
            st.booleans(),
            st.lists(
                st.text(st.sampled_from("ab Cd.\u00e9\uff26\t"), max_size=12)
                | st.text(st.characters(max_codepoint=0x7F), max_size=12),
                max_size=5,
            ),
        ),
        max_size=6,
    ),
    chunk=st.sampled_from([1, 30, 1 << 20]),
    normalizer=st.sampled_from(["nfkc-casefold", "nfkc", "raw"]),
)
def test_scanned_blocks_and_strings_hash_as_one_batch(
    batches: list[tuple[bool, list[str]]], chunk: int, normalizer: str
) -> None:
    # feed() and feed_block() may alternate; the texts keep their input order
    # and hash as normalize_and_hash hashes them all.
    cfg = Config(normalizer=normalizer, shingle=ShingleSpec(kind="char", k=3))
    scheme = SchemeDescriptor.from_config(cfg)
    texts = [t for _, batch in batches for t in batch]
    ref = normalize_and_hash(texts, cfg, None, scheme, None)
    feeder = HashFeeder(cfg, None, scheme, chunk_bytes=chunk)
    try:
        for as_block, batch in batches:
            if as_block:
                feeder.feed_block(*_block(batch))
            else:
                feeder.feed(batch)
        got = feeder.finish()
    finally:
        feeder.close()
    _same(got, ref)


def test_feeder_close_and_timings() -> None:
    cfg = Config()
    scheme = SchemeDescriptor.from_config(cfg)
    feeder = HashFeeder(cfg, None, scheme)
    assert feeder.hash_s == 0.0  # nothing hashed yet
    feeder.feed([])
    feeder.feed_block(np.zeros(0, dtype=np.uint8), np.zeros(1, dtype=np.int64), {})
    feeder.feed(["a few words to hash here"])
    feeder.close()  # before finish: stops the workers, drops what was pending
    feeder.close()  # idempotent
    assert feeder._threads == []
    done = HashFeeder(cfg, None, scheme, chunk_bytes=1)
    done.feed(["one two three four five six"] * 3)
    got = done.finish()
    done.close()  # after finish it does nothing
    assert len(got.sets) == 3 and got.hash_s == done.hash_s >= 0.0
    assert got.normalize_s == done.normalize_s >= 0.0 and done.wait_s >= 0.0
