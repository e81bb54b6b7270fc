"""Reads Iceberg v3 deletion vectors from Puffin files, in plain Python
from the Puffin and Iceberg specifications (no Iceberg library): the rows
of each data file a merge-on-read state table's deletion vectors delete.

positions(puffin_bytes, offset, length) -> set of row positions
"""
import struct
import zlib

MAGIC = b"\xd1\xd3\x39\x64"
NO_RUNS = 12346  # portable roaring: no run containers, a size field follows
RUNS = 12347  # portable roaring: run containers, size in the cookie's high half


def _roaring32(b, at):
    """Decodes one portable 32-bit roaring bitmap at b[at:]; returns its
    values and where it ends."""
    cookie = struct.unpack_from("<I", b, at)[0]
    at += 4
    run_flags = None
    if cookie & 0xFFFF == RUNS:
        size = (cookie >> 16) + 1
        nbytes = (size + 7) // 8
        run_flags = b[at:at + nbytes]
        at += nbytes
    elif cookie == NO_RUNS:
        size = struct.unpack_from("<I", b, at)[0]
        at += 4
    else:
        raise ValueError(f"not a portable roaring bitmap (cookie {cookie})")
    heads = [struct.unpack_from("<HH", b, at + 4 * i) for i in range(size)]
    at += 4 * size
    if run_flags is None or size >= 4:
        at += 4 * size  # container offsets
    out = set()
    for i, (key, card) in enumerate(heads):
        base, card = key << 16, card + 1
        if run_flags is not None and run_flags[i // 8] >> (i % 8) & 1:
            runs = struct.unpack_from("<H", b, at)[0]
            at += 2
            for _ in range(runs):
                start, length = struct.unpack_from("<HH", b, at)
                at += 4
                out.update(range(base + start, base + start + length + 1))
        elif card <= 4096:
            out.update(base + v for v in struct.unpack_from(f"<{card}H", b, at))
            at += 2 * card
        else:
            words = struct.unpack_from("<1024Q", b, at)
            at += 8192
            for w, word in enumerate(words):
                while word:
                    low = word & -word
                    out.add(base + w * 64 + low.bit_length() - 1)
                    word ^= low
    return out, at


def positions(data, offset, length):
    """The rows a deletion-vector-v1 blob at data[offset:offset+length]
    deletes."""
    blob = data[offset:offset + length]
    n = struct.unpack_from(">I", blob, 0)[0]
    body = blob[4:4 + n]
    if len(blob) != n + 8 or body[:4] != MAGIC:
        raise ValueError("not a deletion vector")
    if struct.unpack_from(">I", blob, 4 + n)[0] != zlib.crc32(body):
        raise ValueError("the deletion vector's checksum does not match")
    count = struct.unpack_from("<Q", body, 4)[0]
    at, out = 12, set()
    for _ in range(count):
        high = struct.unpack_from("<I", body, at)[0]
        values, at = _roaring32(body, at + 4)
        out.update((high << 32) | v for v in values)
    if at != len(body):
        raise ValueError("bytes after the deletion vector's bitmaps")
    return out
