"""No input makes the reader hang or exhaust memory: bombs, huge lines, endless files get typed errors."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import zstandard
from test_trace_support import INTERRUPT, SIGKILL, copy_bundle, read_lines, shard_path, write_lines

from contracts.trace.closure import check_bundle
from contracts.trace.errors import TraceLimitExceeded
from contracts.trace.reader import ReadLimits, read_bundle
from contracts.trace.shards import decode_shard
from contracts.trace_format import encode_record


def rle_bomb(blocks: int) -> bytes:
    """A zstd frame of RLE blocks, 128 KiB each from 4 bytes: ~32000x expansion."""
    header = b"\x28\xb5\x2f\xfd" + bytes([0x00, 7 << 3])  # no checksum, window 128 KiB
    size = 128 * 1024
    block = ((size << 3) | (1 << 1)).to_bytes(3, "little") + b"\x00"
    last = ((size << 3) | (1 << 1) | 1).to_bytes(3, "little") + b"\x00"
    return header + block * (blocks - 1) + last


def test_rle_bomb_is_refused_before_decompressing() -> None:
    bomb = rle_bomb(200_000)  # 800 KB on disk, 26 GB decompressed
    start = time.monotonic()
    with pytest.raises(TraceLimitExceeded, match="over the limit"):
        decode_shard(bomb, 1, max_decompressed=ReadLimits().max_shard_decompressed_bytes)
    assert time.monotonic() - start < 5


def test_compressed_bomb_stops_at_the_cap() -> None:
    body = b"\x00" * (64 * 1024 * 1024)
    data = zstandard.ZstdCompressor(write_checksum=True).compress(encode_record("raw_payload:1", body))
    assert len(data) < 64 * 1024
    with pytest.raises(TraceLimitExceeded):
        decode_shard(data, 1, max_decompressed=4 * 1024 * 1024)


def test_bomb_shard_in_a_bundle_is_invalid(tmp_path: Path) -> None:
    bundle = copy_bundle(INTERRUPT, tmp_path / "b")
    shard_path(bundle).write_bytes(rle_bomb(100_000))
    verdict = check_bundle(bundle)
    assert verdict.verdict == "invalid" and "limit" in (verdict.error or "")


def test_a_1gb_line_is_refused_without_reading_it(tmp_path: Path) -> None:
    bundle = copy_bundle(SIGKILL, tmp_path / "b")
    log = bundle / "trace.jsonl"
    with open(log, "r+b") as f:  # sparse: a 1 GiB last line without newline
        f.seek(0, os.SEEK_END)
        f.write(b'{"schema_version":3,"pad":"')
        f.truncate(f.tell() + (1 << 30))
    start = time.monotonic()
    verdict = check_bundle(bundle)
    assert verdict.verdict == "invalid" and "longer than" in (verdict.error or "")
    assert time.monotonic() - start < 10


def test_line_limit_is_configurable(tmp_path: Path) -> None:
    bundle = copy_bundle(INTERRUPT, tmp_path / "b")
    with pytest.raises(TraceLimitExceeded, match="longer than 500 bytes"):
        read_bundle(bundle, ReadLimits(max_line_bytes=500))


def test_event_count_limit(tmp_path: Path) -> None:
    bundle = copy_bundle(INTERRUPT, tmp_path / "b")
    with pytest.raises(TraceLimitExceeded, match="more than 5 trace events"):
        read_bundle(bundle, ReadLimits(max_events=5))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_shard_that_never_ends_is_refused(tmp_path: Path) -> None:
    bundle = copy_bundle(SIGKILL, tmp_path / "b")
    shard_path(bundle).unlink()
    os.mkfifo(shard_path(bundle))  # opening it would block forever
    verdict = check_bundle(bundle)
    assert verdict.verdict == "invalid" and "not a regular file" in (verdict.error or "")


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_an_endless_event_log_is_refused(tmp_path: Path) -> None:
    bundle = copy_bundle(SIGKILL, tmp_path / "b")
    (bundle / "trace.jsonl").unlink()
    (bundle / "trace.jsonl").symlink_to("/dev/zero")
    verdict = check_bundle(bundle)
    assert verdict.verdict == "invalid" and "not a regular file" in (verdict.error or "")


def test_huge_manifest_is_refused(tmp_path: Path) -> None:
    bundle = copy_bundle(INTERRUPT, tmp_path / "b")
    with open(bundle / "manifest.json", "r+b") as f:
        f.truncate(50 * 1024 * 1024)
    verdict = check_bundle(bundle)
    assert verdict.verdict == "invalid" and "limit" in (verdict.error or "")


def test_shard_file_size_limit(tmp_path: Path) -> None:
    bundle = copy_bundle(INTERRUPT, tmp_path / "b")
    with pytest.raises(TraceLimitExceeded):
        read_bundle(bundle, ReadLimits(max_shard_file_bytes=1000))


def test_weird_event_shapes_are_typed_errors(tmp_path: Path) -> None:
    shapes: list[object] = [
        [],
        "x",
        {"schema_version": 3, "seq": 1, "wall_time_unix_ms": 1, "rollout_id": "r", "payload": []},
        {"schema_version": 3, "seq": 1, "wall_time_unix_ms": 1, "rollout_id": "r", "payload": {"type": 7}},
        {"schema_version": "3", "seq": 1, "wall_time_unix_ms": 1, "rollout_id": "r", "payload": {}},
        {"schema_version": 3, "seq": True, "wall_time_unix_ms": 1, "rollout_id": "r", "payload": {}},
    ]
    for n, shape in enumerate(shapes):
        bundle = copy_bundle(INTERRUPT, tmp_path / f"b{n}")
        lines = read_lines(bundle)
        lines[3] = shape  # type: ignore[call-overload]
        write_lines(bundle, lines, renumber=False)
        verdict = check_bundle(bundle)
        assert verdict.verdict == "invalid", (shape, verdict.to_json())
        assert verdict.error and "line 4" in verdict.error
