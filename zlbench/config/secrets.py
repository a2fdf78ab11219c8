"""Passwords stay out of what a run writes (run dirs are attached to pull requests, the store keeps
the identity): a URL's password is refused on the command line and masked in anything recorded."""

from __future__ import annotations

import re
from typing import Any

# A URL that carries a password: scheme://user:password@...
CREDENTIALS = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/@:\s]*):[^@/\s]+@")


def has_password(text: str) -> bool:
    return bool(CREDENTIALS.search(text))


def scrub(value: Any) -> Any:
    """The value with every URL password masked (postgresql://user:***@host/db), through dicts and lists."""
    if isinstance(value, str):
        return CREDENTIALS.sub(lambda m: m.group("head") + ":***@", value)
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v) for v in value]
    return value
