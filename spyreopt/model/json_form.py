"""What the graph and plan JSON readers share (docs/formats.md): the text parsed and the version checked, each
failure a FormatError naming the document."""

from __future__ import annotations

import json
from typing import Any

from spyreopt.errors import FormatError


def parse_json(text: str, what: str) -> Any:
    """The document ``text`` holds; FormatError when it is not JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(f"{what}: not valid JSON ({exc})") from exc


def check_version(data: Any, supported: int, what: str) -> None:
    """A ``version`` this spyreopt reads: ``supported``, or none (files written before versions existed)."""
    if isinstance(data, dict) and "version" in data and data["version"] != supported:
        raise FormatError(
            f"{what}: version {data['version']!r} is not supported; this spyreopt reads version {supported} "
            f"(and files without a version)"
        )
