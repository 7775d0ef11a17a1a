"""Where a request's body ends, read strictly.

The engine never sees a client's bytes: the proxy reads each request whole and sends
the engine a request of its own (one connection per call, its own Content-Length), so
no framing trick can make the engine read a request the proxy did not check. What is
left is the proxy's own reading of a keep-alive connection, which this makes
unambiguous: a request with both Content-Length and Transfer-Encoding, either header
twice, a transfer coding other than ``chunked``, a length or chunk size that is not
plain digits, a chunk without its CRLF, a trailer, or a malformed header block is
refused (400, and the connection is closed, since where the next request starts is
then unknown).
"""

from __future__ import annotations

import re
from email.message import Message
from io import BufferedIOBase

from .policy import MAX_BODY, Refused

_LENGTH = re.compile(r"[0-9]{1,10}")
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,8})(;[^\r\n]*)?\r\n")
_MAX_LINE = 1024


def _exact(rfile: BufferedIOBase, size: int) -> bytes:
    data = rfile.read(size)
    if len(data) != size:
        raise Refused("the body ended before its length", 400)
    return data


def _chunked(rfile: BufferedIOBase) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        match = _CHUNK_SIZE.fullmatch(rfile.readline(_MAX_LINE))
        if match is None:
            raise Refused("a chunk size line is malformed", 400)
        size = int(match[1], 16)
        if size == 0:
            if rfile.readline(_MAX_LINE) != b"\r\n":
                raise Refused("a chunked body carries a trailer or lacks its last CRLF", 400)
            return b"".join(chunks)
        total += size
        if total > MAX_BODY:
            raise Refused("the request body is too large", 400)
        chunks.append(_exact(rfile, size))
        if rfile.read(2) != b"\r\n":
            raise Refused("a chunk lacks its CRLF", 400)


def read_body(headers: Message, rfile: BufferedIOBase) -> bytes:
    """The request's whole body (b"" when it has none), at most MAX_BODY bytes; raises
    Refused (400) for any framing listed above."""
    if headers.defects:
        raise Refused("the header block is malformed", 400)
    encodings = headers.get_all("Transfer-Encoding") or []
    lengths = headers.get_all("Content-Length") or []
    if encodings and lengths:
        raise Refused("a request has both Content-Length and Transfer-Encoding", 400)
    if len(encodings) > 1 or len(lengths) > 1:
        raise Refused("a framing header is repeated", 400)
    if encodings:
        if encodings[0].strip().lower() != "chunked":
            raise Refused("the only transfer coding taken is chunked", 400)
        return _chunked(rfile)
    if not lengths:
        return b""
    if not _LENGTH.fullmatch(lengths[0].strip()):
        raise Refused("Content-Length is not a number", 400)
    length = int(lengths[0])
    if length > MAX_BODY:
        raise Refused("the request body is too large", 400)
    return _exact(rfile, length)
