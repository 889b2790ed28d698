from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# Deterministic property tests: CI and developers see the same examples.
settings.register_profile(
    "neardup",
    derandomize=True,
    deadline=None,
    max_examples=int(os.environ.get("NEARDUP_HYPOTHESIS_EXAMPLES", "100")),
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("neardup")
