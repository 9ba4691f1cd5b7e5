"""The committed JSON Schema of the report. Tests fail when the models and the committed file disagree.

Regenerate after changing the models: python -m kernelproof_core.report.schema --write
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from kernelproof_core.report.models import Report

SCHEMA_PATH = Path(__file__).resolve().parent / "report.schema.json"


def generate_schema() -> dict[str, Any]:
    schema = Report.model_json_schema(mode="serialization")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://kernelproof.dev/schemas/report.schema.json"
    return schema


def committed_schema() -> dict[str, Any]:
    return dict(json.loads(SCHEMA_PATH.read_text()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="overwrite the committed schema")
    args = parser.parse_args()
    text = json.dumps(generate_schema(), indent=2, sort_keys=True) + "\n"
    if args.write:
        SCHEMA_PATH.write_text(text)
    else:
        import sys

        sys.stdout.write(text)


if __name__ == "__main__":
    main()
