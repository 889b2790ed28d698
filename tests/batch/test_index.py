"""neardup.batch.index: the index a run saves and a later run deduplicates against."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import (
    Config,
    CorruptFile,
    DedupIndex,
    HashKey,
    InvalidConfig,
    NeardupIOError,
    SchemeMismatch,
    ShingleSpec,
    find_duplicates,
)
from neardup.core.persist import read_container, write_container

CFG = Config(threshold=0.6, shingle=ShingleSpec(kind="word", k=1))
_ARRAYS = ("data", "indptr", "raw_counts", "truncated", "content_hash", "byte_lengths")

_DOC = st.lists(
    st.sampled_from(
        ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
    ),
    min_size=0,
    max_size=7,
).map(" ".join)


def _same_index(a: DedupIndex, b: DedupIndex) -> None:
    for name in _ARRAYS:
        assert np.array_equal(getattr(a.sets, name), getattr(b.sets, name)), name
    assert a.sets.scheme == b.sets.scheme
    assert a.ids == b.ids and a.edges == b.edges and len(a) == len(b)
    assert (a.config_fingerprint, a.config) == (b.config_fingerprint, b.config)


def _members(r: Any) -> list[tuple[int, ...]]:
    return [c.members for c in r.clusters]


@settings(max_examples=10, deadline=None)  # four small runs per example
@given(
    texts=st.lists(_DOC, min_size=1, max_size=14),
    cut=st.integers(0, 14),
    verify=st.sampled_from(["exact", "estimate"]),
)
def test_a_saved_and_loaded_index_answers_the_same(
    tmp_path_factory: pytest.TempPathFactory, texts: list[str], cut: int, verify: str
) -> None:
    # Near and exact copies among few words, empty documents, estimate-only edges
    # (no exact score): the loaded index is the saved one, and a run against it
    # equals a run against the index in memory and one run over the union.
    cfg = Config(threshold=0.6, shingle=ShingleSpec(kind="word", k=1), verify=verify)
    cut = min(cut, len(texts))
    first, rest = texts[:cut], texts[cut:]
    ids: list[Any] = [f"p{i}" if i % 2 else i for i in range(cut)]
    index = find_duplicates(first, config=cfg).to_index(ids)
    path = str(tmp_path_factory.mktemp("idx") / "index.ndx")
    index.save(path)
    loaded = DedupIndex.load(path)
    _same_index(loaded, index)
    against = find_duplicates(rest, config=cfg, prior=loaded)
    in_memory = find_duplicates(rest, config=cfg, prior=index)
    union = find_duplicates(texts, config=cfg)
    assert [c.to_dict() for c in against.clusters] == [c.to_dict() for c in in_memory.clusters]
    assert against.duplicate_of.tolist() == in_memory.duplicate_of.tolist()
    assert _members(against) == _members(union)
    assert against.duplicate_of.tolist() == union.duplicate_of.tolist()
    # And the index of the second run, saved again, holds both runs.
    both = against.to_index([*ids, *range(cut, len(texts))])
    both.save(path)
    _same_index(DedupIndex.load(path), both)


def test_edges_keep_every_field_through_a_save(tmp_path: Path) -> None:
    texts = ["a b c d e f g h", "a b c d e f g h", "a b c d e f g i", "x y z"]
    r = find_duplicates(texts, config=CFG, edges="all")
    methods = {e.method for e in r.edges}
    assert methods == {"identical", "exact"}
    est = find_duplicates(
        texts,
        config=Config(threshold=0.6, verify="estimate", shingle=ShingleSpec(kind="word", k=1)),
    )
    assert {e.method for e in est.edges} == {"identical", "estimate"}
    for result in (r, est):
        index = result.to_index(["a", "b", "c", "d"])
        index.save(str(tmp_path / "i.ndx"))
        loaded = DedupIndex.load(str(tmp_path / "i.ndx"))
        assert loaded.edges == result.edges
        assert [e.to_dict() for e in loaded.edges] == [e.to_dict() for e in result.edges]


def test_an_empty_index(tmp_path: Path) -> None:
    index = find_duplicates([], config=CFG).to_index([])
    assert len(index) == 0 and index.edges == []
    index.save(str(tmp_path / "i.ndx"))
    loaded = DedupIndex.load(str(tmp_path / "i.ndx"))
    _same_index(loaded, index)
    r = find_duplicates(["a b", "a b"], config=CFG, prior=loaded)
    assert r.duplicate_of.tolist() == [-1, 0] and r.n_prior == 0


# ---------------------------------------------------------------------------
# What load refuses


def _saved(tmp_path: Path) -> tuple[str, dict[str, Any], dict[str, Any]]:
    texts = ["a b c d", "a b c d", "a b c e", "x y z"]
    path = str(tmp_path / "good.ndx")
    find_duplicates(texts, config=CFG).to_index(["a", "b", "c", "d"]).save(path)
    meta, arrays = read_container(path, "dedup-index")
    return path, meta, {k: np.array(v) for k, v in arrays.items()}


def _edit(meta: dict[str, Any], arrays: dict[str, Any], what: str) -> None:
    if what == "short raw_counts":
        arrays["raw_counts"] = arrays["raw_counts"][:-1]
    elif what == "indptr going back":
        arrays["indptr"][1], arrays["indptr"][2] = arrays["indptr"][2], arrays["indptr"][1]
    elif what == "extra id":
        meta["ids"].append("e")
    elif what == "edge past the end":
        arrays["edge_b"][0] = 4
    elif what == "negative edge":
        arrays["edge_a"][0] = -1
    elif what == "unknown method":
        meta["edge_method"][0] = "guessed"
    elif what == "missing estimate":
        meta["edge_estimate"].pop()
    elif what == "other fingerprint":
        meta["config_fingerprint"] = "0123456789abcdef"
    elif what == "other scheme":
        meta["scheme"]["num_perm"] = 64
    elif what == "no ids":
        del meta["ids"]
    elif what == "bad scheme":
        meta["scheme"]["colour"] = "red"


@pytest.mark.parametrize(
    ("what", "reason"),
    [
        ("short raw_counts", "array lengths disagree with the id list"),
        ("indptr going back", "array lengths disagree with the id list"),
        ("extra id", "array lengths disagree with the id list"),
        ("edge past the end", "its edges do not fit its documents"),
        ("negative edge", "its edges do not fit its documents"),
        ("unknown method", "its edges do not fit its documents"),
        ("missing estimate", "its edges do not fit its documents"),
        ("other fingerprint", "its recorded options do not match its config fingerprint"),
        ("other scheme", "its scheme disagrees with its recorded options"),
        ("no ids", "its content is not a consistent index (KeyError: 'ids')"),
        ("bad scheme", "its content is not a consistent index (InvalidConfig: "),
    ],
)
def test_an_inconsistent_index_is_a_corrupt_file(tmp_path: Path, what: str, reason: str) -> None:
    # Edited with a valid checksum (a checksum is no signature): load checks the
    # structure and the recorded options hold together.
    _, meta, arrays = _saved(tmp_path)
    _edit(meta, arrays, what)
    path = str(tmp_path / "edited.ndx")
    write_container(path, "dedup-index", meta, arrays)
    with pytest.raises(CorruptFile) as err:
        DedupIndex.load(path)
    assert str(err.value).startswith(f"{path}: {reason}")
    assert "; fix: " in str(err.value)


def test_other_files_are_not_an_index(tmp_path: Path) -> None:
    good, meta, arrays = _saved(tmp_path)
    other = str(tmp_path / "other.ndx")
    write_container(other, "lsh-index", meta, arrays)
    with pytest.raises(CorruptFile, match=r"holds 'lsh-index', expected 'dedup-index'"):
        DedupIndex.load(other)
    raw = Path(good).read_bytes()
    flipped = tmp_path / "flipped.ndx"
    flipped.write_bytes(raw[:50] + bytes([raw[50] ^ 1]) + raw[51:])
    with pytest.raises(CorruptFile, match="checksum mismatch"):
        DedupIndex.load(str(flipped))
    with pytest.raises(NeardupIOError, match=r"missing\.ndx"):
        DedupIndex.load(str(tmp_path / "missing.ndx"))


def test_an_index_without_recorded_options_still_loads(tmp_path: Path) -> None:
    # Older indexes have the fingerprint only.
    _, meta, arrays = _saved(tmp_path)
    del meta["config"]
    path = str(tmp_path / "old.ndx")
    write_container(path, "dedup-index", meta, arrays)
    old = DedupIndex.load(path)
    assert old.config is None and len(old) == 4
    r = find_duplicates(["a b c d"], config=CFG, prior=old)
    assert r.duplicate_of.tolist()[-1] == 0
    with pytest.raises(InvalidConfig) as err:
        find_duplicates(
            ["a b c d"],
            config=Config(threshold=0.6, shingle=CFG.shingle, max_candidates=32),
            prior=old,
        )
    assert "the index was built with config " in str(err.value)
    assert "fix: rerun with the same parameters as the indexed run" in str(err.value)


# ---------------------------------------------------------------------------
# What a run against an index checks


def test_a_run_with_other_options_is_told_which_differ() -> None:
    index = find_duplicates(["a b c"], config=CFG).to_index(["x"])
    with pytest.raises(InvalidConfig) as err:
        find_duplicates(["a b c"], config=Config(threshold=0.7, shingle=CFG.shingle), prior=index)
    assert "the index was built with other options (--threshold: 0.6 in the index, 0.7 now" in (
        str(err.value)
    )
    assert "rerun with the index's options, or rebuild the index with these" in str(err.value)


def test_a_keyed_index_needs_the_same_key() -> None:
    cfg = Config(hash_algorithm="siphash24", shingle=ShingleSpec(kind="word", k=1))
    key = HashKey.derive(b"k" * 32, "tenant-a")
    index = find_duplicates(["a b c"], config=cfg, key=key).to_index(["x"])
    assert find_duplicates(["a b c"], config=cfg, key=key, prior=index).duplicate_of.tolist() == [
        -1,
        0,
    ]
    with pytest.raises(SchemeMismatch, match="a saved index and this run"):
        find_duplicates(
            ["a b c"], config=cfg, key=HashKey.derive(b"k" * 32, "tenant-b"), prior=index
        )


def test_an_index_of_tokenizer_1_is_refused_by_the_new_default_with_both_ways_out(
    tmp_path: Path,
) -> None:
    # What a release before tokenizer versions saved: options without a tokenizer.
    legacy = Config(threshold=0.6, shingle=ShingleSpec(kind="word", k=1, tokenizer=1))
    path = str(tmp_path / "old.ndx")
    find_duplicates(["a b c d", "x y z"], config=legacy).to_index(["a", "b"]).save(path)
    meta, arrays = read_container(path, "dedup-index")
    assert "tokenizer" not in meta["config"]["shingle"] and "tokenizer" not in meta["scheme"]
    new = Config(threshold=0.6, shingle=ShingleSpec(kind="word", k=1))
    with pytest.raises(InvalidConfig) as err:
        find_duplicates(["a b c d"], config=new, prior=DedupIndex.load(path))
    assert (
        "the index was built with other options (--tokenizer: 1 in the index, 2 now (pass "
        "--tokenizer 1 to keep using the index, or rebuild it with --tokenizer 2))"
    ) in str(err.value)
    r = find_duplicates(["a b c d"], config=legacy, prior=DedupIndex.load(path))
    assert r.duplicate_of.tolist()[-1] == 0
    # Older still: no recorded options, only the scheme.
    del meta["config"]
    write_container(path, "dedup-index", meta, {k: np.array(v) for k, v in arrays.items()})
    with pytest.raises(InvalidConfig) as err:
        find_duplicates(["a b c d"], config=new, prior=DedupIndex.load(path))
    assert "(--tokenizer: 1 in the index, 2 now)" in str(err.value)
    assert "fix: pass --tokenizer 1 to keep using the index, or rebuild it with --tokenizer 2" in (
        str(err.value)
    )
    r = find_duplicates(["a b c d"], config=legacy, prior=DedupIndex.load(path))
    assert r.duplicate_of.tolist()[-1] == 0
