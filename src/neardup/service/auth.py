"""API keys, roles and tenant scopes; the audit log of privileged calls.

An API key is ``nd_<key_id>_<secret>``: the id is public, the 256-bit secret is
shown once at creation and stored only as its SHA-256 (a slow KDF buys nothing
for a random 256-bit secret).  Presented secrets are compared in constant time.

Roles:

* ``producer`` — upsert, candidates, verify, decide, tombstone; exactly one tenant.
* ``reviewer`` — reviewer feedback and reading retained content; exactly one tenant.
* ``operator`` — tenants, snapshot, restore, compaction, policies; an explicit list
  of tenants (there is no wildcard: every tenant an operator may touch is named).

A key may also name the **access policies** it is allowed (``policies``): items
stored with an ``access_policy`` label outside that list cannot have their
content read with it.  A key without the list (every key issued before it
existed) is not restricted.

Example:
    >>> ring = Keyring()
    >>> token = ring.add("producer", ["t1"], key_id="p1")
    >>> ring.authenticate(f"Bearer {token}").require("upsert", "t1").key_id
    'p1'
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from neardup.core._errors import CorruptFile, Forbidden, InvalidConfig, NeardupIOError, Unauthorized
from neardup.core._posix import require_file_locks
from neardup.core.persist import atomic_write, read_format_file

__all__ = ["AuditLog", "Keyring", "Principal", "Role", "file_lock"]

_log = logging.getLogger("neardup.service.auth")

Role = Literal["producer", "reviewer", "operator"]
_ROLES: tuple[Role, ...] = ("producer", "reviewer", "operator")
_ID_OK = set("abcdefghijklmnopqrstuvwxyz0123456789-")
_KEYS_FORMAT = "neardup-keys-v1"

#: Which operations each role may call.
PERMISSIONS: dict[Role, frozenset[str]] = {
    "producer": frozenset({"upsert", "candidates", "verify", "decide", "tombstone", "read"}),
    "reviewer": frozenset({"feedback", "read", "content", "resolve", "decisions"}),
    "operator": frozenset(
        {
            "tenant",
            "snapshot",
            "restore",
            "compact",
            "policy",
            "read",
            "verify",
            "stats",
            "decisions",
            "resolve",
            "shadow",
        }
    ),
}


@contextlib.contextmanager
def file_lock(path: str) -> Iterator[None]:
    """An exclusive advisory lock (``flock``) on ``path``, held for the block.

    Serializes read-modify-write of a file shared by several server processes
    (``neardup serve --workers N`` and ``neardup apikey``); the kernel drops the
    lock if the holder dies.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise NeardupIOError(path, exc) from exc
    try:
        fcntl = require_file_locks("the service's key file")
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _stat_sig(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller."""

    key_id: str
    role: Role
    tenants: tuple[str, ...]
    #: The access policies whose items' content this key may read (None: any; the
    #: check is :meth:`~neardup.service.tenant.Tenant.content`'s ``allowed``).
    policies: tuple[str, ...] | None = None


    def require(self, op: str, tenant: str) -> Principal:
        """Raise :class:`Forbidden` unless this caller may do ``op`` on ``tenant``."""
        if op not in PERMISSIONS[self.role]:
            raise Forbidden(
                f"role {self.role!r} of key {self.key_id!r} may not {op!r}",
                f"use a key with a role allowed to {op!r}",
            )
        if tenant not in self.tenants:
            raise Forbidden(
                f"key {self.key_id!r} is not scoped to tenant {tenant!r}",
                "use a key issued for this tenant",
            )
        return self


@dataclass(frozen=True, slots=True)
class _Entry:
    """A key as the key file holds it: the caller it authenticates and the SHA-256
    of its secret."""

    principal: Principal
    digest: str

    def record(self) -> dict[str, Any]:
        """The key's entry in the key file."""
        p = self.principal
        out: dict[str, Any] = {
            "key_id": p.key_id,
            "sha256": self.digest,
            "role": p.role,
            "tenants": list(p.tenants),
        }
        if p.policies is not None:
            out["policies"] = list(p.policies)
        return out


class Keyring:
    """The API keys a server accepts (see the module docstring)."""

    def __init__(self, entries: Iterable[_Entry] = ()) -> None:
        self._entries: dict[str, _Entry] = {e.principal.key_id: e for e in entries}
        #: The file this ring follows (set by :meth:`load`): a change to it (a key
        #: issued by another server process or by ``neardup apikey``) is picked up
        #: by the next :meth:`authenticate`.
        self._path: str | None = None
        self._sig: tuple[int, int, int] | None = None

    @classmethod
    def load(cls, path: str) -> Keyring:
        sig = _stat_sig(path)
        ring = cls._read(path)
        ring._path, ring._sig = path, sig
        return ring

    def refresh(self) -> None:
        """Reread the key file if it changed since it was read (cheap: one ``stat``).

        A file that cannot be read or parsed keeps the keys already loaded (and is
        logged): a bad edit must not lock every caller out.
        """
        if self._path is None:
            return
        sig = _stat_sig(self._path)
        if sig == self._sig:
            return
        try:
            fresh = self._read(self._path)
        except (CorruptFile, NeardupIOError) as exc:
            _log.error("keys file changed but cannot be read; keeping the loaded keys: %s", exc)
            self._sig = sig
            return
        self._entries, self._sig = fresh._entries, sig

    def add_saved(
        self,
        path: str,
        role: str,
        tenants: Sequence[str],
        *,
        policies: Sequence[str] | None = None,
    ) -> str:
        """:meth:`add` a key to the key file at ``path`` under a file lock (reread
        first, so keys other processes added meanwhile are kept); returns the token."""
        with file_lock(path + ".lock"):
            if self._path == path:
                self._sig = None  # force the reread
                self.refresh()
            else:
                self._entries = self._read(path)._entries
            token = self.add(role, tenants, policies=policies)
            self.save(path)
            if self._path == path:
                self._sig = _stat_sig(path)
        return token

    @classmethod
    def _read(cls, path: str) -> Keyring:
        doc = read_format_file(
            path,
            _KEYS_FORMAT,
            "a neardup key file",
            not_json="not a JSON key file",
            missing={"format": _KEYS_FORMAT},  # no file yet: no keys
        )
        out = []
        for e in doc.get("keys", []):
            role = e.get("role")
            if role not in _ROLES:
                raise CorruptFile(path, f"key {e.get('key_id')!r} has unknown role {role!r}")
            pols = e.get("policies")
            if pols is not None and not (
                isinstance(pols, list) and all(isinstance(p, str) for p in pols)
            ):
                raise CorruptFile(
                    path, f"key {e.get('key_id')!r} has policies {pols!r}, not a list of labels"
                )
            principal = Principal(
                str(e["key_id"]), role, tuple(e["tenants"]), None if pols is None else tuple(pols)
            )
            out.append(_Entry(principal, str(e["sha256"])))
        return cls(out)

    def save(self, path: str) -> None:
        doc: dict[str, Any] = {
            "format": _KEYS_FORMAT,
            "keys": [self._entries[kid].record() for kid in sorted(self._entries)],
        }
        atomic_write(path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())
        os.chmod(path, 0o600)

    def add(
        self,
        role: str,
        tenants: Sequence[str],
        *,
        key_id: str | None = None,
        policies: Sequence[str] | None = None,
    ) -> str:
        """Create a key and return its token (the only time the secret is visible).

        ``policies``: the access policies whose items' content the key may read
        (None: no restriction); each a label like an item's ``access_policy``."""
        if role not in _ROLES:
            raise InvalidConfig("role", role, "unknown role", "use producer, reviewer or operator")
        ts = tuple(dict.fromkeys(tenants))
        if not ts:
            raise InvalidConfig("tenants", list(tenants), "a key needs a tenant", "name one")
        if role != "operator" and len(ts) != 1:
            raise InvalidConfig(
                "tenants",
                list(ts),
                f"a {role} key is scoped to exactly one tenant",
                "issue one key per tenant",
            )
        kid = key_id or secrets.token_hex(6)
        if not kid or set(kid) - _ID_OK:
            raise InvalidConfig("key_id", kid, "must be lowercase letters, digits or '-'", "rename")
        if kid in self._entries:
            raise InvalidConfig("key_id", kid, "already exists", "pick another id")
        # Imported here: the models' OpenAPI module imports this one.
        from neardup.service.models.checks import check_access_policy

        pols = None
        if policies is not None:
            if isinstance(policies, str):
                raise InvalidConfig(
                    "policies", policies, "must be a list of labels", f"send [{policies!r}]"
                )
            pols = tuple(dict.fromkeys(str(check_access_policy(p)) for p in policies))
        secret = secrets.token_urlsafe(32)
        self._entries[kid] = _Entry(Principal(kid, role, ts, pols), _digest(secret))
        return f"nd_{kid}_{secret}"

    def revoke(self, key_id: str) -> None:
        self._entries.pop(key_id, None)

    def __len__(self) -> int:
        return len(self._entries)

    def authenticate(self, authorization: str | None) -> Principal:
        """The caller of an ``Authorization: Bearer nd_<id>_<secret>`` header."""
        fix = "send Authorization: Bearer nd_<key id>_<secret> with a key issued by an operator"
        self.refresh()
        if not authorization or not authorization.startswith("Bearer "):
            raise Unauthorized("no API key presented", fix)
        token = authorization[7:].strip()
        parts = token.split("_", 2)
        if len(parts) != 3 or parts[0] != "nd":
            raise Unauthorized("malformed API key", fix)
        entry = self._entries.get(parts[1])
        # Compare against a dummy digest for unknown ids so timing does not reveal them.
        want = entry.digest if entry else "0" * 64
        ok = hmac.compare_digest(_digest(parts[2]), want)
        if entry is None or not ok:
            raise Unauthorized("unknown or revoked API key", fix)
        return entry.principal


class AuditLog:
    """Append-only, hash-chained JSON lines of privileged calls, fsynced per line.

    Each line carries ``prev``, the SHA-256 of the previous line, so a removed or
    edited line breaks the chain (:meth:`verify`).  Secrets and content are never
    written: only who, what, which tenant, the outcome and when.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._prev = "0" * 64
        #: Where whole lines ended after this process's last look at the file.  Other
        #: server processes (``neardup serve --workers N``) append to the same file
        #: under ``path + ".lock"``; a file that grew meanwhile is re-read at its
        #: tail so the chain continues from *their* last line.
        self._end = 0
        with file_lock(path + ".lock"):
            if os.path.exists(path):
                self._prev, end = self.verify(path)
                if end < os.path.getsize(path):
                    # A torn last line (crash mid-append) is dropped, as in the command log.
                    with open(path, "r+b") as fh:
                        fh.truncate(end)
                        os.fsync(fh.fileno())
                self._end = end

    def _resync(self, fh: Any) -> None:
        """Continue the chain after lines another process appended (lock held)."""
        size = fh.seek(0, os.SEEK_END)
        if size == self._end:
            return
        # Read back from the end until the last whole line is in the buffer.
        buf, pos = b"", size
        last_nl = prev_nl = -1
        while pos > 0:
            step = min(65536, pos)
            pos -= step
            fh.seek(pos)
            buf = fh.read(step) + buf
            last_nl = buf.rfind(b"\n")
            prev_nl = buf.rfind(b"\n", 0, last_nl) if last_nl > 0 else -1
            if prev_nl >= 0:
                break
        end = pos + last_nl + 1 if last_nl >= 0 else 0
        if end < size:
            # A torn line: a process died mid-append (it held the lock); drop it.
            fh.truncate(end)
            os.fsync(fh.fileno())
        if last_nl >= 0:
            self._prev = hashlib.sha256(buf[prev_nl + 1 : last_nl]).hexdigest()
        else:
            self._prev = "0" * 64
        self._end = end

    @staticmethod
    def verify(path: str) -> tuple[str, int]:
        """Check the chain of ``path``; returns the hash of its last whole line and the
        byte offset where whole lines end.  A broken chain raises :class:`CorruptFile`."""
        prev = "0" * 64
        end = 0
        with open(path, "rb") as fh:
            for n, line in enumerate(fh, 1):
                if not line.endswith(b"\n"):
                    break
                try:
                    rec = json.loads(line)
                except ValueError as exc:
                    raise CorruptFile(path, f"line {n} is not JSON ({exc})") from exc
                if rec.get("prev") != prev:
                    raise CorruptFile(path, f"line {n} breaks the hash chain")
                prev = hashlib.sha256(line.rstrip(b"\n")).hexdigest()
                end += len(line)
        return prev, end

    def write(
        self, principal: Principal | None, op: str, tenant: str | None, **fields: Any
    ) -> None:
        with self._lock:
            rec = {
                "time": round(time.time(), 3),
                "key_id": principal.key_id if principal else None,
                "role": principal.role if principal else None,
                "op": op,
                "tenant": tenant,
                **fields,
                "prev": self._prev,
            }
            try:
                with file_lock(self.path + ".lock"), open(self.path, "a+b") as fh:
                    self._resync(fh)
                    rec["prev"] = self._prev
                    line = json.dumps(rec, sort_keys=True, separators=(",", ":")).encode()
                    fh.write(line + b"\n")
                    fh.flush()
                    os.fsync(fh.fileno())
                    self._end = fh.tell()
            except OSError as exc:
                raise NeardupIOError(self.path, exc) from exc
            self._prev = hashlib.sha256(line).hexdigest()
