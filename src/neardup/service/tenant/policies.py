"""A tenant's decision policies: setting, adopting and their history."""

from __future__ import annotations

import logging
from typing import Any

from neardup.core._errors import Conflict, InvalidConfig
from neardup.service.decisions import Policy, PolicyGuard, chain_hash
from neardup.service.store import FeatureStore
from neardup.service.tenant._state import TenantState

_log = logging.getLogger("neardup.service.manager")


class PoliciesMixin(TenantState):
    def set_policy(
        self,
        doc: dict[str, Any],
        *,
        actor: str | None,
        guard: PolicyGuard | None = None,
    ) -> dict[str, Any]:
        """Install the next policy version, if ``guard`` allows it under this layout.

        Refused with the estimate in the message: a version that is not the next
        one, a threshold outside the guard's safe range, a review band that starts
        where this tenant's layout finds a pair with probability below the guard's
        minimum (that needs a new layout: a shadow index), or more candidates per
        query than the tenant's ``max_candidates`` budget (see
        :class:`~neardup.service.decisions.PolicyGuard`; its defaults without one).
        """
        guard = guard if guard is not None else PolicyGuard()
        with self._lock:
            pol = Policy.from_dict({**doc, "version": doc.get("version", self.policy.version + 1)})
            if pol.version != self.policy.version + 1:
                raise Conflict(
                    f"policy version {pol.version} is not the next one "
                    f"(current {self.policy.version})",
                    f"send version {self.policy.version + 1}; used versions are immutable",
                )
            warnings = guard.check(
                pol, bands=self.bands, rows=self.rows, num_perm=self.config.scheme.num_perm
            )
            if pol.max_candidates > self.config.scheme.max_candidates:
                per_item = 8 * max(1, self.config.scheme.shingle.max_shingles // 10)
                raise InvalidConfig(
                    "max_candidates",
                    pol.max_candidates,
                    f"exceeds the tenant's budget of {self.config.scheme.max_candidates} "
                    f"(about {pol.max_candidates * per_item} bytes of features read per query)",
                    f"use at most {self.config.scheme.max_candidates}",
                )
            event = self._record(
                "policy", None, actor, policy=pol.to_dict(), fingerprint=pol.fingerprint
            )
        return {
            **self._envelope(),
            "policy": pol.to_dict(),
            "fingerprint": pol.fingerprint,
            "predicted_recall_at_threshold": self.predicted_recall_at(pol.threshold),
            "event_hash": chain_hash(event),
            "warnings": warnings,
        }

    def policies(self) -> dict[str, Any]:
        return {
            **self._envelope(),
            "current": self.policy.to_dict(),
            "fingerprint": self.policy.fingerprint,
            "history": self.policy_history(),
        }

    def policy_history(self, *, placeholder: bool = False) -> list[dict[str, Any]]:
        """Every policy version of this tenant, oldest first (append-only).

        Version 1 (or ``policy_version``) comes from the configuration unless a
        recorded version replaces it: a shadow index adopts the live tenant's history
        (see :meth:`adopt_policy`).  ``placeholder``: leave the configuration's policy
        out (a shadow's, which was never live).
        """
        return self._history(self.store, placeholder=placeholder)

    def _history(self, store: FeatureStore, *, placeholder: bool = False) -> list[dict[str, Any]]:
        rows = store.policies()
        init = self._initial_policy().to_dict()
        if placeholder or any(r["version"] == init["version"] for r in rows):
            return rows
        return sorted([init, *rows], key=lambda d: int(d["version"]))

    @staticmethod
    def _missing_policies(
        own: list[dict[str, Any]], history: list[dict[str, Any]], what: str
    ) -> list[dict[str, Any]]:
        """The versions of ``history`` that ``own`` lacks; a version both hold with
        different contents is a :class:`Conflict` (versions are never reused)."""
        mine = {int(d["version"]): d for d in own}
        missing = []
        for doc in sorted(history, key=lambda d: int(d["version"])):
            have = mine.get(int(doc["version"]))
            if have is None:
                missing.append(doc)
            elif have != doc:
                raise Conflict(
                    f"policy version {doc['version']} means different policies in {what}",
                    "restore / promote only versions of this tenant's own history",
                )
        return missing

    def adopt_policy(
        self,
        history: list[dict[str, Any]],
        desired: Policy,
        *,
        actor: str | None,
        source: str,
        placeholder: bool = False,
        fresh: bool = True,
    ) -> list[dict[str, Any]]:
        """Continue ``history`` (another index's policy versions of this tenant) and make
        ``desired`` (its version ignored) the current policy, without reusing a version.

        Versions of ``history`` this index lacks are recorded (``inherited``); then
        ``desired`` is installed as the next version after all of them, unless the
        current policy already is ``desired`` under a version newer than every one of
        ``history`` (``fresh``: a promotion brings a version that was never live) or
        at least as new (a restore of a snapshot that holds the whole history).
        Used by a shadow's start and promotion (``source``), the promotion of a
        previous version back, and restores.  Returns the recorded policy events.
        """
        events = []
        with self._lock:
            own = self.policy_history(placeholder=placeholder)
            missing = self._missing_policies(own, history, f"tenant {self.tenant!r} ({source})")
            for doc in missing:
                events.append(
                    self._record_policy(Policy.from_dict(doc), actor, source, inherited=True)
                )
            versions = [int(d["version"]) for d in [*own, *history]]
            top = max([*versions, self.policy.version])
            want = {**desired.to_dict(), "version": self.policy.version}
            newest = max(int(d["version"]) for d in history)
            newer = self.policy.version > newest or (not fresh and self.policy.version == newest)
            if not (newer and self.policy.to_dict() == want):
                pol = Policy.from_dict({**desired.to_dict(), "version": top + 1})
                events.append(self._record_policy(pol, actor, source))
        return events

    def _record_policy(
        self, pol: Policy, actor: str | None, source: str, **extra: Any
    ) -> dict[str, Any]:
        return self._record(
            "policy",
            None,
            actor,
            policy=pol.to_dict(),
            fingerprint=pol.fingerprint,
            **extra,
            source=source,
        )

    def _initial_policy(self) -> Policy:
        return self.config.initial_policy()
