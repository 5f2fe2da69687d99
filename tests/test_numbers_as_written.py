"""Numbers are taken as the user wrote them, by every command and in every list: ASCII decimal digits (a sign,
a point, an exponent for a float), never Python's extras (``1_024``, ``６４``, ``٣``) that int() and float()
accept; a refusal names the option as typed."""
from __future__ import annotations

import pytest

from sim.cache.knobs import parse_integer, parse_number
from sim.grid.axes import parse_axis
from tests.bad_input_helpers import GOOD_LINES, assert_rejected, invoke, lines_text

NOT_INTEGERS = ["1_024", "\uff16\uff14", "\u0663", "1e3", "0x40", "64.0", "", " ", "+", "1 024"]


@pytest.mark.parametrize("text", NOT_INTEGERS)
def test_an_integer_must_be_written_in_ascii_digits(text):
    with pytest.raises(ValueError):
        parse_integer(text)


@pytest.mark.parametrize("text, value", [("64", 64), ("+5", 5), ("-3", -3), (" 7 ", 7), ("007", 7)])
def test_plain_integers_read(text, value):
    assert parse_integer(text) == value


@pytest.mark.parametrize("text", ["1_0.5", "\uff11.5", "1,5", "0x1p3", "1e", ".", "e5"])
def test_a_number_must_be_written_in_ascii(text):
    with pytest.raises(ValueError):
        parse_number(text)


@pytest.mark.parametrize("text, value", [("1.5", 1.5), ("-.5", -0.5), ("5.", 5.0), ("1e-3", 1e-3), ("2E3", 2e3)])
def test_plain_numbers_read(text, value):
    assert parse_number(text) == value


def test_a_grid_axis_refuses_them_by_item():
    with pytest.raises(ValueError, match="--page-size: item 2: must be an integer"):
        parse_axis("page_size", "64,1_024")


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(lines_text(*GOOD_LINES))
    return path


@pytest.mark.parametrize("args, flag", [
    (["simulate", "--trace", "{t}", "--page-size", "1_024"], "--page-size"),
    (["simulate", "--trace", "{t}", "--kv-memory-gb", "\uff14\uff10"], "--kv-memory-gb"),
    (["grid", "--trace", "{t}", "--out", "{d}/g", "--jobs", "1_0"], "--jobs"),
    (["grid", "--trace", "{t}", "--out", "{d}/g", "--max-points", "1_000"], "--max-points"),
    (["trace", "gen", "fanout", "--num-groups", "1_0", "-o", "{d}/o"], "--num-groups"),
    (["trace", "gen", "multiturn", "--think-time", "1_0.5", "-o", "{d}/o"], "--think-time"),
    (["trace", "import", "azure", "{t}", "-o", "{d}/o", "--shared-len", "5_12"], "--shared-len"),
    (["execute", "--trace", "{t}", "--seed", "\u0661"], "--seed"),
])
def test_every_command_refuses_them_naming_the_option(tmp_path, trace, args, flag):
    filled = [str(a).replace("{t}", str(trace)).replace("{d}", str(tmp_path)) for a in args]
    assert_rejected(invoke(filled), flag)
    assert not (tmp_path / "o").exists() and not (tmp_path / "g").exists()
