"""Link patterns that answer in bounded time, in both engines that run them.

MirrorMaker 2 matches a link's topic and group patterns with ``java.util.regex`` and ``drctl`` with
Python: both are backtracking engines, where a pattern such as ``(a+)+b`` takes time exponential in
the name's length (48 ``a``\\ s: minutes). Two defences:

* :func:`backtracking_problem` reads the pattern's parse tree (Python's ``re._parser``; the syntax
  both engines share) and refuses the shapes that backtrack catastrophically: a repeated part that
  can match the empty string (``(a*)*``, ``(.*)*``), that can end with a repetition of what it can
  start with (``(a+)+``, ``(\\w+\\s?)*``), that holds two alternatives or two adjacent repetitions
  able to match the same text (``(a|a)*``, ``(a+a+)*``), and four or more overlapping repetitions in
  a row (``.*a.*a.*a.*``: time to the fourth power). Validation refuses such a pattern before either
  engine sees it, so the check is what keeps MirrorMaker 2 safe too.
* :func:`name_matcher` matches with RE2 (``google-re2``: linear time) whenever RE2 reads the pattern
  as Python does (ASCII names; no POSIX class), and falls back to Python's ``re`` only for what RE2
  lacks (look-arounds, back-references) on a pattern the check above passed; a pattern neither can
  take safely matches only its own text.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any

import re2

__all__ = ["backtracking_problem", "name_matcher"]

_c: Any = re._constants  # type: ignore[attr-defined]
_p: Any = re._parser  # type: ignore[attr-defined]

_REPEATS = (_c.MAX_REPEAT, _c.MIN_REPEAT, _c.POSSESSIVE_REPEAT)
_UNBOUNDED = _c.MAXREPEAT
_CHAIN_LIMIT = 4
"""Overlapping unbounded repetitions in a row from which a pattern is refused (time ~ length^k)."""

_ALPHABET = [chr(c) for c in range(0x80)] + ["é", "ß", "Ā", "Ω", "中", "\u00a0", "\u2028", "\U0001f600"]
"""The characters on which two parts of a pattern are compared ("can both match the same text"):
ASCII, where names live, and a sample of the others (so a negated class overlaps what it should)."""

_CATEGORIES: dict[Any, Callable[[str], bool]] = {
    _c.CATEGORY_DIGIT: str.isdigit,
    _c.CATEGORY_NOT_DIGIT: lambda ch: not ch.isdigit(),
    _c.CATEGORY_SPACE: str.isspace,
    _c.CATEGORY_NOT_SPACE: lambda ch: not ch.isspace(),
    _c.CATEGORY_WORD: lambda ch: ch.isalnum() or ch == "_",
    _c.CATEGORY_NOT_WORD: lambda ch: not (ch.isalnum() or ch == "_"),
    _c.CATEGORY_LINEBREAK: lambda ch: ch == "\n",
    _c.CATEGORY_NOT_LINEBREAK: lambda ch: ch != "\n",
}


def _anything(_ch: str) -> bool:
    return True


_Seq = list[tuple[Any, Any]]
_Chars = frozenset[str]
_EVERY: _Chars = frozenset(_ALPHABET)


def _in_class(items: _Seq, ch: str, fold: bool) -> bool:
    negate = False
    found = False
    for op, av in items:
        if op is _c.NEGATE:
            negate = True
        elif op is _c.LITERAL:
            found = found or _same(chr(av), ch, fold)
        elif op is _c.RANGE:
            cases = (ch, ch.lower(), ch.upper()) if fold else (ch,)
            found = found or any(len(x) == 1 and av[0] <= ord(x) <= av[1] for x in cases)
        elif op is _c.CATEGORY:
            found = found or _CATEGORIES.get(av, _anything)(ch)
        else:
            found = True  # a charset the parser compiled away: assume it may match
    return found != negate


def _same(a: str, b: str, fold: bool) -> bool:
    return a == b or (fold and a.casefold() == b.casefold())


def _one_char(op: Any, av: Any, fold: bool) -> _Chars | None:
    """The characters a single-character item matches, or None when ``op`` is not one."""
    if op is _c.LITERAL:
        return frozenset(ch for ch in _ALPHABET if _same(chr(av), ch, fold)) | {chr(av)}
    if op is _c.NOT_LITERAL:
        return frozenset(ch for ch in _ALPHABET if not _same(chr(av), ch, fold))
    if op is _c.ANY:
        return _EVERY
    if op is _c.IN:
        return frozenset(ch for ch in _ALPHABET if _in_class(av, ch, fold))
    return None


class _Reader:
    """Facts about parts of one parsed pattern: can they match "", which characters can start them."""

    def __init__(self, fold: bool) -> None:
        self.fold = fold

    def nullable(self, seq: _Seq) -> bool:
        return all(self.item_nullable(op, av) for op, av in seq)

    def item_nullable(self, op: Any, av: Any) -> bool:
        if _one_char(op, av, self.fold) is not None:
            return False
        if op in _REPEATS:
            return bool(av[0] == 0 or self.nullable(av[2]))
        if op is _c.SUBPATTERN:
            return self.nullable(av[3])
        if op is _c.ATOMIC_GROUP:
            return self.nullable(av)
        if op is _c.BRANCH:
            return any(self.nullable(alt) for alt in av[1])
        if op is _c.GROUPREF_EXISTS:
            return self.nullable(av[1]) or av[2] is None or self.nullable(av[2])
        return True  # AT, ASSERT, ASSERT_NOT, GROUPREF (may be empty): zero-width or unknown

    def first(self, seq: _Seq) -> _Chars:
        out: set[str] = set()
        for op, av in seq:
            out |= self.item_first(op, av)
            if not self.item_nullable(op, av):
                break
        return frozenset(out)

    def item_first(self, op: Any, av: Any) -> _Chars:
        chars = _one_char(op, av, self.fold)
        if chars is not None:
            return chars
        if op in _REPEATS:
            return self.first(av[2]) if av[1] > 0 else frozenset()
        if op is _c.SUBPATTERN:
            return self.first(av[3])
        if op is _c.ATOMIC_GROUP:
            return self.first(av)
        if op is _c.BRANCH:
            return frozenset().union(*(self.first(alt) for alt in av[1]))
        if op is _c.GROUPREF_EXISTS:
            return self.first(av[1]) | (self.first(av[2]) if av[2] is not None else frozenset())
        if op is _c.GROUPREF:
            return _EVERY
        return frozenset()  # AT, ASSERT, ASSERT_NOT consume nothing

    def chars(self, seq: _Seq) -> _Chars:
        """Every character any part of ``seq`` can consume."""
        out: set[str] = set()
        for op, av in seq:
            one = _one_char(op, av, self.fold)
            if one is not None:
                out |= one
            elif op is _c.GROUPREF:
                return _EVERY
            else:
                for inner in _children(op, av):
                    out |= self.chars(inner)
        return frozenset(out)

    def tail_repeats(self, seq: _Seq) -> Iterator[tuple[Any, Any]]:
        """Unbounded repetitions that can end a match of ``seq`` (all after them may match "")."""
        for op, av in reversed(seq):
            if op in _REPEATS and av[1] == _UNBOUNDED:
                yield op, av
            if op in (_c.SUBPATTERN, _c.ATOMIC_GROUP, _c.BRANCH, _c.GROUPREF_EXISTS):
                for inner in _children(op, av):
                    yield from self.tail_repeats(inner)
            if not self.item_nullable(op, av):
                return

    def chain(self, seq: _Seq) -> int:
        """The longest run of unbounded repetitions in ``seq`` each able to take over the text between
        it and the next and the start of the next: the degree of the time a failed match can take."""
        best = run = 0
        absorb: _Chars = frozenset()
        for op, av in seq:
            if op in _REPEATS and av[1] == _UNBOUNDED:
                body = self.chars(av[2])
                run = run + 1 if run and self.first(av[2]) & absorb else 1
                absorb = body
                best = max(best, run)
            elif run and not self.item_nullable(op, av) and not self.chars([(op, av)]) <= absorb:
                run = 0
        return best


def _children(op: Any, av: Any) -> list[_Seq]:
    if op in _REPEATS:
        return [av[2]]
    if op is _c.SUBPATTERN:
        return [av[3]]
    if op is _c.ATOMIC_GROUP:
        return [av]
    if op is _c.BRANCH:
        return list(av[1])
    if op in (_c.ASSERT, _c.ASSERT_NOT):
        return [av[1]]
    if op is _c.GROUPREF_EXISTS:
        return [av[1]] + ([av[2]] if av[2] is not None else [])
    return []


def _flatten(seq: _Seq) -> _Seq:
    """``seq`` with its groups opened: the items that follow each other in a match."""
    out: _Seq = []
    for op, av in seq:
        if op is _c.SUBPATTERN:
            out += _flatten(av[3])
        elif op is _c.ATOMIC_GROUP:
            out += _flatten(av)
        else:
            out.append((op, av))
    return out


def _walk(seq: _Seq) -> Iterator[tuple[Any, Any, _Seq]]:
    """Every item of the tree with the sequence holding it."""
    for op, av in seq:
        yield op, av, seq
        for inner in _children(op, av):
            yield from _walk(inner)


def _repeated_problem(r: _Reader, body: _Seq) -> str | None:
    if r.nullable(body):
        return "a repeated part can match the empty string"
    start = r.first(body)
    for _, av in r.tail_repeats(body):
        if r.first(av[2]) & start:
            return "a repeated part ends with a repetition of what it can start with, so the text splits between the repetitions in exponentially many ways"
    flat = _flatten(body)
    for i, (op, av) in enumerate(flat):
        if op in _REPEATS and av[1] == _UNBOUNDED:
            eats = r.chars(av[2])
            if eats & start and all(r.chars([item]) <= eats for item in flat[i + 1 :]):
                return "a repetition inside a repeated part can take over the rest of it and the next repeat, so the text splits between them in many ways"
    if any(op is _c.GROUPREF for op, _, _ in _walk(body)):
        return "a repeated part holds a back-reference"
    for op, av, _ in _walk(body):
        if op is _c.BRANCH:
            alts = av[1]
            for i, a in enumerate(alts):
                for b in alts[i + 1 :]:
                    if (r.nullable(a) and r.nullable(b)) or r.first(a) & r.first(b):
                        return "a repeated part holds alternatives that can match the same text"
        if r.chain(_children(op, av)[0] if op in _REPEATS else []) >= 2:
            return "a repeated part holds two adjacent repetitions that can match the same text"
    if r.chain(body) >= 2:
        return "a repeated part holds two adjacent repetitions that can match the same text"
    return None


@lru_cache(maxsize=4096)
def backtracking_problem(pattern: str) -> str | None:
    """Why ``pattern`` can backtrack catastrophically (exponential, or a polynomial of degree 4 or
    more, in the length of the name matched), or None. The pattern must already compile in Python."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parsed = _p.parse(pattern)
    r = _Reader(fold=bool(parsed.state.flags & re.IGNORECASE))
    seq: _Seq = list(parsed.data)
    for op, av, _ in _walk(seq):
        if op in _REPEATS and av[1] > 1:
            found = _repeated_problem(r, av[2])
            if found is not None:
                return found
    for holder in [seq, *(inner for op, av, _ in _walk(seq) for inner in _children(op, av))]:
        if r.chain(holder) >= _CHAIN_LIMIT:
            return (
                f"{_CHAIN_LIMIT} or more repetitions in a row can match the same text "
                f"(the time grows with the name's length to the power {_CHAIN_LIMIT})"
            )
    return None


class _Literal:
    """A pattern read as its own text only (an invalid or unsafe one: validation refuses it)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def fullmatch(self, name: str) -> bool:
        return name == self.text


class _Compiled:
    """A pattern read as Python's ``re`` reads it, matched by RE2 where RE2 gives the same answer."""

    def __init__(self, python: re.Pattern[str] | None, linear: Any, text: str) -> None:
        self.python = python  # None: unsafe for a backtracking engine
        self.linear = linear  # None: RE2 cannot read it (look-around, back-reference…)
        self.text = text

    def fullmatch(self, name: str) -> bool:
        # RE2's \w, \d, \s, \b are ASCII, Python's Unicode: the same answer on ASCII names only
        if self.linear is not None and (name.isascii() or self.python is None):
            return self.linear.fullmatch(name) is not None
        if self.python is not None:
            return self.python.fullmatch(name) is not None
        return name == self.text


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False


@lru_cache(maxsize=4096)
def name_matcher(pattern: str) -> _Literal | _Compiled:
    """What decides whether a link's ``pattern`` selects a name (``.fullmatch(name) -> bool``), in
    bounded time, with Python's reading: RE2 when it reads the pattern alike, else Python's ``re``
    for a pattern :func:`backtracking_problem` passes; an invalid pattern is its own text."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            python = re.compile(pattern)
        except (re.error, RecursionError):
            return _Literal(pattern)
    linear = None
    if "[:" not in pattern:  # RE2 reads [[:alpha:]] as a POSIX class, Python as the characters
        try:
            linear = re2.compile(pattern, _RE2_OPTIONS)
        except Exception:  # noqa: BLE001 — re2.error, or a pattern RE2's wrapper cannot take
            linear = None
    safe = backtracking_problem(pattern) is None
    if linear is None and not safe:
        return _Literal(pattern)
    return _Compiled(python if safe else None, linear, pattern)
