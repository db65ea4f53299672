"""The one parser of JSON and TOML another program or a user wrote: nesting depth checked before parsing.

A document nested 5,000 deep is a few kilobytes. ``tomllib`` recurses in Python per nested array or inline
table (a :class:`RecursionError`); ``orjson`` parses up to 1,024 deep but refuses to write more than 254, and
every recursive walk of the value afterwards (a merge of TOML layers, a schema validation, a copy) can exhaust
the stack. So the depth is measured on the text first, with no recursion and at C speed (strings taken out,
brackets kept, innermost pairs removed one level per pass), and a document nested deeper than
:data:`MAX_DEPTH` is a :class:`TooDeep` (a ``ValueError``) with one line to say so, never parsed.

:data:`MAX_DEPTH` is what serde_json accepts, the parser of the real binary: a document it would refuse
is refused here too. TOML dotted keys (``a.b.c = 1``) nest without brackets: the parsed table is measured
again, iteratively (a TOML file is at most a few MiB).

Every caller keeps its own byte bound (``contracts.safe_read``) and its own error type and exit code; this
module only says the document is too deep, or not JSON / TOML.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any, Final

import orjson

from contracts.exitcodes import InvalidInput

#: What serde_json, the real binary's parser, accepts: its recursion limit of 128 counts down to zero, so 127 levels.
MAX_DEPTH: Final = 127
#: A recording keeps what was sent, however deep, up to what orjson itself parses (1,024 levels): a
#: transcript whose one frame is 1,000 deep is still shown (the frame marked), never refused whole.
MAX_RECORD_DEPTH: Final = 1024

_OPEN, _CLOSE = ord("("), ord(")")
#: ``[`` and ``{`` as ``(``, ``]`` and ``}`` as ``)``, everything else deleted.
_TO_PARENS: Final = bytes.maketrans(b"[{]}", b"(())")
_NOT_BRACKET: Final = bytes(b for b in range(256) if b not in b"[]{}")
_JSON_ESCAPE: Final = re.compile(rb"\\.", re.S)
_JSON_STRING: Final = re.compile(rb'"[^"]*"')
_TOML_NOISE: Final = re.compile(
    rb'"""(?:[^\\]|\\.)*?"""|\'\'\'.*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*',
    re.S,
)


class TooDeep(InvalidInput, ValueError):
    """Nested deeper than the bound (``str()`` says how deep at most)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"arrays and tables nested more than {limit} deep")
        self.limit = limit


class JsonTooDeep(orjson.JSONDecodeError, TooDeep):
    """A JSON document too deep: also an ``orjson.JSONDecodeError``, so every reader that says "not JSON"
    for a document orjson refuses says this one's reason the same way."""

    def __init__(self, limit: int) -> None:
        orjson.JSONDecodeError.__init__(self, f"arrays and objects nested more than {limit} deep", "", 0)
        self.limit = limit

    def __str__(self) -> str:
        return str(self.msg)


def _depth_of_brackets(brackets: bytes, limit: int, error: type[TooDeep] = TooDeep) -> None:
    """``error`` when ``brackets`` (only ``[]{}``) nest deeper than ``limit``."""
    if brackets.count(b"[") + brackets.count(b"{") <= limit:
        return
    parens = brackets.translate(_TO_PARENS)
    if b"(" * (limit + 1) in parens:  # the usual attack: a run of openers, found at once
        raise error(limit)
    passes = 0
    while parens:
        shorter = parens.replace(b"()", b"")  # removes exactly the innermost level
        if len(shorter) == len(parens):
            break  # unbalanced: what is left is ")))(((" and its openers still count
        parens, passes = shorter, passes + 1
        if passes > limit:
            raise error(limit)
    if passes + len(parens) - (parens.rfind(b")") + 1) > limit:
        raise error(limit)


def check_json_depth(data: bytes | str, limit: int = MAX_DEPTH) -> None:
    """:class:`JsonTooDeep` when the JSON text ``data`` nests deeper than ``limit`` (the text need not be valid)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return
    if b"\\" in raw:
        raw = _JSON_ESCAPE.sub(b"", raw)
    if b'"' in raw:
        raw = _JSON_STRING.sub(b"", raw)
    _depth_of_brackets(raw.translate(None, _NOT_BRACKET), limit, JsonTooDeep)


def loads_json(data: Any, limit: int = MAX_DEPTH) -> Any:
    """``orjson.loads`` of a document nested at most ``limit`` deep: :class:`JsonTooDeep` before parsing, else
    ``orjson.JSONDecodeError`` (a ValueError) when it is not JSON (both are ``orjson.JSONDecodeError``)."""
    if type(data) is bytes:  # a reader's line, once per frame: the bracket count inline (no call, no copy)
        if data.count(b"[") + data.count(b"{") > limit:
            check_json_depth(data, limit)
        return orjson.loads(data)
    if isinstance(data, (bytes, str)):
        check_json_depth(data, limit)
    elif isinstance(data, (bytearray, memoryview)):
        check_json_depth(bytes(data), limit)
    return orjson.loads(data)  # anything else: orjson's own JSONDecodeError, as before


def check_tree_depth(value: Any, limit: int = MAX_DEPTH) -> None:
    """:class:`TooDeep` when the parsed ``value`` nests dicts and lists deeper than ``limit`` (iteratively)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth >= limit:
            raise TooDeep(limit)
        stack.extend((child, depth + 1) for child in children)


def loads_toml(text: str, limit: int = MAX_DEPTH) -> dict[str, Any]:
    """``tomllib.loads`` of a document nested at most ``limit`` deep: :class:`TooDeep` (checked on the text
    before parsing, and on the table for dotted keys), else ``tomllib.TOMLDecodeError`` (a ValueError)."""
    raw = text.encode("utf-8", "surrogatepass")
    if raw.count(b"[") + raw.count(b"{") > limit:
        _depth_of_brackets(_TOML_NOISE.sub(b"", raw).translate(None, _NOT_BRACKET), limit)
    try:
        table = tomllib.loads(text)
    except RecursionError:  # a nesting the scan above could not see (it never should)
        raise TooDeep(limit) from None
    check_tree_depth(table, limit)
    return table
