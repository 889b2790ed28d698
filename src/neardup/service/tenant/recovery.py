"""Opening a tenant: recovering its store, rebuilding its index, applying logged commands."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
from typing import Any

import numpy as np

from neardup.core._errors import (
    CommandFailed,
    CorruptFile,
    NeardupError,
    NeardupIOError,
    TenantUnavailable,
)
from neardup.core._fingerprint import canonical_json
from neardup.core.persist import atomic_write
from neardup.service.cmdlog import Command
from neardup.service.decisions import GENESIS, Policy, chain_hash
from neardup.service.logupgrade import open_current
from neardup.service.online import BandIndex
from neardup.service.store import FeatureStore, store_error
from neardup.service.tenant._state import TenantState
from neardup.sketch.screen import BloomFilter

_log = logging.getLogger("neardup.service.manager")


class RecoveryMixin(TenantState):
    def _current_gen(self) -> int:
        path = self._path("CURRENT")
        if not os.path.exists(path):
            return 0
        try:
            with open(path, encoding="utf-8") as fh:
                return int(json.load(fh)["generation"])
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptFile(path, f"unreadable generation pointer ({exc})") from exc

    def _open_store(self, path: str) -> FeatureStore:
        """The feature store at ``path``, opened with this tenant's sealers (one of an
        earlier format is upgraded: see :mod:`neardup.service.storeformat`)."""
        store = FeatureStore(path, self._sealer, self.tenant, legacy=self._legacy_sealer)
        if store.upgraded_rows:
            _log.info(
                "tenant %s: store %s upgraded to format %s (%d rows)",
                self.tenant,
                path,
                store.meta("format"),
                store.upgraded_rows,
            )
        return store

    def _open(self) -> None:
        """Open the current generation.  Every read of the store during start-up is
        inside the recovery path: one that fails after the store passed its checks
        at open (``FeatureStore`` verifies it) has the store rebuilt the same way."""
        try:
            self._open_generation(None)
        except sqlite3.Error as exc:
            store_path = self._path(f"features-{self.generation}.sqlite")
            damage = store_error(store_path, exc, "a read at start-up failed")
            trimmed = self.trimmed_bytes
            self.log.close()
            self.store.close()
            if not isinstance(damage, CorruptFile):
                raise damage from exc
            try:
                self._open_generation(damage)
            except sqlite3.Error as again:
                raise store_error(
                    store_path, again, "the rebuilt store fails a read at start-up"
                ) from again
            self.trimmed_bytes = trimmed

    def _open_generation(self, damage: CorruptFile | None) -> None:
        gen = self._current_gen()
        self.generation = gen
        store_path = self._path(f"features-{gen}.sqlite")
        # The log first: damage in its middle stops start-up whatever the store says.
        # One of an earlier format is rewritten in the current one (service.logupgrade).
        self.log = open_current(
            self._path(f"log-{gen}.ndlog"),
            self._log_sealer,
            aad=self._aad,
            legacy=self._legacy_log_sealer,
        )
        if self.log.upgraded_from is not None:
            _log.info(
                "tenant %s: command log upgraded from format %d (%d records sealed again)",
                self.tenant,
                self.log.upgraded_from,
                self.log.upgraded_records,
            )
        self.trimmed_bytes = self.log.trimmed_bytes
        if damage is None:
            try:
                # Opening verifies the store (integrity check, meta rows): any
                # damage SQLite can see is a CorruptFile here, never a raw error.
                self.store = self._open_store(store_path)
                if self.store.applied_seq < self.log.base_seq:
                    self.store.close()
                    raise CorruptFile(
                        store_path,
                        f"store is at sequence {self.store.applied_seq} but the log starts "
                        f"after {self.log.base_seq}",
                    )
            except CorruptFile as exc:
                damage = exc
        if damage is not None:
            self.store = self._recover_store(store_path, damage)
        st = os.stat(store_path)
        self._store_identity = (st.st_dev, st.st_ino)
        self.failed_commands = self.store.failed_count()
        pols = self.store.policies()
        self.policy = Policy.from_dict(pols[-1]) if pols else self._initial_policy()
        last = self.store.last_event()
        self._last_hash = chain_hash(last) if last is not None else GENESIS
        applied = self.store.applied_seq
        n = 0
        for cmd in self.log.commands(after=applied):
            self._apply_logged(cmd, index=False)
            n += 1
        self.replayed = n
        self.log.release()
        self.seq = max(self.store.applied_seq, self.log.last_seq)
        self._next_pos = self.store.next_pos()
        self._build_index()
        self._repair_links()

    def _recover_store(self, store_path: str, damage: CorruptFile) -> FeatureStore:
        """Rebuild a damaged store from the newest usable snapshot + the log after it."""
        base, last = self.log.base_seq, self.log.last_seq
        snap_dir = self._path("snapshots")
        names = sorted(os.listdir(snap_dir)) if os.path.isdir(snap_dir) else []
        refused: list[str] = []
        chosen: tuple[int, bytes, str] | None = None
        for name in reversed(names):
            if not name.endswith(".ndsnap"):
                continue
            path = os.path.join(snap_dir, name)
            try:
                with open(path, "rb") as fh:
                    manifest, db = self._verify_snapshot(fh.read())
            except (NeardupError, OSError) as exc:
                refused.append(f"{name}: {exc}")
                continue
            seq = int(manifest["last_seq"])
            # Usable only if the log continues it with nothing missing in between.
            if base <= seq <= last:
                chosen = (seq, db, name)
                break
            refused.append(f"{name}: sequence {seq} outside the log's range ({base}, {last}]")
        if chosen is None and base == 0:
            chosen = (0, b"", "(none: the log holds every command since the tenant began)")
        if chosen is None:
            raise CorruptFile(
                store_path,
                f"{damage.reason}; no snapshot can "
                f"replace it (the log starts after sequence {base}; "
                f"{'; '.join(refused) or 'no snapshots'}): restore a snapshot of this tenant "
                "through the operator API or from a backup",
            )
        seq, db, name = chosen
        aside = f"{store_path}.damaged-{int(time.time())}"
        n = 1
        while os.path.exists(aside):  # never overwrite an earlier damaged copy
            n += 1
            aside = f"{store_path}.damaged-{int(time.time())}-{n}"
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(store_path + suffix):
                os.replace(store_path + suffix, aside + suffix)
        if db:
            atomic_write(store_path, db)
        try:
            store = self._open_store(store_path)
        except CorruptFile as exc:
            raise CorruptFile(
                store_path, f"the store rebuilt from {name} fails its check: {exc.reason}"
            ) from exc
        if store.applied_seq != seq:
            store.close()
            raise CorruptFile(
                store_path,
                f"the store rebuilt from {name} is at sequence {store.applied_seq}, "
                f"its manifest says {seq}",
            )
        self.recovered = {
            "damage": damage.reason,
            "damaged_store_moved_to": aside,
            "snapshot": name,
            "snapshot_seq": seq,
        }
        return store

    def _build_index(self) -> None:
        idx = BandIndex(
            bands=self.bands,
            max_bucket_size=self.config.scheme.max_bucket_size,
            delta_capacity=self.compact_delta,
        )
        pos, keys = self.store.live_bandkeys(self.bands)
        idx.load(pos, keys)
        self.index = idx
        self._live = int(pos.shape[0])
        self._build_screen()

    def _build_screen(self) -> None:
        # "Definitely not stored" for most new content without a SQL lookup; the
        # store confirms every possible hit, so false positives cost one query.
        hashes = self.store.live_content_hashes()
        self._screen_cap = max(2 * int(hashes.shape[0]), 65_536)
        screen = BloomFilter(capacity=self._screen_cap, fp_rate=0.01)
        if hashes.size:
            screen.add(hashes)
        self._screen_n = int(hashes.shape[0])
        self._screen = screen

    def _screen_add(self, h: int) -> None:
        self._screen.add(np.array([h], dtype=np.uint64))
        self._screen_n += 1
        if self._screen_n > self._screen_cap:
            self._build_screen()

    def _repair_links(self) -> dict[str, Any] | None:
        """Bring links written before the link rules existed in line with them (at open).

        Logs of earlier versions tombstoned or replaced canonical items without
        handing their clusters over, so their replay can leave duplicates linked to
        a tombstoned item, to themselves, or to another duplicate.  Replay applies
        such a log exactly as recorded; then, if any link breaks the rules, one
        ``relink`` event (``cause: "repair"``) is appended that applies the same rule
        as a tombstone: each cluster keeps its live root, or else is handed to its
        oldest live member.  The repair is itself in the log, so every later replay,
        snapshot and restore reproduces it; a log with no broken link is left as is.
        """
        # The check reads every link once per store file (a rebuilt or restored
        # store is checked again); commands of this version keep the rules.
        if self.store.meta("links_checked") == "1":
            return None
        if not self.store.broken_links(1):
            self.store.note("links_checked", "1")
            return None
        links = self.store.link_state()
        names = set(links) | {c for _, c in links.values() if c is not None}
        pos: dict[str, int] = {}
        for name in sorted(names):
            cur = self.store.current(name)
            if cur is not None and cur.live:
                pos[name] = cur.pos
        want = {i: v for i, v in links.items() if i in pos}
        parent = {i: c for i, (st, c) in want.items() if st == "duplicate"}
        # Each duplicate belongs to the component of its chain of links: a root (an
        # item without a duplicate link, live or not) or a cycle (self-links too).
        comp: dict[str, tuple[str, str]] = {}
        for start in sorted(parent):
            path: list[str] = []
            node: str | None = start
            while node is not None and node in parent and node not in comp and node not in path:
                path.append(node)
                node = parent[node]
            if node is None:  # a duplicate link without a canonical item
                key = ("dead", path[-1])
            elif node in comp:
                key = comp[node]
            elif node in path:
                key = ("cycle", min(path[path.index(node) :]))
            else:
                key = ("root", node)
            for p in path:
                comp[p] = key
        groups: dict[tuple[str, str], list[str]] = {}
        for item, key in comp.items():
            groups.setdefault(key, []).append(item)
        for (kind, root), members in sorted(groups.items()):
            if kind == "root" and root in pos:
                head = root
            else:
                head = min(members, key=lambda m: pos[m])
                want.pop(head, None)
            for m in members:
                if m != head:
                    want[m] = ("duplicate", head)
        relinks = [
            {
                "item_id": i,
                "state": want[i][0] if i in want else ("unique" if i in pos else "tombstoned"),
                "canonical": want[i][1] if i in want else None,
            }
            for i in sorted(set(links) | set(want))
            if links.get(i) != want.get(i)
        ]
        if not relinks:  # pragma: no cover - broken_links found something to change
            return None
        event = self._record(
            "relink",
            None,
            None,
            cause="repair",
            reason="links recorded before clusters were handed over on tombstone / replace",
            relinks=relinks,
        )
        self.store.note("links_checked", "1")
        return event

    # -- applying logged commands ----------------------------------------------------
    def _writable(self) -> None:
        if self.stopped is not None:
            raise TenantUnavailable(
                f"tenant {self.tenant!r} stopped writing: {self.stopped}",
                "an operator checks the disk, then restarts the server (start-up "
                "replays the log); queries keep answering meanwhile",
            )

    def _commit(self, cmd: Command) -> int:
        """Log ``cmd`` (not yet fsynced) and apply it; call under the tenant lock."""
        self._writable()
        self.log.write([cmd])
        return self._apply_logged(cmd, index=True, live=True)

    def _apply_logged(self, cmd: Command, *, index: bool, live: bool = False) -> int:
        """Apply a command that is already in the log, never leaving the tenant stuck.

        * A storage error (the disk, not the command) stops the tenant's writes: the
          command stays in the log and start-up applies it once the disk is fixed.
        * Any other failure is the command's own: it is recorded as failed in the
          store (in place of its effect) and skipped, here and on every replay,
          which meets the same failure and records the same row.
        * An unknown operation means the log is not this version's: start-up stops
          (:class:`CorruptFile`) rather than skip what it cannot read.
        """
        try:
            return self._apply(cmd, index=index)
        except CorruptFile:
            raise
        except (OSError, sqlite3.OperationalError) as exc:
            self.stopped = (
                f"a storage error while applying command {cmd.seq} ({type(exc).__name__}: {exc})"
            )
            _log.error("tenant %s: %s", self.tenant, self.stopped)
            if live:
                raise NeardupIOError(self.store.path, OSError(str(exc))) from exc
            raise
        except Exception as exc:
            op = str(cmd.header.get("op"))
            reason = f"{type(exc).__name__}: {exc}"[:500]
            self.store.apply_failed(cmd.seq, op, reason)
            self.seq = max(getattr(self, "seq", 0), cmd.seq)
            self.failed_commands += 1
            _log.error(
                "tenant %s: command %d (%s) could not be applied and is recorded as failed: %s",
                self.tenant,
                cmd.seq,
                op,
                reason,
            )
            if live:
                raise CommandFailed(
                    f"command {cmd.seq} ({op}) was logged but could not be applied "
                    f"({type(exc).__name__}); it is recorded as failed and has no effect",
                    "nothing to undo; correct the request and send it again (report the "
                    "failure: the server should have refused it before logging)",
                    seq=cmd.seq,
                ) from exc
            return 0

    def _apply(self, cmd: Command, *, index: bool) -> int:
        h = cmd.header
        op = h.get("op")
        idem = None
        if h.get("idem"):
            idem = (h["idem"][0], h["idem"][1], canonical_json(h["response"]).encode())
        if op == "upsert":
            nf = int(h["n_features"])
            feats = np.frombuffer(cmd.blob, dtype="<u8", count=nf).astype(np.uint64)
            kb = cmd.blob[8 * nf : 8 * nf + 4 * self.bands]
            keys = np.frombuffer(kb, dtype="<u4").astype(np.uint32)
            text = None
            if h.get("text_bytes") is not None:
                text = cmd.blob[8 * nf + 4 * self.bands :].decode("utf-8")
            pos = int(h["pos"])
            self.store.apply_upsert(
                cmd.seq,
                pos=pos,
                item_id=h["item_id"],
                content_hash=int(h["content_hash"]),
                features=feats,
                bandkeys=keys,
                text=text,
                media_type=h.get("media_type"),
                source_time=h.get("source_time"),
                replaces=h.get("replaces"),
                idem=idem,
                event=h.get("event"),
                access_policy=h.get("access_policy"),
            )
            if h.get("event") is not None:
                self._applied_event(h["event"])
            if index:
                old = h.get("replaces")
                if old is not None and self.index.tombstone(int(old)):
                    self._live -= 1
                self.index.add(pos, keys)
                self._live += 1
                self._screen_add(int(h["content_hash"]))
            self._next_pos = max(self._next_pos, pos + 1) if hasattr(self, "_next_pos") else pos + 1
        elif op == "tombstone":
            self.store.apply_tombstone(
                cmd.seq, pos=int(h["pos"]), epoch=int(h["epoch"]), idem=idem, event=h.get("event")
            )
            if h.get("event") is not None:
                self._applied_event(h["event"])
            if index and self.index.tombstone(int(h["pos"])):
                self._live -= 1
        elif op == "event":
            self.store.apply_event(cmd.seq, h["event"], idem)
            self._applied_event(h["event"])
        elif op == "compact":
            n = self.store.apply_compact(cmd.seq)
            self.seq = max(getattr(self, "seq", 0), cmd.seq)
            return n
        else:
            raise CorruptFile(self.log.path, f"unknown command {op!r} at sequence {cmd.seq}")
        self.seq = max(getattr(self, "seq", 0), cmd.seq)
        return 0

    def _applied_event(self, event: dict[str, Any]) -> None:
        self._last_hash = chain_hash(event)
        if event["kind"] == "policy":
            self.policy = Policy.from_dict(event["policy"])
