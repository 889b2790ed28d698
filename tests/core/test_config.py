from __future__ import annotations

import dataclasses

import pytest

from neardup import Config, InvalidConfig, RunOptions, ShingleSpec


def test_31_rows_in_8_bands_is_rejected_with_value_and_fix() -> None:
    with pytest.raises(InvalidConfig) as info:
        Config(num_perm=31, bands=8)
    msg = str(info.value)
    assert "31" in msg and "fix:" in msg and "bands=8" in msg
    assert info.value.field == "num_perm" and info.value.value == 31


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"threshold": 0.0}, "threshold"),
        ({"threshold": 1.5}, "threshold"),
        ({"threshold": True}, "threshold"),
        ({"num_perm": 0}, "num_perm"),
        ({"bands": 7}, "num_perm"),
        ({"bands": 16, "rows": 9}, "bands"),
        ({"rows": 7}, "rows"),
        ({"max_candidates": 0}, "max_candidates"),
        ({"max_bucket_size": 1}, "max_bucket_size"),
        ({"seed": -1}, "seed"),
        ({"normalizer": "nope"}, "normalizer"),
        ({"hash_algorithm": "md5"}, "hash_algorithm"),
        ({"signature": "simhash"}, "signature"),
        ({"verify": "maybe"}, "verify"),
        ({"recall_target": 1.0}, "recall_target"),
    ],
)
def test_invalid_values_are_rejected(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        Config(**kwargs)  # type: ignore[arg-type]
    assert info.value.field == field
    assert "fix:" in str(info.value)


def test_shingle_spec_validation_and_parse() -> None:
    assert ShingleSpec.parse("char:7") == ShingleSpec(kind="char", k=7)
    for bad in ("word", "word:x", "sentence:3"):
        with pytest.raises(InvalidConfig):
            ShingleSpec.parse(bad)
    with pytest.raises(InvalidConfig):
        ShingleSpec(k=0)
    with pytest.raises(InvalidConfig):
        ShingleSpec(kind="line")  # type: ignore[arg-type]


def test_configs_are_frozen_and_keyword_only() -> None:
    cfg = Config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.threshold = 0.5  # type: ignore[misc]
    with pytest.raises(TypeError):
        Config(0.8)  # type: ignore[misc]


def test_fingerprint_is_stable_and_sensitive() -> None:
    assert Config().fingerprint == Config().fingerprint
    # Layout is resolved before fingerprinting: explicit defaults equal implicit ones.
    b, r = Config().layout
    assert Config(bands=b, rows=r).layout == (b, r)
    seen = {Config().fingerprint}
    for variant in (
        Config(seed=1),
        Config(threshold=0.7),
        Config(num_perm=64),
        Config(shingle=ShingleSpec(kind="char", k=5)),
        Config(signature="oph"),
        Config(normalizer="raw"),
        Config(shingle=ShingleSpec(tokenizer=1)),
    ):
        assert variant.fingerprint not in seen
        seen.add(variant.fingerprint)
    # How a run works is not what it finds: RunOptions are not a Config field.
    assert "memory_limit" not in Config().to_dict()
    # Pinned so that an accidental change of the canonical form is noticed.
    assert len(Config().fingerprint) == 16
    assert Config().fingerprint == "81b68449265e4fff"


def test_fingerprints_of_older_releases_are_kept() -> None:
    # The fingerprints the release before tokenizer versions gave these configs
    # (Config() was the first): tokenizer 1 is what it did, and char and byte
    # shingles have no tokenizer.
    assert Config(shingle=ShingleSpec(tokenizer=1)).fingerprint == "b62de3e2cae7b7b8"
    assert Config(shingle=ShingleSpec(kind="char", k=5)).fingerprint == "98c672ffdc4ee0d4"
    assert Config(shingle=ShingleSpec(kind="byte", k=8)).fingerprint == "19fd00a75fb86184"
    assert "tokenizer" not in Config(shingle=ShingleSpec(tokenizer=1)).to_dict()["shingle"]
    assert Config().to_dict()["shingle"]["tokenizer"] == 2
    assert "tokenizer" not in Config(shingle=ShingleSpec(kind="char", k=5)).to_dict()["shingle"]


def test_differences_read_a_record_without_tokenizer_as_tokenizer_1() -> None:
    old = Config(shingle=ShingleSpec(tokenizer=1))
    recorded = old.result_fields()  # what an index saved by an older release holds
    assert "tokenizer" not in recorded["shingle"]
    assert old.differences(recorded) == ""
    differ = Config().differences(recorded)
    assert differ.startswith("--tokenizer: 1 in the index, 2 now")
    assert "pass --tokenizer 1 to keep using the index, or rebuild it with --tokenizer 2" in differ
    assert Config().differences(Config().result_fields()) == ""
    char = Config(shingle=ShingleSpec(kind="char", k=5))
    assert char.differences(char.result_fields()) == ""


def test_layout_divisible_when_given() -> None:
    assert Config(num_perm=128, bands=32).layout == (32, 4)
    assert Config(num_perm=128, rows=8).layout == (16, 8)
    assert Config(threshold=0.8).layout == (21, 6)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"memory_limit": 10}, "memory_limit"),
        ({"memory_limit": True}, "memory_limit"),
        ({"workers": "2"}, "workers"),
        ({"spill": 1}, "spill"),
        ({"work_dir": 3}, "work_dir"),
    ],
)
def test_run_options_are_validated(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        RunOptions(**kwargs)  # type: ignore[arg-type]
    assert info.value.field == field
    with pytest.raises(TypeError):
        RunOptions(1 << 30)  # type: ignore[misc]
    assert RunOptions().memory_limit == 4 << 30 and RunOptions().workers is None


def test_max_document_bytes_does_what_the_config_docstring_says() -> None:
    """Each path named in Config's docstring treats a too-large document as said."""
    from neardup import (
        DocumentTooLarge,
        MinHasher,
        dedup_records,
        find_duplicates,
        hash_documents,
        unique_records,
    )
    from neardup.batch.online import Deduplicator
    from neardup.batch.sigexport import signature_table

    cfg = Config(max_document_bytes=40, threshold=0.5)
    small, big = "a b c d e f g h i", "word " * 20
    res = find_duplicates([small, big, small, big], config=cfg)
    assert res.too_large.tolist() == [1, 3]
    assert res.stats["too_large"] == 2
    assert 1 in res.kept and 3 in res.kept  # kept, never compared to each other
    kept, _ = dedup_records([{"text": big}, {"text": big}], config=cfg)
    assert kept == [0, 1]
    recs = [{"text": big}, {"text": big}, {"text": small}, {"text": small}]
    assert list(unique_records(recs, config=cfg)) == recs[:3]
    assert signature_table([big], [0], cfg).column("skipped").to_pylist() == ["too_large"]
    mh = MinHasher(cfg)
    for call in (
        lambda: mh.signature(big),
        lambda: mh.signature(big.encode()),
        lambda: mh.signatures([small, big]),
        lambda: hash_documents([big], cfg),
        lambda: Deduplicator(cfg).add("x", big),
        lambda: Deduplicator(cfg).query(big),
    ):
        with pytest.raises(DocumentTooLarge, match="over the limit of 40"):
            call()
    assert len(mh.signature(small.encode())) == cfg.num_perm  # under the limit: signed
