"""The strict JSON reader (sim/trace/strict_json.py): honest JSON reads as ``json`` reads it; a duplicate key,
a lone surrogate, NaN / Infinity or a number past a double is refused with its line and field. Fuzzed with
hypothesis: documents drawn as values, written with random spacing, with one lie planted at a known path."""
from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.trace import TraceError, load_trace
from sim.trace.strict_json import JSONError, loads

EXAMPLES = int(os.environ.get("HYBRIDCACHE_FUZZ_EXAMPLES", "300"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                derandomize=os.environ.get("HYBRIDCACHE_FUZZ_RANDOM") != "1",
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("text, line, field, phrase", [
    ('{"a": 1, "a": 2}', 1, "a", "given twice"),
    ('{"x": {"y": [1, {"z": 0, "z": 0}]}}', 1, "x.y[1].z", "given twice"),
    ('[{"id": 1}, {"id": 2, "id": 3}]', 1, "[1].id", "given twice"),
    ('{\n "a": 1,\n "b": {\n  "c": 1,\n  "c": 2}}', 5, "b.c", "given twice"),
    ('{"a" :1, "a":2}', 1, "a", "given twice"),
    ('{"id": "x\\ud800"}', 1, "id", "lone surrogate"),
    ('{"id": "\\udc00x"}', 1, "id", "lone surrogate"),
    ('{"\\ud800": 1}', 1, "\ud800", "lone surrogate"),
    ('["a", "\\ud83d"]', 1, "[1]", "lone surrogate"),
    ('{"arrival": NaN}', 1, "arrival", "not a finite number"),
    ('{"a": [1, -Infinity]}', 1, "a[1]", "not a finite number"),
    ('{"arrival": 1e400}', 1, "arrival", "past the range"),
    ('{"a": 1,\n "b": -1.5e999}', 2, "b", "past the range"),
])
def test_each_lie_is_refused_with_its_line_and_field(text, line, field, phrase):
    with pytest.raises(JSONError) as caught:
        loads(text)
    assert (caught.value.line, caught.value.field) == (line, field) and phrase in caught.value.message


@pytest.mark.parametrize("text", ['{"a": "\\ud83d\\ude00"}', '{"a": "NaN", "b": "Infinity"}', '{"a": 1e308}',
                                  '{"a\\"": 1, "a": 2}', '{"a": "x\\":", "b": 1}', '{"a": 10' + "0" * 400 + "}",
                                  '{"a": "\\\\ud800"}', "[]", '"x"', "1.5"])
def test_honest_json_reads_as_json_reads_it(text):
    assert loads(text) == json.loads(text)


def test_malformed_json_names_line_and_column():
    with pytest.raises(JSONError, match="line 2: json: malformed JSON: Expecting ',' delimiter at column 9"):
        loads('{"a": 1,\n "b": 2 "c": 3}')


def test_a_trace_line_that_lies_is_refused_naming_file_line_and_field(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"id": "a", "arrival": 0, "prompt": [{"ref": "s", "len": 8}], "output_len": 5}\n'
                    '{"id": "b", "arrival": 1, "prompt": [{"ref": "s", "len": 8, "len": 9}], "output_len": 5}\n')
    with pytest.raises(TraceError, match=rf"^{path}:2: prompt\[0\]\.len: given twice"):
        load_trace(path)


# ---- fuzz ---------------------------------------------------------------------------------------------

# keys without the characters of a field path (".", "[", "]"), so that a planted key's path is unambiguous
KEYS = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters=".[]"), max_size=5)
SCALARS = (st.none() | st.booleans() | st.integers(-10**30, 10**30)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
                      max_leaves=12)
PLANTED = " :\t0"  # the planted duplicate's value, spaced as nothing else is: its line can be found
SPACES = st.sampled_from(["", " ", "\n", "\t", "  \n "])


@st.composite
def written(draw, value, plant: tuple[str, str] | None = None, path: str = "") -> str:
    """``value`` as JSON text with random whitespace between tokens and strings escaped or not; ``plant``:
    (object path, key) where the key is given a second time, on a line of its own."""
    space = draw(SPACES)
    if isinstance(value, dict):
        items = [f"{space}{_string(draw, k)}{draw(SPACES)}:{draw(SPACES)}{draw(written(v, plant, _at(path, k)))}"
                 for k, v in value.items()]
        if plant is not None and plant[0] == path:
            items.append(f"\n{json.dumps(plant[1])}{PLANTED}")
        return "{" + ",".join(items) + draw(SPACES) + "}"
    if isinstance(value, list):
        return "[" + ",".join(space + draw(written(v, plant, f"{path}[{i}]")) for i, v in enumerate(value)) + "]"
    return _string(draw, value) if isinstance(value, str) else json.dumps(value)


def _at(path: str, key: str) -> str:
    if not key:
        return f'{path}[""]'
    return f"{path}.{key}" if path else key


def _string(draw, text: str) -> str:
    return json.dumps(text, ensure_ascii=draw(st.booleans()))


def objects(value, path=""):
    """(path, object) of every non-empty object in ``value``, with the field path the reader names."""
    if isinstance(value, dict):
        if value:
            yield path, value
        for key, inner in value.items():
            yield from objects(inner, _at(path, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from objects(inner, f"{path}[{index}]")


@FUZZ
@given(st.data())
def test_fuzz_honest_documents_read_exactly(data):
    value = data.draw(VALUES)
    text = data.draw(written(value))
    assert loads(text) == json.loads(text) == value


@FUZZ
@given(st.data())
def test_fuzz_a_duplicate_key_is_found_where_it_was_planted(data):
    value = data.draw(st.dictionaries(KEYS, VALUES, min_size=1, max_size=4))
    where, target = data.draw(st.sampled_from(list(objects(value))))
    key = data.draw(st.sampled_from(sorted(target)))
    text = data.draw(written(value, (where, key)))
    with pytest.raises(JSONError) as caught:
        loads(text)
    assert caught.value.field == _at(where, key) and "given twice" in caught.value.message
    assert caught.value.line == text.count("\n", 0, text.index(json.dumps(key) + PLANTED)) + 1


@FUZZ
@given(st.data())
def test_fuzz_a_lone_surrogate_or_a_non_finite_number_is_refused(data):
    value = data.draw(st.lists(VALUES, min_size=1, max_size=4))
    index = data.draw(st.integers(0, len(value) - 1))
    lie = data.draw(st.sampled_from(['"\\ud800"', '"a\\udfff"', "NaN", "-Infinity", "1e999", '"\\ud83d x"']))
    items = [json.dumps(v) for v in value]
    items[index] = lie
    with pytest.raises(JSONError) as caught:
        loads("[\n" + ",\n".join(items) + "\n]")
    assert caught.value.field == f"[{index}]" and caught.value.line == index + 2


@FUZZ
@given(st.text(max_size=40) | st.binary(max_size=40).map(lambda b: b.decode("latin-1")))
def test_fuzz_any_text_reads_or_raises_only_a_located_json_error(text):
    try:
        value = loads(text)
    except JSONError as e:
        assert e.line >= 1 and e.field
    else:
        assert value == json.loads(text) or value != value  # NaN is the one value unequal to itself
