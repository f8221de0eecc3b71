"""Reading an IOPDDL file: gzip or plain (told by content), then the fast array reader or the exact JSON path.

A production instance is 30 to 95 MB of JSON. Parsing it into Python objects
(orjson) and flattening them took 5 to 6 s on this project's shared 2-core
machine, more than a 3 s limit. ``read_instance`` reads a compact document's
five list-of-rows members straight into int64 arrays (numpy's C parser over
the bytes, rows told by their brackets) and hands them to the same
``validate``; a document it does not recognise to the letter (whitespace,
escapes, a row that is not a flat list of integers, a value at the edge of
int64) goes the exact path, whose errors name the field.
"""

from __future__ import annotations

import warnings
import zlib
from os import PathLike
from pathlib import Path

import numpy as np
import orjson

from spyreopt.errors import FormatError
from spyreopt.formats.iopddl_arrays import FIELDS, INT64_MAX, INT64_MIN, Instance, Rows, validate

MAX_QUOTES = 64  # a contest document has a dozen keys and a name; more strings than this go the exact path
_MARK = b"@rows:"  # a placeholder's prefix; a document whose strings start so goes the exact path


def read_bytes(path: str | PathLike) -> bytes:
    """The file's bytes, gunzipped when they start with the gzip magic number."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise FormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not raw:
        raise FormatError(f"{path}: the file is empty")
    if raw[:2] != b"\x1f\x8b":
        return raw
    parts = []
    try:
        while raw:  # a gzip file may hold several members
            d = zlib.decompressobj(wbits=31)
            parts.append(d.decompress(raw))
            if not d.eof:
                raise EOFError("compressed file ended before the end-of-stream marker was reached")
            raw = d.unused_data
    except (EOFError, zlib.error) as exc:
        raise FormatError(f"{path}: not a complete gzip file ({type(exc).__name__}: {exc})") from None
    return b"".join(parts)


def parse_json(text: bytes, path: str | PathLike) -> dict:
    """The JSON document, or FormatError naming the file."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise FormatError(f"{path}: not valid JSON: {exc}") from None


def read_json(path: str | PathLike) -> dict:
    """The JSON document of a plain or gzipped file."""
    return parse_json(read_bytes(path), path)


def read_instance(path: str | PathLike) -> Instance:
    """The validated arrays of an instance file: the fast reader when the document is compact, else the exact
    JSON path (both through ``validate``, so they accept and reject the same documents)."""
    text = read_bytes(path)
    fast = _fast(text.strip())
    if fast is not None:
        skeleton, sections = fast
        return validate(orjson.loads(skeleton), sections)
    doc = parse_json(text, path)
    if not isinstance(doc, dict):
        raise FormatError(f"{path}: not an IOPDDL document (expected an object with a 'problem' member)")
    return validate(doc)


def _fast(text: bytes) -> tuple[bytes, dict[str, Rows]] | None:
    """The document with each list-of-rows member replaced by a placeholder string, and those members' rows;
    None when the text is not compact JSON of the expected shape (the exact path then reads it)."""
    if b"\\" in text or text.count(b'"') > MAX_QUOTES or any(c in text for c in (b" ", b"\n", b"\t", b"\r")):
        return None  # whitespace could sit inside the name: the exact path is right for every such file
    quotes, at = [], text.find(b'"')
    while at >= 0:
        quotes.append(at)
        at = text.find(b'"', at + 1)
    strings = [text[x + 1 : y] for x, y in zip(quotes[0::2], quotes[1::2])]
    if len(quotes) % 2 or any(c in s or s.startswith(_MARK) for s in strings for c in (b"[", b"]")):
        return None
    a = np.frombuffer(text, np.uint8)
    opens, closes = np.flatnonzero(a == 91), np.flatnonzero(a == 93)
    if len(opens) != len(closes) or not len(opens) or opens[0] == 0:
        return None
    found, pieces, last = [], [], 0
    for o in opens[a[opens - 1] == 58].tolist():  # a list that is a member's value (after ':')
        got = _rows(text, a, opens, closes, o)
        if got is None:
            return None
        found.append(got[0])
        pieces += [text[last:o], b'"' + _MARK + str(len(found) - 1).encode() + b'"']
        last = got[1] + 1
    pieces.append(text[last:])
    skeleton = b"".join(pieces)
    try:
        doc = orjson.loads(skeleton)
        where = {f: _field(doc, f) for f in FIELDS}
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    marks = [m for m in where.values() if isinstance(m, str) and m.startswith(_MARK.decode())]
    if len(marks) != len(FIELDS) or len(set(marks)) != len(found):
        return None
    return skeleton, {f: found[int(m[len(_MARK) :])] for f, m in where.items()}


def _field(doc: dict, path: str):
    for key in path.split("."):
        doc = doc[key]
    return doc


def _rows(text: bytes, a: np.ndarray, opens: np.ndarray, closes: np.ndarray, o: int) -> tuple[Rows, int] | None:
    """The rows of the list of flat integer lists opening at ``o``, and its closing index; None if it is not one."""
    if a[o + 1] == 93:  # an empty list
        return (np.zeros(0, np.int64), np.zeros(0, np.int64)), o + 1
    i = int(np.searchsorted(opens, o)) + 1  # first row's opening bracket
    if i >= len(opens) or opens[i] != o + 1:
        return None
    j = int(np.searchsorted(closes, o))
    # rows [ ... ] joined by "],[" and ended by "]]": the closing bracket of the list follows its last row's
    end_pair = np.flatnonzero(closes[j + 1 :] == closes[j:-1] + 1) if len(closes) > j + 1 else np.zeros(0, np.int64)
    if not len(end_pair):
        return None
    last = j + int(end_pair[0])  # index of the last row's closing bracket
    ro, rc = opens[i : i + (last - j + 1)], closes[j : last + 1]
    if (
        len(ro) != len(rc)
        or (rc <= ro).any()
        or (len(ro) > 1 and ((ro[1:] != rc[:-1] + 2).any() or (a[rc[:-1] + 1] != 44).any()))
    ):
        return None
    end = int(rc[-1]) + 1
    if i + len(ro) < len(opens) and opens[i + len(ro)] < end:
        return None
    body = text[o + 1 : end].translate(_NO_BRACKETS)
    commas = np.flatnonzero(a[o + 1 : end] == 44) + o + 1
    lengths = np.searchsorted(commas, rc) - np.searchsorted(commas, ro) + 1
    lengths[rc == ro + 1] = 0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numpy warns (or raises) and stops at the first text that is no integer
            flat = np.fromstring(body, dtype=np.int64, sep=",")
    except ValueError:
        return None
    if len(flat) != int(lengths.sum()) or (lengths == 0).any():
        return None
    if len(flat) and ((flat == INT64_MAX).any() or (flat == INT64_MIN).any()):
        return None  # the C parser saturates on overflow: the exact path tells a true extreme from a too-large one
    return (flat, lengths.astype(np.int64)), end


_NO_BRACKETS = bytes.maketrans(b"[]", b"  ")
