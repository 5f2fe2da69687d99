"""The input rule (sim/trace/files.py, sim/trace/input_limits.py): standard input that is closed, a terminal
or a device is refused; a compressed input is capped while it is read, so a bomb is refused after a few
megabytes and an honest, very compressible trace is not; a line is capped; a document (grid file, store
JSON, calibration file) is a regular file of bounded size, and a byte that is not UTF-8 is named by line."""
from __future__ import annotations

import gzip
import io
import json
import os
import sys

import pytest

import sim.trace.files
from sim.trace import TraceError, load_trace
from sim.trace.files import check_stdin, open_binary, read_document
from sim.trace.input_limits import MAX_INPUT_ENV, MAX_RATIO_ENV, RATIO_FREE_BYTES
from tests.bad_input_helpers import GOOD_LINES, assert_rejected, invoke, lines_text
from tests.hostile_inputs_two import _bomb


def bytes_read_before_refusal(path) -> int:
    """How many decompressed bytes a reader got from ``path`` before it was refused (TraceError)."""
    got = 0
    with pytest.raises(TraceError, match="decompression bomb") as caught:
        with open_binary(path) as binary:
            while chunk := binary.read(1 << 16):
                got += len(chunk)
    assert caught.value.path == str(path)
    return got


@pytest.mark.parametrize("line", [b"\n", b"x"], ids=["newlines", "one-line"])
def test_a_gzip_bomb_is_refused_after_a_few_megabytes(tmp_path, line):
    path = tmp_path / "bomb.jsonl.gz"
    path.write_bytes(_bomb(line, 1024))  # 1 GiB in about 1 MB
    assert bytes_read_before_refusal(path) < RATIO_FREE_BYTES + (4 << 20)


def test_a_zstd_bomb_is_refused_after_a_few_megabytes(tmp_path):
    zstandard = pytest.importorskip("zstandard")
    path = tmp_path / "bomb.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor(level=3).compress(b"\n" * (256 << 20)))
    assert bytes_read_before_refusal(path) < RATIO_FREE_BYTES + (4 << 20)


def test_an_honest_trace_that_compresses_well_is_read_whole(tmp_path):
    line = '{{"id": "r{0}", "arrival": 0.0, "prompt": [{{"ref": "sys", "len": 7680}}, {{"ref": "q{0}", "len": 64}}], ' \
           '"output_len": 256}}\n'
    text = "".join(line.format(i) for i in range(100_000)).encode()  # 12 MB, past the ratio's free bytes
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(gzip.compress(text, compresslevel=9))
    assert len(text) > RATIO_FREE_BYTES and len(text) / path.stat().st_size > 15
    assert len(load_trace(path)) == 100_000


def test_the_limits_are_raised_by_their_environment_variables(tmp_path, monkeypatch):
    path = tmp_path / "bomb.jsonl.gz"
    path.write_bytes(_bomb(b" ", 12))  # 12 MiB of spaces: ratio about 1,000
    bytes_read_before_refusal(path)
    monkeypatch.setenv(MAX_RATIO_ENV, "5000")
    with pytest.raises(TraceError, match="no requests"):  # read whole: one line of spaces, no request
        load_trace(path)
    monkeypatch.setenv(MAX_INPUT_ENV, "0.001")
    with pytest.raises(TraceError, match=rf"holds over [\d.]+ MiB .*{MAX_INPUT_ENV}"):
        load_trace(path)


def test_standard_input_is_capped_too(monkeypatch):
    monkeypatch.setenv(MAX_INPUT_ENV, "0.001")
    result = invoke(["trace", "stats", "-"], stdin=b"\n" * (2 << 20))
    assert_rejected(result, "<stdin>", "holds over")


def test_a_line_past_the_cap_is_refused_with_its_number(tmp_path, monkeypatch):
    monkeypatch.setattr(sim.trace.files, "MAX_LINE_BYTES", 1024)
    path = tmp_path / "t.jsonl"
    path.write_bytes(lines_text(*GOOD_LINES[:1]).encode() + b"x" * 2000 + b"\n")
    with pytest.raises(TraceError, match=rf"^{path}:2: file: a line longer than"):
        load_trace(path)


def test_closed_standard_input_is_refused(monkeypatch):
    monkeypatch.setattr(sys, "stdin", None)
    with pytest.raises(TraceError, match="<stdin>: file: standard input is closed"):
        check_stdin()
    closed = io.TextIOWrapper(io.BytesIO())
    closed.close()
    monkeypatch.setattr(sys, "stdin", closed)
    with pytest.raises(TraceError, match="closed"):
        check_stdin()


def test_a_terminal_or_a_device_on_standard_input_is_refused(monkeypatch):
    controller, terminal = os.openpty()
    try:
        with open(terminal, closefd=False) as stream:
            monkeypatch.setattr(sys, "stdin", stream)
            with pytest.raises(TraceError, match="standard input is a terminal"):
                check_stdin()
        with open(os.devnull) as stream:
            monkeypatch.setattr(sys, "stdin", stream)
            with pytest.raises(TraceError, match="standard input is a device"):
                check_stdin()
    finally:
        os.close(controller)
        os.close(terminal)


def test_a_pipe_on_standard_input_is_read(monkeypatch):
    read, write = os.pipe()
    os.write(write, b"x")
    os.close(write)
    with open(read) as stream:
        monkeypatch.setattr(sys, "stdin", stream)
        check_stdin()  # no error


def test_a_document_is_a_bounded_regular_file_in_utf8(tmp_path):
    os.mkfifo(tmp_path / "fifo.toml")
    with pytest.raises(TraceError, match="is a FIFO, not a regular file$"):
        read_document(tmp_path / "fifo.toml", 100)
    (tmp_path / "big.json").write_text(json.dumps({"a": "x" * 200}))
    with pytest.raises(TraceError, match="larger than 100 bytes"):
        read_document(tmp_path / "big.json", 100)
    (tmp_path / "latin.toml").write_bytes(b'a = 1\nb = "caf\xe9"\n')
    with pytest.raises(TraceError, match=rf"^{tmp_path / 'latin.toml'}:2: file: not UTF-8 text: byte 0xe9 at column 9"):
        read_document(tmp_path / "latin.toml", 100)


@pytest.mark.parametrize("make", ["fifo", "zero"])
def test_a_grid_file_that_is_a_fifo_or_a_device_is_refused_not_waited_on(tmp_path, make):
    from tests.hostile_inputs_two import make_special

    make_special(tmp_path / "g.toml", make)
    assert_rejected(invoke(["grid", "--config", tmp_path / "g.toml"], seconds=20), f"{tmp_path / 'g.toml'}")
