"""The output rule (sim/atomic.py): hybridcache writes only to a regular file or a new path, never through a
FIFO, socket, device, directory or a symbolic link planted at its temporary file's name; checked before any
work (the options) and again at the rename (the writer itself)."""
from __future__ import annotations

import os
import socket
import stat

import pytest

import sim.atomic
from sim.atomic import (
    OutputPathError,
    atomic_open,
    atomic_write,
    atomic_write_many,
    check_output_dir,
    sweep_stale_temps,
    temp_files,
)
from tests.bad_input_helpers import assert_rejected, invoke
from tests.hostile_inputs_two import make_special

SPECIAL_KINDS = ["fifo", "socket", "null"]


def kind_of(path) -> int:
    return stat.S_IFMT(os.lstat(path).st_mode)


@pytest.mark.parametrize("kind", SPECIAL_KINDS)
def test_the_writer_refuses_a_special_file_and_leaves_it_as_it_was(tmp_path, kind):
    target = tmp_path / "out.json"
    make_special(target, kind)
    before = kind_of(target)
    with pytest.raises(OutputPathError, match=f"{target}: is a .*, not a regular file"):
        atomic_write(target, "{}\n")
    with pytest.raises(OutputPathError):
        with atomic_open(target) as f:
            f.write("x")
    assert kind_of(target) == before and not temp_files(tmp_path)


def test_a_link_to_a_device_is_refused_a_link_to_a_file_is_replaced(tmp_path):
    make_special(tmp_path / "dev", "null")
    os.symlink(tmp_path / "dev", tmp_path / "to-dev")
    with pytest.raises(OutputPathError, match="is a device"):
        atomic_write(tmp_path / "to-dev", "x")
    (tmp_path / "file").write_text("old")
    os.symlink(tmp_path / "file", tmp_path / "to-file")
    atomic_write(tmp_path / "to-file", "new")  # the link itself is replaced, not the file it named
    assert (tmp_path / "file").read_text() == "old" and (tmp_path / "to-file").read_text() == "new"


def test_a_target_replaced_by_a_fifo_while_the_output_is_computed_is_refused_at_the_rename(tmp_path):
    target = tmp_path / "t.jsonl"
    with pytest.raises(OutputPathError):
        with atomic_open(target) as f:
            f.write("a line\n")
            os.mkfifo(target)  # what another process might do meanwhile
    assert stat.S_ISFIFO(os.lstat(target).st_mode) and not temp_files(tmp_path)


def test_several_files_none_written_when_one_target_is_special(tmp_path):
    os.mkfifo(tmp_path / "b.csv")
    with pytest.raises(OutputPathError):
        atomic_write_many({tmp_path / "a.csv": "a\n", tmp_path / "b.csv": "b\n"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.csv"]


def test_a_link_planted_at_the_temporary_name_is_never_written_through(tmp_path, monkeypatch):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    names = iter(["deadbeef", "00000001", "deadbeef", "00000002"])  # each first guess is a planted link
    monkeypatch.setattr(sim.atomic.secrets, "token_hex", lambda n: next(names))
    for name in ("out.txt", "out2.txt"):
        os.symlink(victim, tmp_path / f".{name}.{os.getpid()}.deadbeef.tmp")
    atomic_write(tmp_path / "out.txt", "mine")
    assert victim.read_text() == "precious" and (tmp_path / "out.txt").read_text() == "mine"
    with atomic_open(tmp_path / "out2.txt") as f:  # the streaming writer draws past it too
        f.write("also mine")
    assert victim.read_text() == "precious" and (tmp_path / "out2.txt").read_text() == "also mine"


def test_outputs_get_the_usual_permissions_not_a_temporary_files(tmp_path):
    umask = os.umask(0o022)
    os.umask(umask)
    atomic_write(tmp_path / "out.txt", "x")
    assert stat.S_IMODE(os.stat(tmp_path / "out.txt").st_mode) == 0o666 & ~umask


def test_stale_temporary_files_of_both_namings_are_swept_and_links_left(tmp_path):
    dead_pid = 2**22 + 12345  # above Linux's pid_max default: no such process
    new, old = tmp_path / f".a.csv.{dead_pid}.0123abcd.tmp", tmp_path / f".b.csv.{dead_pid}.tmp"
    new.write_text("half")
    old.write_text("half")
    os.symlink(tmp_path / "elsewhere", tmp_path / f".c.csv.{dead_pid}.0123abcd.tmp")
    assert sorted(p.name for p in sweep_stale_temps(tmp_path)) == sorted([new.name, old.name])
    assert [p.name for p in temp_files(tmp_path)] == [f".c.csv.{dead_pid}.0123abcd.tmp"]


def test_a_folder_to_write_into_must_be_one(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputPathError, match="is a file, not a directory"):
        check_output_dir(tmp_path / "file")
    (tmp_path / "out").mkdir()
    os.mkfifo(tmp_path / "out" / "steps.csv")
    with pytest.raises(OutputPathError, match="steps.csv: is a FIFO"):
        check_output_dir(tmp_path / "out", ("requests.csv", "steps.csv"))


@pytest.mark.parametrize("kind", SPECIAL_KINDS)
@pytest.mark.parametrize("command", ["gen", "import", "calibrate"])
def test_every_output_option_refuses_a_special_file_before_any_work(tmp_path, kind, command, trace_file):
    target = tmp_path / "o"
    make_special(target, kind)
    args = {"gen": ["trace", "gen", "s3", "-o", target],
            "import": ["trace", "import", "azure", trace_file, "-o", target],
            "calibrate": ["calibrate", "--trace", trace_file, "-o", target]}[command]
    assert_rejected(invoke(args), str(target), "-o")
    assert kind_of(target) == {"fifo": stat.S_IFIFO, "socket": stat.S_IFSOCK, "null": stat.S_IFCHR}[kind]


def test_an_output_in_a_missing_folder_is_refused_before_any_work(tmp_path):
    assert_rejected(invoke(["trace", "gen", "s3", "-o", tmp_path / "nowhere" / "t.jsonl"]),
                    f"{tmp_path / 'nowhere'} does not exist")


@pytest.fixture
def trace_file(tmp_path):
    from tests.bad_input_helpers import GOOD_LINES, lines_text

    path = tmp_path / "t.jsonl"
    path.write_text(lines_text(*GOOD_LINES))
    return path


def test_sockets_are_refused_as_inputs_too(tmp_path):
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "sock"))
    server.close()
    assert_rejected(invoke(["trace", "stats", tmp_path / "sock"]), f"{tmp_path / 'sock'}", "a socket")
