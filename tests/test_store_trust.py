"""A store is trusted by schema and by content: every field has the type a sweep writes, and a point's key is
the hash of its own configuration over the grid's trace (sim/grid/points.key_problem). A record copied from
another grid, its key edited, is named and left out of the report, and a resumed sweep recomputes it."""
from __future__ import annotations

import json
import shutil

import pytest

from reports.grid_data import load_grid
from sim.grid.axes import expand, parse_axes
from sim.grid.points import key_problem
from sim.grid.store import PointStore
from sim.grid.store_checks import StoreError
from sim.grid.sweep import run_grid
from tests.bad_input_helpers import GOOD_LINES, assert_rejected, invoke, lines_text

OTHER_LINE = {"id": "zz", "arrival": 2.0, "prompt": [{"ref": "q", "len": 8}], "output_len": 4}


def sweep(trace, out):
    configs = expand(parse_axes({"policy": "radix,sglang"}), mode="replay")
    return run_grid(trace, configs, out, jobs=1, progress=False)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("stores")
    (root / "a.jsonl").write_text(lines_text(*GOOD_LINES))
    (root / "b.jsonl").write_text(lines_text(*GOOD_LINES, OTHER_LINE))
    sweep(root / "a.jsonl", root / "a")
    sweep(root / "b.jsonl", root / "b")
    return root


@pytest.fixture
def store(stores, tmp_path):
    shutil.copytree(stores / "a", tmp_path / "g")
    return tmp_path / "g"


def first_key(store) -> str:
    return json.loads((store / "grid.json").read_text())["points"][0]


def plant_foreign_point(store, other) -> str:
    """The first point of ``store`` replaced by the same setting's point of ``other`` (another trace), its key
    edited to this grid's; returns that key."""
    mine, theirs = first_key(store), first_key(other)
    for suffix in (".requests.csv", ".steps.csv"):
        shutil.copy(other / "points" / f"{theirs}{suffix}", store / "points" / f"{mine}{suffix}")
    record = json.loads((other / "points" / f"{theirs}.json").read_text()) | {"key": mine}
    (store / "points" / f"{mine}.json").write_text(json.dumps(record))
    return mine


def test_every_point_of_an_honest_store_is_its_key(store):
    points = PointStore(store)
    sha = points.read_manifest()["trace"]["sha256"]
    for key in points.read_manifest()["points"]:
        assert key_problem(points.read_point(key), key, sha) is None
    assert load_grid(store).skipped == []


def test_a_point_from_another_grid_is_named_and_left_out(store, stores):
    key = plant_foreign_point(store, stores / "b")
    result = invoke(["report", store])
    assert result.exit_code == 0, result.output
    assert f"{store}/points/{key}.json: left out: it was computed over another trace" in result.output
    report = (store / "report.md").read_text()
    assert report.count(key) == 1 and "1 left out" in report  # named in the warning, in no table or figure
    assert f"**Warning**: {store}/points/{key}.json: left out" in report


def test_a_resumed_sweep_recomputes_a_foreign_point_and_nothing_else(store, stores):
    key = plant_foreign_point(store, stores / "b")
    again = sweep(stores / "a.jsonl", store)
    assert again.ran == [key] and len(again.skipped) == 1
    assert load_grid(store).skipped == []


def test_a_record_from_before_key_parts_is_checked_by_what_it_has(store, stores):
    """Records written before key_parts: one copied from another grid is caught by its trace hash, or its
    config_key (which hashes the trace); a record older than both carries no evidence but its key."""
    points = PointStore(store)
    sha, key = points.read_manifest()["trace"]["sha256"], first_key(store)
    record = {k: v for k, v in points.read_point(key).items() if k != "key_parts"}
    assert key_problem(record, key, sha) is None
    foreign = PointStore(stores / "b").read_point(first_key(stores / "b"))
    foreign = {k: v for k, v in foreign.items() if k != "key_parts"} | {"key": key}
    assert "another trace" in key_problem(foreign, key, sha)
    older = {k: v for k, v in foreign.items() if k != "trace"}
    assert "not the hash of its configuration" in key_problem(older, key, sha)
    oldest = {k: v for k, v in record.items() if k not in ("trace", "config_key")}
    assert key_problem(oldest, key, sha) is None and key_problem(oldest | {"key": "0" * 16}, "0" * 16, sha)


def edit(store, name, change):
    path = store / name.format(point=first_key(store))
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("name, change, message", [
    ("grid.json", lambda m: m["trace"].update(sha256=12345), "trace.sha256: must be 64 hex digits, got 12345"),
    ("grid.json", lambda m: m.update(points=m["points"] + m["points"][:1]), "is listed twice (entries 1 and 3)"),
    ("grid.json", lambda m: m.update(points=[]), "points: lists no point"),
    ("points/{point}.json", lambda r: r["summary"].pop("cached_tokens"), "summary.cached_tokens: missing"),
    ("points/{point}.json", lambda r: r["summary"].update(cached_tokens="abc"),
     "summary.cached_tokens: must be an integer, got 'abc'"),
    ("points/{point}.json", lambda r: r["summary"].update(mean_swa_slots=True), "summary.mean_swa_slots: must be a number"),
    ("points/{point}.json", lambda r: r["config"].update(policy=["radix"]), "config.policy: must be a text"),
    ("points/{point}.json", lambda r: r["code"].update(version=1), "code.version: must be a text"),
    ("points/{point}.json", lambda r: r["resolved"].update(page_size=[1]), "resolved.page_size: must be a number"),
])
def test_every_field_is_typed_and_the_file_named(store, name, change, message):
    path = edit(store, name, change)
    assert_rejected(invoke(["report", store]), f"{path}: ", message)


def test_a_duplicate_key_in_a_store_file_is_named_with_its_line(store):
    path = store / "grid.json"
    path.write_text(path.read_text().replace('"points":', '"points": [],\n "points":', 1))
    with pytest.raises(StoreError, match=rf"^{path}:\d+: points: given twice"):
        PointStore(store).read_manifest()


def test_a_points_folder_that_is_a_file_is_named(store):
    shutil.rmtree(store / "points")
    (store / "points").write_text("x")
    assert_rejected(invoke(["report", store]), f"{store}/points: is not a folder")
    (store / "t.jsonl").write_text(lines_text(*GOOD_LINES))
    assert_rejected(invoke(["grid", "--trace", store / "t.jsonl", "--out", store]), f"{store}/points")
