"""Text from traces made safe for a terminal: control characters shown, never obeyed.

Event names, file names and paths come from traces other people wrote; a name holding
``ESC [ 2 J`` or a carriage return would clear or overwrite the user's terminal if printed
raw. :func:`safe_text` writes every C0/C1 control character, DEL, the Unicode bidirectional
overrides and undecodable bytes (surrogate escapes of non-UTF-8 file names) as visible
escapes (``\\x1b``, ``\\u202e``, ``\\udcff``).
"""

from __future__ import annotations

import re

__all__ = ["safe_text"]

_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
    "\ud800-\udfff]")
_UNSAFE_WITH_LINES = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
    "\ud800-\udfff]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def safe_text(text: str, *, keep_newlines: bool = True) -> str:
    """``text`` with control characters escaped; newlines and tabs kept unless
    ``keep_newlines`` is false (then a name cannot start a new line either)."""
    pattern = _UNSAFE if keep_newlines else _UNSAFE_WITH_LINES
    return pattern.sub(_escape, text)
