"""Make untrusted text (names read from trace files) safe to print on a terminal.

A trace file can hold any string: an event named ``"\\x1b]0;pwned\\x07"`` or one with a
right-to-left override would rewrite the user's terminal or hide text when ``statistic``
prints it, and a non-UTF-8 file name arrives as surrogate escapes. :func:`safe_text` escapes
such characters the way Python's ``repr`` does (``\\x1b``, ``\\u202e``, ``\\udcff``) and
leaves everything else, non-ASCII letters included, as it is. Loaders pass every name, kind
and counter name through it; the CLI passes everything it prints.
"""

from __future__ import annotations

import unicodedata

__all__ = ["UNSAFE_CATEGORIES", "safe_text"]

UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
"""Unicode categories escaped: controls, format (bidi overrides, zero-width), surrogates,
private use, unassigned, line and paragraph separators."""

_LAYOUT = frozenset("\n\t")


def _escape(ch: str) -> str:
    o = ord(ch)
    if o < 0x100:
        return f"\\x{o:02x}"
    if o < 0x10000:
        return f"\\u{o:04x}"
    return f"\\U{o:08x}"


def safe_text(text: str, max_len: int | None = None, *, keep_newlines: bool = False) -> str:
    """``text`` with control and invisible formatting characters escaped (``\\x1b``).

    Printable text (the common case) is returned unchanged without copying.
    ``keep_newlines``: leave ``\\n`` and ``\\t`` as they are (for multi-line output the
    program itself formats). ``max_len``: cut the result to that many characters, ending
    in ``...``.
    """
    if not text.isprintable():
        keep = _LAYOUT if keep_newlines else frozenset()
        text = "".join(_escape(c) if c not in keep and unicodedata.category(c)
                       in UNSAFE_CATEGORIES else c for c in text)
    if max_len is not None and len(text) > max_len:
        text = text[: max(0, max_len - 3)] + "..."
    return text
