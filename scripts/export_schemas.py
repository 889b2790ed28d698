"""Write the service's JSON Schemas and OpenAPI document to docs/schemas/.

Run after changing ``neardup.service.schemas``; tests/service/test_schemas.py checks
that they are in sync.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from neardup.service.schemas import SCHEMAS, openapi

ROOT = Path(__file__).resolve().parents[1]


def render() -> dict[str, str]:
    out = {}
    for name, schema in sorted(SCHEMAS.items()):
        doc = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": name, **schema}
        out[f"{name}.json"] = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    out["openapi.json"] = json.dumps(openapi("0.1.0"), indent=2, sort_keys=True) + "\n"
    return out


def main() -> int:
    target = ROOT / "docs" / "schemas"
    target.mkdir(parents=True, exist_ok=True)
    for name, text in render().items():
        (target / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(render())} files to {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
