"""Shadow indexes: move a tenant to new parameters without a blind switch.

A new scheme (normalizer, shingle spec, ``num_perm``, bands / rows, or a new
``scheme_version`` — hence a new key) is built as a **shadow**: a complete tenant of
its own (log, store, index) in ``tenants/<id>/shadow-<fingerprint>/``, rebuilt from the
live tenant's canonical features when only the layout changes, or from its retained
normalized text when the shingles themselves change (a hashes-only tenant cannot
change its shingles: its text is gone, by its own choice).

While the shadow exists every write to the live tenant is mirrored to it and every
query runs on both; :class:`Migration` counts candidates on each side and the
queries whose candidate sets or decision states differ (``disagreement``), and
:meth:`Migration.status` reports them with the labelled candidate recall of both
indexes.  An operator then

* **promotes** it: ``LIVE.json`` (which directory serves the tenant) is replaced
  atomically, the event is recorded in both decision logs, and the old live index
  becomes the ``previous`` companion — still mirrored, so promoting it back is the
  same switch the other way; or
* **rolls back**: the shadow is dropped (files removed), the live tenant untouched;
* **retires** the previous version once satisfied (files removed).

The live tenant's write lock is held while the shadow is rebuilt, so the copy is
exact; reads go on.

**Switches and requests in flight.**  A service request holds a shared lease on its
tenant's :class:`VersionGate` from the tenant lookup to its answer, and uses the
versions it found then (live and companion) throughout.  A switch (promote,
rollback, retire) takes the gate exclusively: it waits, at most a bounded time, for
the requests in flight to finish (requests arriving meanwhile wait behind it), so
no request straddles a switch — every acknowledged write was applied to the live
version *and* mirrored to the companion before the switch, or is applied after it
to the new live version (and mirrored to the old one).  A dropped version is
closed and its files removed only after the switch, when no request can hold it.
If the requests in flight do not finish in time the switch changes nothing and
raises :class:`~neardup.core._errors.Busy` (503, retry).  A companion that failed to
take a mirrored write (``missed_writes``) is never promoted: it would lose it.

**Policies.**  A shadow changes the live threshold (its configuration's) and layout,
so the service's guard (:class:`~neardup.service.decisions.PolicyGuard`, as for ``PUT
/policy``) is applied when it starts — nothing is built if it refuses — and again
when it is promoted.  The shadow adopts the live policy history at its start and
decides under the policy it will have once promoted: the live policy with the
shadow's threshold, as the next version.  Versions are never reused: policy
changes wait while a shadow exists (``PUT /policy`` answers 409), and promoting a
previous version back records the versions it missed and installs its policy as
the next one.  Rotating a key or seed without a new scheme version is refused
at start-up (fingerprint mismatch), never mixed: a new key *is* a new scheme.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from neardup.core._errors import Busy, Conflict, InvalidConfig, NeardupError, NotFound
from neardup.core.persist import atomic_write
from neardup.service._crypto import MasterSecret
from neardup.service.decisions import Policy, chain_hash
from neardup.service.tenant import Guard, Tenant, TenantConfig

__all__ = [
    "POINTER",
    "Migration",
    "VersionGate",
    "is_tenant_root",
    "load_tenant",
    "read_pointer",
    "remove_version",
]

Role = Literal["shadow", "previous"]
POINTER = "LIVE.json"


def is_tenant_root(path: str) -> bool:
    """Whether ``path`` holds a tenant: its first version (``tenant.json``), or only
    ``LIVE.json`` once that first version was retired after a promotion."""
    return any(os.path.exists(os.path.join(path, f)) for f in ("tenant.json", POINTER))


def read_pointer(root: str) -> dict[str, Any]:
    """``{"live": rel, "other": rel | None, "role": ...}`` of a tenant root (defaults)."""
    path = os.path.join(root, POINTER)
    if not os.path.exists(path):
        return {"live": ".", "other": None, "role": None}
    with open(path, encoding="utf-8") as fh:
        doc: dict[str, Any] = json.load(fh)
    for k in ("live", "other"):
        rel = doc.get(k)
        if rel is not None and (os.path.isabs(rel) or ".." in rel.split(os.sep)):
            raise InvalidConfig(POINTER, rel, "points outside the tenant folder", "fix the file")
    return doc


def _remove_version(root: str, rel: str) -> None:
    """Delete the files of one version of a tenant, never another version's.

    A tenant's first version lives in the root folder itself (``rel == "."``), the
    later ones in ``shadow-*`` sub-folders: retiring the first version after a
    promotion removes the root's own files and keeps ``LIVE.json`` and every
    sub-folder version (removing the folder ``root/.`` would delete them all).
    """
    if os.path.normpath(rel) != ".":
        shutil.rmtree(os.path.join(root, rel), ignore_errors=True)
        return
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if name == POINTER or (name.startswith("shadow-") and os.path.isdir(path)):
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)


def remove_version(root: str, version: Tenant, rel: str) -> None:
    """Close a version detached from its tenant (its background work stopped) and
    remove its files.  Only for a version no request can reach any more."""
    version.close()
    _remove_version(root, rel)


class VersionGate:
    """Leases on one tenant's versions: shared by requests, exclusive for a switch.

    A request holds a shared lease from its tenant lookup to its answer; a switch
    takes the gate exclusively, so it never happens under a request in flight.  A
    waiting switch holds new requests back (it cannot be starved by a steady
    stream) for at most ``timeout`` seconds; then it gives up with
    :class:`~neardup.core._errors.Busy` and the requests go on.
    """

    def __init__(self, tenant: str) -> None:
        self.tenant = tenant
        self._cond = threading.Condition(threading.Lock())
        self._shared = 0
        self._waiting = 0
        self._exclusive = False

    @property
    def in_flight(self) -> int:
        """Shared leases held now (requests in flight)."""
        return self._shared

    def acquire(self, timeout: float) -> None:
        """Take a shared lease (waits while a switch waits or runs, at most ``timeout``)."""
        with self._cond:
            if not self._cond.wait_for(lambda: not self._exclusive and not self._waiting, timeout):
                raise Busy(
                    f"tenant {self.tenant!r} is switching versions (or reopening) and "
                    f"did not finish within {timeout:g} s",
                    "retry after the Retry-After delay (with the same idempotency key)",
                )
            self._shared += 1

    def release(self) -> None:
        with self._cond:
            self._shared -= 1
            if self._shared == 0:
                self._cond.notify_all()

    @contextmanager
    def exclusive(self, timeout: float, what: str) -> Iterator[None]:
        """Hold the gate alone: no request in flight, new ones wait until the end.

        Raises :class:`~neardup.core._errors.Busy` (nothing changed) when the requests in
        flight do not finish within ``timeout`` seconds."""
        self.acquire_all(timeout, what)
        try:
            yield
        finally:
            self.release_all()

    def acquire_all(self, timeout: float, what: str) -> None:
        """:meth:`exclusive` without the context manager (then :meth:`release_all`)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._waiting += 1
            ok = False
            try:
                while self._exclusive or self._shared:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                else:
                    ok = True
            finally:
                self._waiting -= 1
                if not ok:
                    self._cond.notify_all()  # the requests held back go on
            if not ok:
                raise Busy(
                    f"tenant {self.tenant!r}: {what} waited {timeout:g} s for "
                    f"{self._shared} request(s) in flight on its versions; nothing was "
                    "changed",
                    f"retry the {what} after the Retry-After delay",
                )
            self._exclusive = True

    def release_all(self) -> None:
        with self._cond:
            self._exclusive = False
            self._cond.notify_all()


def _write_pointer(root: str, live: str, other: str | None, role: Role | None) -> None:
    doc = {"format": "neardup-live-v1", "live": live, "other": other, "role": role}
    atomic_write(os.path.join(root, POINTER), json.dumps(doc, sort_keys=True).encode())


def load_tenant(root: str, master: MasterSecret, **kw: Any) -> tuple[Tenant, Migration]:
    """Open a tenant root: the live version and, if any, its shadow or previous version."""
    ptr = read_pointer(root)
    live = Tenant.open_dir(os.path.normpath(os.path.join(root, ptr["live"])), master, **kw)
    mig = Migration(root, master, live, kw)
    # Where the live version lives: after a promotion and a retirement it is a
    # shadow-* folder with no companion, and the next switch must point there.
    mig.live_rel = ptr["live"]
    if ptr.get("other"):
        other = Tenant.open_dir(os.path.normpath(os.path.join(root, ptr["other"])), master, **kw)
        mig.attach(other, ptr["role"], ptr["other"], ptr["live"])
    return live, mig


@dataclass
class _Counts:
    queries: int = 0
    candidate_disagreements: int = 0
    decision_disagreements: int = 0
    candidates_live: int = 0
    candidates_other: int = 0
    mirror_errors: int = 0
    #: Writes acknowledged by the live version that the companion failed to take:
    #: promoting it would lose them, so promotion is refused.
    missed_writes: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)


class Migration:
    """The companion of one live tenant: its shadow (before promotion) or its previous
    version (after), mirrored and compared.  See the module docstring."""

    def __init__(
        self, root: str, master: MasterSecret, live: Tenant, tenant_kw: dict[str, Any]
    ) -> None:
        self.root = root
        self.master = master
        self.live = live
        self.other: Tenant | None = None
        self.role: Role | None = None
        self.live_rel = "."
        self.other_rel: str | None = None
        self.counts = _Counts()
        self._kw = tenant_kw
        self._lock = threading.RLock()
        #: The folder of the shadow being built by :meth:`start` (None otherwise).
        self.building: str | None = None

    def attach(self, other: Tenant, role: Role, other_rel: str, live_rel: str) -> None:
        self.other, self.role, self.other_rel, self.live_rel = other, role, other_rel, live_rel

    # -- building ----------------------------------------------------------------
    @property
    def lock(self) -> threading.RLock:
        """Held while a shadow starts or a version is promoted or dropped."""
        return self._lock

    @staticmethod
    def proposed_policy(live: Tenant, config: TenantConfig) -> Policy:
        """The policy a shadow with ``config`` would bring live: the live policy with
        the shadow's threshold and candidate budget, as the next version."""
        doc = live.policy.to_dict()
        doc.update(
            version=live.policy.version + 1,
            threshold=config.scheme.threshold,
            max_candidates=min(live.policy.max_candidates, config.scheme.max_candidates),
        )
        return Policy.from_dict(doc)

    def start(
        self, config: TenantConfig, *, actor: str | None, guard: Guard | None = None
    ) -> dict[str, Any]:
        """Build a shadow with ``config`` from the live tenant's canonical features.

        ``guard`` (the service's) is applied to :meth:`proposed_policy` under the
        shadow's layout first; nothing is built if it refuses.
        """
        live = self.live
        # A shadow's own configured policy is never live: it adopts the live history.
        config = dataclasses.replace(config, policy_version=live.config.policy_version)
        with self._lock:
            if self.other is not None:
                raise Conflict(
                    f"tenant {live.tenant!r} already has a {self.role} version",
                    "promote, roll back or retire it first",
                )
            if config.fingerprint == live.config.fingerprint:
                raise InvalidConfig(
                    "config", config.to_dict(), "equals the live configuration", "change it"
                )
            mine, live_form = config.to_dict(), live.config.to_dict()
            same_shingles = all(
                mine.get(k) == live_form.get(k)
                for k in ("shingle", "tokenizer", "normalizer", "scheme_version")
            )
            if not same_shingles and live.config.retain != "text":
                raise Conflict(
                    "a new shingle spec, tokenizer, normalizer or scheme version needs the "
                    f"items' text, and tenant {live.tenant!r} retains hashed shingles only",
                    "change only num_perm / bands / rows, or re-ingest into a new tenant",
                )
            proposed = self.proposed_policy(live, config)
            warnings = guard(config, proposed) if guard is not None else []
            rel = f"shadow-{config.fingerprint[:12]}"
            self.building = rel
            try:
                n, shadow = self._build(live, config, proposed, rel, same_shingles, actor)
            finally:
                self.building = None
            event = self._record(
                "start", actor, items=n, shadow=config.to_dict(), policy=shadow.policy.to_dict()
            )
        return {**self.status(), "rebuilt_items": n, "event_hash": event, "warnings": warnings}

    def _build(
        self,
        live: Tenant,
        config: TenantConfig,
        proposed: Policy,
        rel: str,
        same_shingles: bool,
        actor: str | None,
    ) -> tuple[int, Tenant]:
        """:meth:`start`'s exact copy of the live items into a new shadow, attached."""
        path = os.path.join(self.root, rel)
        if os.path.exists(path):
            shutil.rmtree(path)  # a half-built shadow of an earlier attempt
        shadow = Tenant.create(path, live.tenant, config, self.master, **self._kw)
        n = 0
        with live._lock:  # writes wait: the copy must be exact
            shadow.adopt_policy(
                live.policy_history(),
                proposed,
                actor=actor,
                source="shadow start",
                placeholder=True,
            )
            for item, feats, text in live.live_items():
                if same_shingles:
                    prep = shadow.prepare_from_features(feats, item.content_hash)
                    if text is not None:
                        prep = type(prep)(prep.features, prep.content_hash, prep.bandkeys, text)
                elif text is not None:
                    prep = shadow.prepare(text, max_token_bytes=1 << 20)
                else:  # pragma: no cover - excluded above
                    continue
                shadow.ingest(
                    item.item_id,
                    prep,
                    text=prep.normalized or None,
                    media_type=item.media_type,
                    source_time=item.source_time,
                    access_policy=item.access_policy,
                )
                n += 1
            # Deleted items stay deleted (GET answers live: false, not 404).
            for item in live.store.tombstoned():
                shadow.ingest_tombstoned(item)
            shadow.flush()
            self.counts = _Counts()
            self.attach(shadow, "shadow", rel, self.live_rel)
            _write_pointer(self.root, self.live_rel, rel, "shadow")
        return n, shadow

    # -- mirroring and comparison ------------------------------------------------
    def mirror_upsert(
        self, kwargs: dict[str, Any], live_response: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Apply the same upsert to the companion; the comparison of both answers."""
        other = self.other
        if other is None or live_response.get("status") == "unchanged":
            return None
        try:
            # The live write is logged and will be acknowledged: its copy is
            # completed however long it takes (a deadline here would only lose it).
            resp = other.upsert(**{**kwargs, "deadline": float("inf")})
        except NeardupError:
            with self._lock:
                self.counts.mirror_errors += 1
                self.counts.missed_writes += 1
            return None
        return self._compare(live_response, resp)

    def mirror_tombstone(self, item_id: str) -> None:
        other = self.other
        if other is None:
            return
        try:
            other.tombstone(item_id, deadline=float("inf"))
        except NotFound:
            pass  # gone there too (a repeated tombstone): nothing is missed
        except NeardupError:
            with self._lock:
                self.counts.mirror_errors += 1
                self.counts.missed_writes += 1

    def compare_query(self, content: str, live_response: dict[str, Any]) -> dict[str, Any] | None:
        """Run the same query on the companion; return the comparison (or None)."""
        other = self.other
        if other is None:
            return None
        try:
            resp = other.candidates(content, limit=max(len(live_response["candidates"]), 10))
        except NeardupError:
            with self._lock:
                self.counts.mirror_errors += 1
            return None
        return self._compare(live_response, resp)

    def _compare(self, live: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
        lo = self.live.policy.review_low

        def ids(r: dict[str, Any]) -> list[str]:
            return sorted(c["item_id"] for c in r.get("candidates", []) if c["score"] >= lo)

        a, b = ids(live), ids(other)
        sa, sb = live["decision"]["state"], other["decision"]["state"]
        with self._lock:
            c = self.counts
            c.queries += 1
            c.candidates_live += int(live.get("candidates_found", 0))
            c.candidates_other += int(other.get("candidates_found", 0))
            differs = a != b
            c.candidate_disagreements += differs
            c.decision_disagreements += sa != sb
            if (differs or sa != sb) and len(c.examples) < 20:
                c.examples.append(
                    {
                        "live": {"candidates": a, "state": sa},
                        self.role or "other": {"candidates": b, "state": sb},
                    }
                )
        return {
            "role": self.role,
            "agree": not differs and sa == sb,
            "candidates_live": a,
            "candidates_other": b,
            "state_live": sa,
            "state_other": sb,
        }

    # -- switching ---------------------------------------------------------------
    def promote(self, *, actor: str | None, guard: Guard | None = None) -> tuple[Tenant, list[str]]:
        """Make the companion live (atomically); the old live becomes ``previous``.

        ``guard`` is applied again to the companion's policy under its layout (the
        service's rules may have changed since the shadow started); a refusal
        changes nothing.  The companion then continues the live policy history (the
        versions it missed) and its policy becomes live as the next version.
        Returns the new live tenant and the guard's warnings.
        """
        with self._lock:
            other = self.other
            if other is None or self.other_rel is None:
                raise Conflict(
                    f"tenant {self.live.tenant!r} has no shadow or previous version",
                    "start a shadow first (PUT .../shadow)",
                )
            if self.counts.missed_writes:
                raise Conflict(
                    f"the {self.role} version of tenant {self.live.tenant!r} failed to take "
                    f"{self.counts.missed_writes} mirrored write(s) the live version "
                    "acknowledged; promoting it would lose them",
                    "roll back (or retire) it and start a new shadow; the server log and "
                    "GET .../shadow (mirror_errors) show the cause",
                )
            with self.live._lock, other._lock:
                desired = other.policy
                warnings = guard(other.config, desired) if guard is not None else []
                other.adopt_policy(
                    self.live.policy_history(),
                    desired,
                    actor=actor,
                    source="promote",
                    placeholder=self.role == "shadow",
                )
                self._record(
                    "promote", actor, to=other.config.to_dict(), policy=other.policy.to_dict()
                )
                old, old_rel = self.live, self.live_rel
                _write_pointer(self.root, self.other_rel, old_rel, "previous")
                self.live, self.live_rel = other, self.other_rel
                self.attach(old, "previous", old_rel, self.live_rel)
                self._record("promoted", actor, previous=old.config.to_dict())
                self.counts = _Counts()
            return self.live, warnings

    def drop(self, *, actor: str | None, expect: Role) -> dict[str, Any]:
        """Roll back a shadow, or retire a previous version: its files are removed.

        Nothing else may use the version meanwhile (the service holds its tenant's
        :class:`VersionGate` exclusively for :meth:`detach`, then removes it)."""
        with self._lock:
            other, rel = self.detach(actor=actor, expect=expect)
            remove_version(self.root, other, rel)
            return self.status()

    def detach(self, *, actor: str | None, expect: Role) -> tuple[Tenant, str]:
        """Forget the shadow (``expect="shadow"``) or previous version: recorded, and
        ``LIVE.json`` no longer names it.  Returns it, still open, and its folder for
        :func:`remove_version`."""
        with self._lock:
            other, rel = self.other, self.other_rel
            if other is None or rel is None or self.role != expect:
                raise Conflict(
                    f"tenant {self.live.tenant!r} has no {expect} version (has {self.role})",
                    "check GET .../shadow",
                )
            self._record("rollback" if expect == "shadow" else "retire", actor, dropped=rel)
            _write_pointer(self.root, self.live_rel, None, None)
            self.other, self.other_rel, self.role = None, None, None
            return other, rel

    def _record(self, action: str, actor: str | None, **fields: Any) -> str:
        ev = self.live._record(
            "shadow",
            None,
            actor,
            action=action,
            role=self.role,
            other=self.other_rel,
            live_dir=self.live_rel,
            **fields,
        )
        return chain_hash(ev)

    # -- reporting ---------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        other = self.other
        pairs = self.live.labelled_pairs()
        out: dict[str, Any] = {
            "tenant_id": self.live.tenant,
            "live": {
                "dir": self.live_rel,
                "config": self.live.config.to_dict(),
                "policy": self.live.policy.to_dict(),
                "scheme_fingerprint": self.live.scheme.fingerprint,
                "items": len(self.live),
                "labelled_recall": self.live.labelled_recall(pairs),
            },
            "role": self.role,
        }
        if other is not None:
            c = self.counts
            out["other"] = {
                "dir": self.other_rel,
                "config": other.config.to_dict(),
                "policy": other.policy.to_dict(),
                "scheme_fingerprint": other.scheme.fingerprint,
                "items": len(other),
                "labelled_recall": other.labelled_recall(pairs),
            }
            out["comparison"] = {
                "queries": c.queries,
                "candidate_disagreements": c.candidate_disagreements,
                "decision_disagreements": c.decision_disagreements,
                "candidates_live": c.candidates_live,
                "candidates_other": c.candidates_other,
                "mirror_errors": c.mirror_errors,
                "missed_writes": c.missed_writes,
                "examples": list(c.examples),
            }
        return out
