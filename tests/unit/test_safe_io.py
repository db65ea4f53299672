"""The one bounded reader (contracts.safe_read) and the one safe writer and copy (contracts.safe_dir).

Each case plants what a hostile program would: a link to ``/dev/zero`` or to a secret, a FIFO with no
writer, a file growing while it is read, a directory or a link where a file or a record goes, a full disk.
The reads never block (a FIFO test would hang forever, so each runs within the suite's timeout only because
the reader never opens it for a blocking read), never follow, never read more than their bound.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from contracts import safe_read
from contracts.safe_dir import CopyBudget, DiskFull, SafeDir, Slot, WriteError, write_file
from contracts.safe_read import Refused, TooLarge


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A tree another program wrote: a file, links to /dev/zero, /etc and a secret, a FIFO, a big file."""
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("hello")
    (tmp_path / "secret").write_text("root:x:secret")
    (src / "zero").symlink_to("/dev/zero")
    (src / "etc").symlink_to("/etc")
    (src / "sub" / "shadow").symlink_to(tmp_path / "secret")
    os.mkfifo(src / "fifo")
    (src / "big").write_bytes(b"x" * 3000)
    return src


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("zero", "is a symbolic link (not followed)"),
        ("fifo", "is a FIFO (named pipe), not a regular file"),
        ("sub", "is a directory, not a regular file"),
        ("big", "is 3000 bytes, more than the 100 read of it"),
    ],
)
def test_the_bounded_reader_refuses_what_is_not_a_small_regular_file(planted: Path, name: str, reason: str) -> None:
    with pytest.raises(Refused) as caught:
        safe_read.read_bounded(planted / name, 100)
    assert caught.value.reason == reason
    assert str(caught.value) == f"{planted / name} {reason}"
    assert isinstance(caught.value, OSError)  # every `except OSError` keeps working


def test_a_device_named_directly_is_refused_without_being_read() -> None:
    with pytest.raises(Refused, match="a character device, not a regular file"):
        safe_read.read_bounded("/dev/zero", 100)


def test_below_a_held_directory_no_component_is_followed(planted: Path) -> None:
    fd = safe_read.open_dir(planted)
    try:
        assert safe_read.read_bounded("a.txt", 100, dir_fd=fd) == b"hello"
        with pytest.raises(Refused, match="symbolic link"):
            safe_read.read_bounded("etc/passwd", 10_000, dir_fd=fd)  # a link in the middle of the path
        with pytest.raises(Refused, match="symbolic link"):
            safe_read.read_bounded("sub/shadow", 100, dir_fd=fd)
        with pytest.raises(ValueError, match=r"without '\.\.'"):
            safe_read.read_bounded("../secret", 100, dir_fd=fd)
    finally:
        os.close(fd)


def test_a_users_own_link_is_followed_only_when_asked(planted: Path, tmp_path: Path) -> None:
    (tmp_path / "mine").symlink_to(planted / "a.txt")
    assert safe_read.read_bounded(tmp_path / "mine", 100, follow=True) == b"hello"
    with pytest.raises(Refused):
        safe_read.read_bounded(planted / "zero", 100, follow=True)  # still never a device


def test_a_file_growing_while_it_is_streamed_is_cut_off(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"line\n" * 10)
    with safe_read.open_bounded(path, 100) as fh, open(path, "ab") as writer:
        assert fh.readline() == b"line\n"
        writer.write(b"more\n" * 100)
        writer.flush()
        with pytest.raises(TooLarge, match="grew past 100 bytes"):
            fh.read()


def test_entries_are_listed_without_following(planted: Path) -> None:
    kinds = {name: safe_read.kind_of(mode) for name, mode in safe_read.entries(planted)}
    assert kinds["zero"] == kinds["etc"] == "a symbolic link"
    assert kinds["fifo"] == "a FIFO (named pipe)" and kinds["sub"] == "a directory"
    with pytest.raises(TooLarge, match="more than 3"):
        safe_read.entries(planted, limit=3)


# --- the writer ------------------------------------------------------------------------------------------


def test_a_link_planted_where_a_file_goes_is_replaced_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / "junit.xml").symlink_to(victim)
    (out / "checks.json").mkdir()  # a directory planted in a file's place
    (out / "checks.json" / "x").write_text("")
    with SafeDir.open(out) as held:
        held.write("junit.xml", b"<xml/>")
        held.write("checks.json", b"[]")
    assert victim.read_text() == "precious"
    assert not (out / "junit.xml").is_symlink() and (out / "junit.xml").read_bytes() == b"<xml/>"
    assert (out / "checks.json").read_bytes() == b"[]"
    assert sorted(p.name for p in out.iterdir()) == ["checks.json", "junit.xml"]  # no temporary left


def test_a_link_planted_where_a_directory_goes_is_replaced(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "sessions").symlink_to(elsewhere)
    (out / "record").symlink_to(elsewhere)
    with SafeDir.open(out) as held:
        with held.child("sessions") as sessions:
            sessions.write("a", b"1")
        with held.replacing("record") as fresh:
            fresh.write("record.json", b"{}")
    assert list(elsewhere.iterdir()) == []
    assert (out / "sessions" / "a").is_file() and not (out / "sessions").is_symlink()
    assert (out / "record" / "record.json").is_file() and not (out / "record").is_symlink()


def test_a_record_is_swapped_in_whole_or_not_at_all(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "rec").mkdir(parents=True)
    (out / "rec" / "stale.txt").write_text("old")
    os.mkfifo(out / "rec" / "stderr.txt")  # a FIFO in the old record is removed, never opened
    with SafeDir.open(out) as held:
        with held.replacing("rec") as fresh:
            fresh.write("new.txt", b"new")
        assert sorted(p.name for p in (out / "rec").iterdir()) == ["new.txt"]
        with pytest.raises(RuntimeError), held.replacing("rec") as fresh:
            fresh.write("half.txt", b"x")
            raise RuntimeError("the save broke half-way")
    assert sorted(p.name for p in (out / "rec").iterdir()) == ["new.txt"]  # the earlier record stays whole
    assert sorted(p.name for p in out.iterdir()) == ["rec"]  # and no temporary is left


def test_slot_and_write_file(tmp_path: Path) -> None:
    with SafeDir.open(tmp_path / "a" / "b") as held:
        slot = Slot(held, "r")
        assert slot.path == tmp_path / "a" / "b" / "r"
    (tmp_path / "link").symlink_to(tmp_path / "victim")
    write_file(tmp_path / "link", b"data")
    assert not (tmp_path / "victim").exists() and (tmp_path / "link").read_bytes() == b"data"


def test_a_full_disk_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int, data: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with SafeDir.open(tmp_path / "report") as held:
        monkeypatch.setattr(os, "write", full)
        with pytest.raises(DiskFull, match=r"the disk holding .*report is full \(mount point /.*\); .*wire.jsonl"):
            held.write("wire.jsonl", b"x")
        monkeypatch.undo()
    assert list((tmp_path / "report").iterdir()) == []  # the temporary went with the failure


def test_anything_else_in_the_way_of_a_directory_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "sessions").write_text("")
    with SafeDir.open(tmp_path) as held, pytest.raises(WriteError, match="sessions is a regular file"):
        held.child("sessions")


# --- the copy --------------------------------------------------------------------------------------------


def test_the_copy_follows_no_link_reads_no_special_file_and_names_each(planted: Path, tmp_path: Path) -> None:
    budget = CopyBudget(1000)
    with SafeDir.open(tmp_path / "out") as held:
        assert held.copy_in(planted, "copy", budget)
    copy = tmp_path / "out" / "copy"
    assert sorted(p.name for p in copy.rglob("*")) == ["a.txt", "big", "sub"]
    assert (copy / "big").stat().st_size == 995  # cut where the budget ran out (1000 - 5 of a.txt)
    notes = "\n".join(budget.not_copied)
    for name, why in [
        ("zero", "is a symbolic link (not followed)"),
        ("etc", "is a symbolic link (not followed)"),
        ("sub/shadow", "is a symbolic link (not followed)"),
        ("fifo", "is a FIFO (named pipe)"),
    ]:
        assert f"{planted}/{name}: {why}; not copied" in notes, notes
    assert "big: 3000 bytes, cut at 995 (the record's copy budget)" in notes
    assert "secret" not in "".join(p.read_text() for p in copy.rglob("*") if p.is_file())


def test_the_copy_of_a_link_itself_is_refused(planted: Path, tmp_path: Path) -> None:
    budget = CopyBudget(1000)
    with SafeDir.open(tmp_path / "out") as held:
        assert not held.copy_in(planted / "etc", "etc", budget)
        assert not held.copy_in(planted / "nothing", "nothing", budget)  # absent: nothing to say
    assert budget.not_copied == [f"{planted}/etc: is a symbolic link (not followed)"]
    assert list((tmp_path / "out").iterdir()) == []


def test_the_copy_is_bounded_in_entries_and_depth(tmp_path: Path) -> None:
    src = tmp_path / "src"
    deep = src.joinpath(*["d"] * 5)
    deep.mkdir(parents=True)
    for n in range(20):
        (src / f"f{n}").write_text("x")
    budget = CopyBudget(10_000, entries_left=10, max_depth=3)
    with SafeDir.open(tmp_path / "out") as held:
        held.copy_in(src, "copy", budget)
    notes = "\n".join(budget.not_copied)
    assert "more entries than the record keeps" in notes and "nested deeper than 3" in notes
    assert sum(1 for _ in (tmp_path / "out").rglob("*")) <= 11


def test_names_another_program_chose_are_noted_without_control_characters(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "\x1b]52;c;evil\x07").symlink_to("/dev/zero")
    budget = CopyBudget(100)
    with SafeDir.open(tmp_path / "out") as held:
        held.copy_in(src, "copy", budget)
    assert budget.not_copied and "\x1b" not in budget.not_copied[0] and "\x07" not in budget.not_copied[0]
    assert "\\x1b]52;c;evil\\x07" in budget.not_copied[0]
