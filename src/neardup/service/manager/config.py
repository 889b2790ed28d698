"""Server-wide settings (:class:`ServiceConfig`) and the master secret's file.

Kept apart from :class:`~neardup.service.manager.Service` because the command line
(``neardup serve``, ``neardup repair``, ``neardup apikey``) needs them without
opening a service.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from neardup.core._errors import CorruptFile, InvalidConfig, NeardupIOError
from neardup.service._crypto import MasterSecret

__all__ = ["ServiceConfig", "inside", "load_master"]


def inside(path: str, root: str) -> bool:
    p, r = os.path.realpath(path), os.path.realpath(root)
    return os.path.commonpath([p, r]) == r


@dataclass(frozen=True, kw_only=True, slots=True)
class ServiceConfig:
    """Server-wide settings (frozen, keyword-only, validated).

    ``content_roots`` are the only places ``content_uri`` may point to
    (``file://`` URIs under one of them; every other scheme is refused).
    """

    data_dir: str
    master_key_file: str
    keys_file: str
    max_body_bytes: int = 1 << 20
    max_token_bytes: int = 256
    max_candidates: int = 100
    max_scan: int = 20_000
    compact_delta: int = 16_384
    content_roots: tuple[str, ...] = ()
    #: Policy thresholds operators may set; outside it a change is refused.
    policy_threshold_range: tuple[float, float] = (0.5, 0.99)
    #: A policy whose review band starts where the layout's candidate recall is
    #: below this is refused (it needs a new layout: a shadow index).
    policy_min_recall: float = 0.9
    #: The candidate recall at its threshold a tenant's layout should reach.  A new
    #: tenant below ``policy_min_recall`` is refused; below this target it is created
    #: with a ``warnings`` entry naming a layout that reaches it.
    recall_target: float = 0.995
    #: Share of queries that also run an exact search in the background (recall
    #: measured, not only predicted); at most one per tenant per interval.
    audit_sample_rate: float = 0.01
    audit_interval_s: float = 60.0
    audit_max_items: int = 20_000
    #: Work budgets per request (deterministic, so decisions replay exactly): shingle
    #: hashes compared in exact verification (query + candidate sizes, summed; past
    #: it the remaining candidates are reported as capped), and the longest content
    #: whose shared spans an explanation computes.
    verify_budget: int = 4_000_000
    explain_max_chars: int = 100_000
    #: Snapshots each tenant keeps under its snapshots/ folder (the newest).
    snapshot_keep: int = 3
    #: How long a version switch (shadow promote / rollback / retire, reopen) waits
    #: for the tenant's requests in flight; past it the switch answers 503 ``busy``
    #: and changes nothing.  Requests arriving meanwhile wait for the switch.
    switch_wait_s: float = 5.0
    #: Seconds a write (upsert, tombstone) may take before it is logged: waiting
    #: for the tenant's writer included.  Past it: 503 ``deadline_exceeded``,
    #: nothing recorded.  A logged write is always completed.
    request_budget_s: float = 5.0

    def __post_init__(self) -> None:
        lo, hi = self.policy_threshold_range
        if not 0 < lo <= hi <= 1:
            raise InvalidConfig(
                "policy_threshold_range",
                self.policy_threshold_range,
                "must satisfy 0 < lo <= hi <= 1",
                "use e.g. (0.5, 0.99)",
            )
        for name, most in (("request_budget_s", 3600), ("switch_wait_s", 600)):
            seconds = getattr(self, name)
            if not 0 < seconds <= most:
                raise InvalidConfig(name, seconds, f"must be in (0, {most}] seconds", "use e.g. 5")
        if not 0 <= self.audit_sample_rate <= 1 or self.audit_interval_s < 0:
            raise InvalidConfig(
                "audit_sample_rate",
                (self.audit_sample_rate, self.audit_interval_s),
                "needs a rate in [0, 1] and an interval >= 0",
                "use e.g. 0.01 and 60",
            )
        if not 0 < self.policy_min_recall <= 1:
            raise InvalidConfig(
                "policy_min_recall", self.policy_min_recall, "must be in (0, 1]", "use e.g. 0.9"
            )
        if not self.policy_min_recall <= self.recall_target <= 1:
            raise InvalidConfig(
                "recall_target",
                self.recall_target,
                f"must be in [policy_min_recall={self.policy_min_recall}, 1]",
                "use e.g. 0.995",
            )
        for name in ("master_key_file", "keys_file"):
            path = getattr(self, name)
            if inside(path, self.data_dir):
                raise InvalidConfig(
                    name,
                    path,
                    "must live outside the data directory",
                    f"move it out of {self.data_dir} (a copied data directory must not "
                    "carry its keys)",
                )
        for name, lo, hi in (
            ("max_body_bytes", 1024, 1 << 30),
            ("max_token_bytes", 8, 1 << 20),
            ("max_candidates", 1, 10_000),
            ("max_scan", 1, 1 << 30),
            ("compact_delta", 16, 1 << 24),
            ("verify_budget", 1, 1 << 40),
            ("explain_max_chars", 0, 1 << 40),
            ("snapshot_keep", 1, 1000),
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise InvalidConfig(name, v, f"must be an integer in [{lo}, {hi}]", "fix it")


def load_master(path: str) -> MasterSecret:
    try:
        with open(path, "rb") as fh:
            raw = fh.read().strip()
    except FileNotFoundError:
        raise InvalidConfig(
            "master_key_file",
            path,
            "does not exist",
            "start `neardup serve --data-dir DIR` once to create it (or pass the right path)",
        ) from None
    except OSError as exc:
        raise NeardupIOError(path, exc) from exc
    try:
        return MasterSecret(bytes.fromhex(raw.decode("ascii")))
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptFile(path, "master key file must hold hex digits") from exc
