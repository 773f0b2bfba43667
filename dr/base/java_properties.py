"""Text for ``java.util.Properties.load``: every key and value written so that Java reads back
exactly the string the product meant (pure functions).

``Properties.load(InputStream)`` — what Kafka's clients and tools call — reads ISO-8859-1, drops the
whitespace that starts a value, ends a key at the first unescaped space, ``:`` or ``=``, treats a
line starting with ``#`` or ``!`` as a comment, a backslash as an escape and a backslash at the end of
a line as a continuation. So: ``\\`` doubled; tab, newline, carriage return and form feed as ``\\t``
``\\n`` ``\\r`` ``\\f``; a value's leading spaces and every space of a key as ``\\ ``; a key's ``:``
``=`` ``#`` ``!`` escaped; every character outside printable ASCII as ``\\uXXXX`` (UTF-16 units).
"""

from __future__ import annotations

__all__ = ["escape_key", "escape_value", "properties_text"]

_CONTROL = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f", "\\": "\\\\"}


def _escape(text: str, specials: str, leading_space_only: bool) -> str:
    out = []
    leading = True
    for ch in text:
        if ch in _CONTROL:
            out.append(_CONTROL[ch])
        elif ch == " " and (leading or not leading_space_only):
            out.append("\\ ")
        elif ch in specials:
            out.append("\\" + ch)
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            data = ch.encode("utf-16-be", "surrogatepass")
            out.extend(f"\\u{int.from_bytes(data[i : i + 2], 'big'):04X}" for i in range(0, len(data), 2))
        leading = leading and ch == " "
    return "".join(out)


def escape_key(key: str) -> str:
    """``key`` as a properties key Java reads back unchanged."""
    return _escape(key, ":=#!", leading_space_only=False)


def escape_value(value: str) -> str:
    """``value`` as a properties value Java reads back unchanged (a leading ``#``/``!`` is safe: the
    value never starts a line)."""
    return _escape(value, "", leading_space_only=True)


def properties_text(props: dict[str, str], header: str | None = None) -> str:
    """A whole properties file: an optional ``# header`` line, then ``key=value`` lines, escaped."""
    lines = [f"# {escape_value(header)}"] if header is not None else []
    lines += [f"{escape_key(k)}={escape_value(v)}" for k, v in props.items()]
    return "\n".join(lines) + "\n"
