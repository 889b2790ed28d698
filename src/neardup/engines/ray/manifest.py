"""The record of a Ray run's finished stages (``manifest.json`` in the work folder),
which ``resume=True`` reads to skip what a crashed run already did."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Sequence
from typing import Any

from neardup.core._errors import CorruptFile, InvalidConfig
from neardup.core._fingerprint import fingerprint

__all__ = ["MANIFEST", "Manifest", "file_digest"]

MANIFEST = "manifest.json"
_MANIFEST_KIND = "neardup-ray-manifest"
_MANIFEST_VERSION = 2


def file_digest(path: str) -> str:
    """BLAKE2b-256 of a file's bytes, hex."""
    h = hashlib.blake2b(digest_size=32)
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Manifest:
    """Finished stages of a run, with their files' checksums, in ``manifest.json``.

    The manifest is JSON with a BLAKE2b checksum of its own content and is written
    atomically (temporary file, fsync, rename, fsync of the folder).  A stage
    counts as done only if recorded *and* its files still match; the first stage
    that is not done invalidates every later one.
    """

    def __init__(self, work: str, run: dict[str, Any], resume: bool) -> None:
        self.work = work
        self.path = os.path.join(work, MANIFEST)
        self.run = run
        self.run_fp = fingerprint(run)
        self.stages: dict[str, dict[str, Any]] = {}
        self.broken = False
        self.reused: list[str] = []
        if resume and os.path.exists(self.path):
            self._load()
        else:
            if os.path.isdir(work) and os.listdir(work):
                if not os.path.exists(self.path):
                    raise InvalidConfig(
                        "work-dir",
                        work,
                        "exists, is not empty and is not a neardup ray work folder",
                        "choose a new or empty folder for --work-dir",
                    )
                shutil.rmtree(work)  # an earlier run's working files: start over
            os.makedirs(work, exist_ok=True)
            self.save()

    def _load(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as fh:
                doc = json.load(fh)
        except (OSError, ValueError) as exc:
            raise CorruptFile(self.path, f"unreadable manifest ({exc})") from exc
        body = {k: v for k, v in doc.items() if k != "checksum"}
        if doc.get("kind") != _MANIFEST_KIND or doc.get("version") != _MANIFEST_VERSION:
            raise CorruptFile(self.path, "not a neardup ray manifest of this version")
        if doc.get("checksum") != _checksum(body):
            raise CorruptFile(self.path, "checksum mismatch (damaged or edited)")
        if body["run_fingerprint"] != self.run_fp:
            raise InvalidConfig(
                "resume",
                self.work,
                f"the work folder belongs to another run (fingerprint {body['run_fingerprint']},"
                f" this run {self.run_fp}: inputs or options differ)",
                "rerun with the same inputs and options, or drop --resume to start over",
            )
        self.stages = body["stages"]

    def save(self) -> None:
        from neardup.core.persist import atomic_write

        body = {
            "kind": _MANIFEST_KIND,
            "version": _MANIFEST_VERSION,
            "run_fingerprint": self.run_fp,
            "run": self.run,
            "stages": self.stages,
        }
        doc = dict(body, checksum=_checksum(body))
        atomic_write(self.path, json.dumps(doc, indent=1, sort_keys=True).encode())

    def done(self, name: str, *, chain: bool = True) -> dict[str, Any] | None:
        """The recorded info of stage ``name`` if it can be reused, else None.

        With ``chain`` (stages in order) a stage that is not reusable invalidates
        every later one; per-shard feature stages are independent of each other
        (``chain=False``) and the caller calls :meth:`invalidate` if any is redone.
        """
        if self.broken:
            return None
        rec = self.stages.get(name)
        ok = rec is not None and all(
            os.path.isfile(os.path.join(self.work, f["path"]))
            and file_digest(os.path.join(self.work, f["path"])) == f["blake2b"]
            for f in rec["files"]
        )
        if not ok or rec is None:
            if chain:
                self.invalidate()
            return None
        self.reused.append(name)
        info: dict[str, Any] = rec["info"]
        return info

    def invalidate(self) -> None:
        """Forget every stage not reused so far (they will be redone)."""
        self.broken = True
        self.stages = {k: v for k, v in self.stages.items() if k in self.reused}

    def record(self, name: str, files: Sequence[str], info: dict[str, Any], seconds: float) -> None:
        self.stages[name] = {
            "files": [
                {"path": os.path.relpath(f, self.work), "blake2b": file_digest(f)}
                for f in sorted(files)
            ],
            "info": info,
            "seconds": round(seconds, 6),
            "finished_at": time.time(),
        }
        self.save()


def _checksum(body: dict[str, Any]) -> str:
    return hashlib.blake2b(json.dumps(body, sort_keys=True).encode(), digest_size=16).hexdigest()
