"""Which worker serves each tenant: the worker table and the shard of a tenant."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence

from neardup.core._errors import CorruptFile
from neardup.core.persist import atomic_write


def shard_of(tenant: str, workers: int) -> int:
    """The worker (0 .. workers-1) that owns ``tenant``: stable across processes."""
    h = hashlib.sha256(tenant.encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(h[:8], "big") % workers


def default_workers() -> int:
    """The number of CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


class Assignments:
    """Which worker serves each tenant: ``DATA_DIR/workers.json``, written by the front.

    Tenants are spread by count: a new tenant goes to the worker serving the fewest
    (ties: the lowest index), so two tenants on two workers always use both.  An
    assignment never changes while the number of workers stays the same; a tenant
    whose worker no longer exists (fewer workers) is reassigned at start-up.
    Workers read the file and reread it when it changes (one ``stat`` per check).
    """

    FORMAT = "neardup-workers-v1"

    def __init__(self, path: str, workers: int) -> None:
        self.path, self.workers = path, workers
        self.owner: dict[str, int] = {}
        self._sig: tuple[int, int, int] | None = None
        self.refresh()

    def refresh(self) -> None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self.owner, self._sig = {}, None
            return
        sig = (st.st_ino, st.st_mtime_ns, st.st_size)
        if sig == self._sig:
            return
        try:
            with open(self.path, encoding="utf-8") as fh:
                doc = json.load(fh)
        except ValueError as exc:
            raise CorruptFile(self.path, f"not JSON ({exc})") from exc
        if not isinstance(doc, dict) or doc.get("format") != self.FORMAT:
            raise CorruptFile(self.path, f"not a worker table (format must be {self.FORMAT})")
        self.owner = {str(t): int(w) for t, w in doc.get("tenants", {}).items()}
        self._sig = sig

    def save(self) -> None:
        doc = {"format": self.FORMAT, "workers": self.workers, "tenants": self.owner}
        atomic_write(self.path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())
        self.refresh()

    def _least_loaded(self) -> int:
        counts = [0] * self.workers
        for w in self.owner.values():
            if 0 <= w < self.workers:
                counts[w] += 1
        return counts.index(min(counts))

    def assign(self, tenant: str) -> int:
        """The tenant's worker, assigning (and saving) it first if it has none."""
        w = self.owner.get(tenant)
        if w is None or not 0 <= w < self.workers:
            w = self.owner[tenant] = self._least_loaded()
            self.save()
        return w

    def sync(self, tenants: Sequence[str]) -> None:
        """At start-up: drop tenants not on disk, keep valid assignments, assign the
        rest (sorted, each to the least loaded worker)."""
        present = set(tenants)
        keep = {t: w for t, w in self.owner.items() if t in present and w < self.workers}
        changed = keep != self.owner
        self.owner = keep
        for t in sorted(tenants):
            if t not in self.owner:
                self.owner[t] = self._least_loaded()
                changed = True
        if changed or not os.path.exists(self.path):
            self.save()
