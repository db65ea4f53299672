"""Bounded decoding of payload shards: zstd frames walked block by block, then the record framing.

The decompressed size is bounded before it is produced: input is fed to the decompressor in slices whose
worst-case output (from the block headers) is small, so a decompression bomb stops at the cap.
"""

from __future__ import annotations

from dataclasses import dataclass

import zstandard

from contracts.trace.errors import TraceInvalid, TraceLimitExceeded
from contracts.trace_format import RECORD_HEADER_SIZE, unpack_record_header

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_BLOCK_MAX = 128 * 1024
# Worst-case decompressed bytes fed to the decompressor per call.
_FEED_BOUND = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ShardInfo:
    shard: int
    compressed_bytes: int
    decompressed_bytes: int
    frames: int
    finished: bool  # every frame complete (the last one included)
    has_checksum: bool  # every frame carries the content checksum
    records: int


@dataclass(slots=True)
class DecodedShard:
    info: ShardInfo
    data: bytes
    records: dict[str, tuple[int, int]]  # id -> (start, end) in data

    def body(self, record_id: str) -> bytes | None:
        span = self.records.get(record_id)
        return None if span is None else self.data[span[0] : span[1]]


def _is_skippable(data: bytes, pos: int) -> bool:
    return data[pos + 1 : pos + 4] == b"\x2a\x4d\x18" and (data[pos] & 0xF0) == 0x50


def _exact_block_bytes(data: bytes) -> int:
    """Decompressed bytes of the raw and RLE blocks (exact from headers): refuses RLE bombs before any output."""
    n = len(data)
    pos = 0
    total = 0
    while pos + 5 <= n and data[pos : pos + 4] == _ZSTD_MAGIC:
        try:
            p = pos + zstandard.frame_header_size(data[pos : pos + 5])
            has_checksum = zstandard.get_frame_parameters(data[pos:p]).has_checksum
        except zstandard.ZstdError:
            return total
        while p + 3 <= n:
            hdr = data[p] | (data[p + 1] << 8) | (data[p + 2] << 16)
            btype = (hdr >> 1) & 3
            bsize = hdr >> 3
            if btype != 2:
                total += bsize
            p += 3 + (1 if btype == 1 else bsize)
            if hdr & 1:
                p += 4 if has_checksum else 0
                break
        pos = p
    return total


def decode_shard(data: bytes, shard: int, *, max_decompressed: int) -> DecodedShard:
    """Decode every frame of a shard; the last frame may be unfinished (reported in ``info.finished``)."""
    n = len(data)
    exact = _exact_block_bytes(data)
    if exact > max_decompressed:
        raise TraceLimitExceeded(
            f"decompress shard {shard}: at least {exact} decompressed bytes, over the limit of {max_decompressed}"
        )
    pos = 0
    out: list[bytes] = []
    total = 0
    frames = 0
    finished = True
    all_checksum = True
    while pos < n:
        if n - pos >= 8 and _is_skippable(data, pos):
            size = int.from_bytes(data[pos + 4 : pos + 8], "little")
            pos += 8 + size
            continue
        if data[pos : pos + 4] != _ZSTD_MAGIC[: min(4, n - pos)]:
            raise TraceInvalid(f"decompress shard {shard}: Unknown frame descriptor")
        frames += 1
        if n - pos < 5:
            finished = False  # header cut short: a writer killed right after opening the shard
            break
        try:
            header_size = zstandard.frame_header_size(data[pos : pos + 5])
            if pos + header_size > n:
                finished = False
                break
            params = zstandard.get_frame_parameters(data[pos : pos + header_size])
        except zstandard.ZstdError as exc:
            raise TraceInvalid(f"decompress shard {shard}: {exc}") from exc
        has_checksum = bool(params.has_checksum)
        all_checksum = all_checksum and has_checksum
        block_cap = min(_BLOCK_MAX, max(params.window_size, 1)) if params.window_size else _BLOCK_MAX
        dobj = zstandard.ZstdDecompressor().decompressobj()
        frame_start = pos
        feed_from = pos
        feed_bound = 0
        p = pos + header_size
        frame_done = False
        while True:
            if p + 3 > n:
                break
            hdr = data[p] | (data[p + 1] << 8) | (data[p + 2] << 16)
            last = hdr & 1
            btype = (hdr >> 1) & 3
            bsize = hdr >> 3
            if btype == 3:
                raise TraceInvalid(f"decompress shard {shard}: Corrupted block detected")
            csize = 1 if btype == 1 else bsize
            if btype == 2:
                feed_bound += block_cap
            else:
                feed_bound += bsize
            if p + 3 + csize > n:
                break
            p += 3 + csize
            if last:
                if has_checksum:
                    if p + 4 > n:
                        break
                    p += 4
                frame_done = True
                break
            if feed_bound >= _FEED_BOUND:
                total = _feed(dobj, data, feed_from, p, out, total, shard, max_decompressed)
                feed_from = p
                feed_bound = 0
        end = p
        total = _feed(dobj, data, feed_from, end, out, total, shard, max_decompressed)
        if not frame_done:
            finished = False
            pos = n
            break
        if not dobj.eof:
            raise TraceInvalid(f"decompress shard {shard}: frame at byte {frame_start} did not end where its blocks do")
        pos = end
    raw = b"".join(out)
    records, consumed = _parse_records(raw, shard, tolerate_partial_tail=not finished)
    info = ShardInfo(
        shard=shard,
        compressed_bytes=n,
        decompressed_bytes=len(raw),
        frames=frames,
        finished=finished,
        has_checksum=all_checksum and frames > 0,
        records=len(records),
    )
    return DecodedShard(info=info, data=raw[:consumed] if consumed != len(raw) else raw, records=records)


def _feed(
    dobj: zstandard.ZstdDecompressionObj,
    data: bytes,
    start: int,
    end: int,
    out: list[bytes],
    total: int,
    shard: int,
    cap: int,
) -> int:
    if end <= start:
        return total
    try:
        chunk = dobj.decompress(data[start:end])
    except zstandard.ZstdError as exc:
        msg = str(exc).removeprefix("zstd decompress error: ")
        raise TraceInvalid(f"decompress shard {shard}: {msg}") from exc
    total += len(chunk)
    if total > cap:
        raise TraceLimitExceeded(f"decompress shard {shard}: more than {cap} decompressed bytes")
    out.append(chunk)
    return total


def _parse_records(raw: bytes, shard: int, *, tolerate_partial_tail: bool) -> tuple[dict[str, tuple[int, int]], int]:
    records: dict[str, tuple[int, int]] = {}
    pos = 0
    n = len(raw)
    while pos < n:
        if pos + RECORD_HEADER_SIZE > n:
            if tolerate_partial_tail:
                break
            raise TraceInvalid(f"truncated payload record header in shard {shard}")
        id_len, body_len = unpack_record_header(raw, pos)
        id_start = pos + RECORD_HEADER_SIZE
        body_start = id_start + id_len
        end = body_start + body_len
        if end > n:
            if tolerate_partial_tail:
                break
            raise TraceInvalid(f"truncated payload record in shard {shard}")
        try:
            rid = raw[id_start:body_start].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TraceInvalid(f"invalid payload id in shard {shard}: {exc}") from exc
        if rid in records:
            raise TraceInvalid(f"duplicate payload {rid} in shard {shard}")
        records[rid] = (body_start, end)
        pos = end
    return records, pos
