"""Round two of the hostile-input corpus (issue #26), by class: writes through special files, predictable
temporary files, injection into reports and CSV, hangs and bombs, damaged stores, JSON that lies, errors
without a place. Each case is judged like the rest of the corpus (tests/hostile_inputs.py); some also run
a check of their own afterwards (``after``: a victim file left alone, a report that loads nothing).
"""
from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import socket
import stat
from html.parser import HTMLParser
from pathlib import Path

from tests.bad_input_helpers import GOOD_LINES, lines_text

CLOSED = "<closed>"  # a case's stdin: standard input closed (sys.stdin is None), as with `<&-`
GOOD = lines_text(*GOOD_LINES).encode()
# a file name holds no "/": the image's URL does without (a browser reads https:evil.example as https://...)
NASTY = "t`<img src=x onerror=alert(1)>`![p](https:evil.example)<b>x<\\b>.jsonl"
_LINE = {"id": "a", "arrival": 0.0, "prompt": [{"ref": "s", "len": 8}], "output_len": 4}


def _line(**fields) -> str:
    return json.dumps(_LINE | fields)


def _bomb(line: bytes, mebibytes: int) -> bytes:
    """Gzip members of 1 MiB each, concatenated: ``mebibytes`` MiB of ``line`` repeated, in about 1 kB/MiB."""
    member = gzip.compress((line * (1 << 20))[: 1 << 20], compresslevel=9)
    return member * mebibytes


# ---- preparations: what a case lays besides its files (the folder, the scratch folder) -------------------

def _plant_temp_symlink(folder: Path, scratch: Path) -> None:
    """A symbolic link at the name the writer used to take for its temporary file, aimed at a victim."""
    (folder / "victim.txt").write_bytes(b"precious\n")
    os.symlink(folder / "victim.txt", folder / f".t.jsonl.{os.getpid()}.tmp")


def _nasty_trace_name(folder: Path, scratch: Path) -> None:
    manifest = folder / "g" / "grid.json"
    data = json.loads(manifest.read_text())
    data["trace"]["path"] = str(folder / NASTY)
    manifest.write_text(json.dumps(data))


def _foreign_point(folder: Path, scratch: Path) -> None:
    """This grid's first point replaced by the same setting's point of a grid over another trace, its key edited."""
    from tests.hostile_inputs import finished_store

    other = finished_store(scratch, "other", lines_text(*GOOD_LINES, _line(id="zz", arrival=2.0)).encode())
    points = folder / "g" / "points"
    mine = sorted(points.glob("*.json"))[0].stem
    theirs = sorted((other / "points").glob("*.json"))[0].stem
    for suffix in (".requests.csv", ".steps.csv"):
        shutil.copy(other / "points" / f"{theirs}{suffix}", points / f"{mine}{suffix}")
    record = json.loads((other / "points" / f"{theirs}.json").read_text()) | {"key": mine}
    (points / f"{mine}.json").write_text(json.dumps(record))


def _edit_first_point(change):
    def prepare(folder: Path, scratch: Path) -> None:
        path = sorted((folder / "g" / "points").glob("*.json"))[0]
        record = json.loads(path.read_text())
        change(record)
        path.write_text(json.dumps(record))
    return prepare


def _edit_manifest(change):
    def prepare(folder: Path, scratch: Path) -> None:
        path = folder / "g" / "grid.json"
        data = json.loads(path.read_text())
        change(data)
        path.write_text(json.dumps(data))
    return prepare


def _points_folder_is_a_file(folder: Path, scratch: Path) -> None:
    shutil.rmtree(folder / "g" / "points")
    (folder / "g" / "points").write_bytes(b"x")


def _duplicate_key_in_manifest(folder: Path, scratch: Path) -> None:
    path = folder / "g" / "grid.json"
    text = path.read_text()
    path.write_text(text.replace('"points":', '"points": [], "points":', 1))


def _special_in(place: str, kind: str):
    def prepare(folder: Path, scratch: Path) -> None:
        make_special(folder / place, kind)
    return prepare


PREPARE = {
    "temp-symlink": _plant_temp_symlink,
    "nasty-trace-name": _nasty_trace_name,
    "foreign-point": _foreign_point,
    "sha256-integer": _edit_manifest(lambda m: m["trace"].update(sha256=12345)),
    "key-twice": _edit_manifest(lambda m: m.update(points=m["points"] + m["points"][:1])),
    "points-empty": _edit_manifest(lambda m: m.update(points=[])),
    "manifest-duplicate-key": _duplicate_key_in_manifest,
    "cached-missing": _edit_first_point(lambda r: r["summary"].pop("cached_tokens")),
    "cached-text": _edit_first_point(lambda r: r["summary"].update(cached_tokens="abc")),
    "requests-float": _edit_first_point(lambda r: r["summary"].update(requests=2.5)),
    "config-policy-list": _edit_first_point(lambda r: r["config"].update(policy=["radix"])),
    "points-is-a-file": _points_folder_is_a_file,
    "link-o-to-dev": lambda folder, scratch: os.symlink(folder / "dev", folder / "o"),
    "out-requests-fifo": _special_in("out/requests.csv", "fifo"),
    "out-bitwise-fifo": _special_in("out/bitwise.csv", "fifo"),
    "report-md-fifo": _special_in("g/report.md", "fifo"),
    "grid-json-fifo": _special_in("g/grid.json", "fifo"),
    "requests-csv-fifo": _special_in("g/points/{point}.requests.csv", "fifo"),
}


def make_special(path: Path, kind: str) -> None:
    """A FIFO, a UNIX socket or a device node (null or zero) at ``path``."""
    path = Path(str(path).replace("{point}", _first_point(path)))
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()
    else:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, {"null": 3, "zero": 5}[kind]))


def _first_point(path: Path) -> str:
    points = next((p for p in [path, *path.parents] if p.name == "points"), None)
    found = sorted(points.glob("*.json")) if points is not None and points.is_dir() else []
    return found[0].stem if found else ""


# ---- checks run after a case: None when all is well, else what is wrong ------------------------------

class _Tags(HTMLParser):
    def __init__(self, text: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def _reaches_out(tags: list[tuple[str, dict]], local: str) -> str | None:
    """What in a page could load or run something from elsewhere: a handler, a frame, a link, an image or
    script from outside ``local``."""
    for tag, attrs in tags:
        source = attrs.get("src") or attrs.get("href") or attrs.get("data") or ""
        if any(name.startswith("on") for name in attrs) or tag in ("iframe", "object", "embed", "link", "a"):
            return f"<{tag} {attrs}>"
        if source and not source.startswith(local):
            return f"<{tag} {attrs}>"
    return None


def _markdown_is_inert(folder: Path) -> str | None:
    """report.md rendered as a pull request would (raw HTML allowed): only our own figures load."""
    from markdown_it import MarkdownIt

    rendered = MarkdownIt("commonmark", {"html": True}).render((folder / "g" / "report.md").read_text())
    tags = _Tags(rendered).tags
    scripts = [attrs for tag, attrs in tags if tag == "script"]
    return "a <script> in report.md" if scripts else _reaches_out(tags, "figures/")


def _html_is_inert(folder: Path) -> str | None:
    page = (folder / "g" / "report.html").read_text()
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page)
    if not policy or "default-src 'none'" not in policy.group(1) or "img-src data:" not in policy.group(1):
        return "no Content-Security-Policy forbidding outside loads"
    tags = _Tags(page).tags
    if len([tag for tag, _ in tags if tag == "script"]) != 1:
        return "a script besides the page's own"
    return _reaches_out([(t, a) for t, a in tags if t != "meta"], "data:")


def _victim_untouched(folder: Path) -> str | None:
    if (folder / "victim.txt").read_bytes() != b"precious\n":
        return "wrote through the symlink planted at the temporary file's name"
    return None if (folder / "t.jsonl").is_file() else "no trace written"


def _csv_safe(folder: Path) -> str | None:
    for path in sorted(folder.rglob("*.csv")):
        for line in path.read_text().splitlines():
            for cell in line.split(","):
                if cell[:1] in ("=", "+", "@") or re.match(r"^-[^\d.]", cell):
                    return f"{path.name}: a cell a spreadsheet runs as a formula: {cell!r}"
    return None


AFTER = {
    "victim-untouched": _victim_untouched,
    "markdown-inert": _markdown_is_inert,
    "html-inert": _html_is_inert,
    "csv-safe": _csv_safe,
}


# ---- the cases ---------------------------------------------------------------------------------------

SOCKET, NULL_DEVICE, ZERO_DEVICE = "<socket>", "<null>", "<zero>"  # special contents of a case's file
SPECIAL = {SOCKET: "socket", NULL_DEVICE: "null", ZERO_DEVICE: "zero"}
_TRACE = ("--trace", "{d}/t.jsonl")
_FORMULA_IDS = ["=HYPERLINK(\"http://evil.example\")", "+1", "@SUM(1)", "-2+3"]


def _formula_trace() -> bytes:
    return lines_text(*(_line(id=name, arrival=float(i)) for i, name in enumerate(_FORMULA_IDS))).encode()


def _axis_values(count: int, step: int = 16) -> list[int]:
    return [step * i for i in range(1, count + 1)]


def _huge_grid_file() -> bytes:
    axes = ("page_size", "track_interval", "chunked_prefill_size", "window", "swa_eviction_interval",
            "max_running_requests")
    lines = ['trace = "t.jsonl"', 'out = "g"', "[axes]"] + [f"{a} = {_axis_values(100)}" for a in axes]
    return "\n".join(lines).encode()


def write_cases(Hostile, FOLDER, STORE, FIFO) -> list:
    gen = ("trace", "gen", "s3", "-o", "{d}/o")
    cases = [Hostile(f"write/gen-o-{kind}", gen, {"o": marker}, ("-o", "{d}/o"))
             for kind, marker in (("fifo", FIFO), ("socket", SOCKET), ("device", NULL_DEVICE))]
    cases += [
        Hostile("write/import-o-fifo", ("trace", "import", "openai-jsonl", "{d}/src", "-o", "{d}/o"),
                {"src": b'{"messages": [{"role": "user", "content": "hi"}]}\n', "o": FIFO}, ("{d}/o",)),
        Hostile("write/calibrate-o-fifo", ("calibrate", *_TRACE, "-o", "{d}/o"), {"t.jsonl": GOOD, "o": FIFO},
                ("{d}/o",)),
        Hostile("write/gen-o-link-to-device", gen, {"dev": NULL_DEVICE}, ("{d}/o",), prepare="link-o-to-dev"),
        Hostile("write/simulate-out-holds-a-fifo", ("simulate", *_TRACE, "--out", "{d}/out"),
                {"t.jsonl": GOOD, "out": FOLDER}, ("{d}/out/requests.csv",), prepare="out-requests-fifo"),
        Hostile("write/execute-out-holds-a-fifo", ("execute", *_TRACE, "--out", "{d}/out"),
                {"t.jsonl": GOOD, "out": FOLDER}, ("{d}/out/bitwise.csv",), prepare="out-bitwise-fifo"),
        Hostile("write/grid-manifest-is-a-fifo", ("grid", *_TRACE, "--out", "{d}/g", "--jobs", "1"),
                {"t.jsonl": GOOD, "g": FOLDER}, ("{d}/g/grid.json",), prepare="grid-json-fifo"),
        Hostile("write/grid-points-is-a-file", ("grid", *_TRACE, "--out", "{d}/g", "--jobs", "1"),
                {"t.jsonl": GOOD, "g": STORE}, ("{d}/g/points",), prepare="points-is-a-file"),
        Hostile("write/report-md-is-a-fifo", ("report", "{d}/g"), {"g": STORE}, ("{d}/g/report.md",),
                prepare="report-md-fifo"),
        Hostile("temp/symlink-at-the-temporary-name", ("trace", "gen", "s3", "-o", "{d}/t.jsonl"), {},
                runs=True, prepare="temp-symlink", after="victim-untouched"),
    ]
    return cases


def injection_cases(Hostile, FOLDER, STORE, FIFO) -> list:
    return [
        Hostile("inject/report-md-trace-name", ("report", "{d}/g"), {"g": STORE}, runs=True,
                prepare="nasty-trace-name", after="markdown-inert"),
        Hostile("inject/report-html-trace-name", ("report", "{d}/g", "--format", "html"), {"g": STORE},
                runs=True, prepare="nasty-trace-name", after="html-inert"),
        Hostile("inject/simulate-csv-formula-ids", ("simulate", *_TRACE, "--mode", "replay", "--out", "{d}/out"),
                {"t.jsonl": _formula_trace()}, runs=True, after="csv-safe"),
        Hostile("inject/grid-csv-formula-ids", ("grid", *_TRACE, "--mode", "replay", "--policy", "radix",
                                                "--out", "{d}/g", "--jobs", "1"),
                {"t.jsonl": _formula_trace()}, runs=True, after="csv-safe"),
    ]


def hang_cases(Hostile, FOLDER, STORE, FIFO) -> list:
    newlines, one_line = _bomb(b"\n", 1024), _bomb(b"x", 1024)
    four_axes = [item for flag in ("--page-size", "--track-interval", "--chunked-prefill-size", "--window")
                 for item in (flag, ",".join(map(str, _axis_values(100))))]
    return [
        Hostile("hang/stats-stdin-closed", ("trace", "stats", "-"), located=("<stdin>",), stdin=CLOSED),
        Hostile("hang/simulate-stdin-closed", ("simulate", "--trace", "-"), located=("<stdin>",), stdin=CLOSED),
        Hostile("hang/grid-config-fifo", ("grid", "--config", "{d}/g.toml"), {"g.toml": FIFO}, ("{d}/g.toml",)),
        Hostile("hang/grid-config-device", ("grid", "--config", "{d}/g.toml"), {"g.toml": ZERO_DEVICE},
                ("{d}/g.toml",)),
        Hostile("hang/grid-four-100-value-axes", ("grid", *_TRACE, "--out", "{d}/g", *four_axes),
                {"t.jsonl": GOOD}, ("--max-points", "100,000,000 points")),
        Hostile("hang/grid-file-of-1e12-points", ("grid", "--config", "{d}/g.toml"),
                {"g.toml": _huge_grid_file(), "t.jsonl": GOOD}, ("--max-points", "1,000,000,000,000 points")),
        Hostile("hang/stats-gzip-newline-bomb", ("trace", "stats", "{d}/t.jsonl.gz"), {"t.jsonl.gz": newlines},
                ("{d}/t.jsonl.gz", "decompression bomb")),
        Hostile("hang/simulate-gzip-one-line-bomb", ("simulate", "--trace", "{d}/t.jsonl.gz"),
                {"t.jsonl.gz": one_line}, ("{d}/t.jsonl.gz", "decompression bomb")),
        Hostile("hang/stats-stdin-bomb", ("trace", "stats", "-"), located=("<stdin>", "decompression bomb"),
                stdin=newlines),
    ]


def store_cases(Hostile, FOLDER, STORE, FIFO) -> list:
    manifest, point = "{d}/g/grid.json", "{d}/g/points/{point}.json"
    damages = [("sha256-integer", manifest), ("key-twice", manifest), ("points-empty", manifest),
               ("manifest-duplicate-key", manifest), ("cached-missing", point), ("cached-text", point),
               ("requests-float", point), ("config-policy-list", point), ("points-is-a-file", "{d}/g/points"),
               ("requests-csv-fifo", "{d}/g/points/{point}.requests.csv")]
    cases = [Hostile(f"store/{name}", ("report", "{d}/g"), {"g": STORE}, (place,), prepare=name)
             for name, place in damages]
    cases.append(Hostile("store/foreign-point-key-edited", ("report", "{d}/g"), {"g": STORE},
                         (point, "another trace"), runs=True, prepare="foreign-point"))
    return cases


def json_cases(Hostile, FOLDER, STORE, FIFO) -> list:
    lies = [("duplicate-output-len", '{"id": "a", "arrival": 0, "prompt": [{"ref": "s", "len": 8}], '
                                     '"output_len": 5, "output_len": 500}', ":1: output_len"),
            ("duplicate-id", '{"id": "a", "id": "b", "arrival": 0, "prompt": [{"ref": "s", "len": 8}], '
                             '"output_len": 5}', ":1: id"),
            ("duplicate-segment-len", '{"id": "a", "arrival": 0, "prompt": [{"ref": "s", "len": 8, "len": 9}], '
                                      '"output_len": 5}', ":1: prompt[0].len"),
            ("lone-surrogate-id", _line(id="a\ud800"), ":1: id"),
            ("lone-surrogate-ref", _line(prompt=[{"ref": "s\udc00", "len": 8}]), ":1: prompt[0].ref"),
            ("number-past-double", _line(arrival=0).replace('"arrival": 0', '"arrival": 1e400'), ":1: arrival")]
    commands = {"simulate": ("simulate", *_TRACE, "--mode", "replay", "--out", "{d}/out"),
                "stats": ("trace", "stats", "{d}/t.jsonl")}
    cases = [Hostile(f"json/{name}/{command}", args, {"t.jsonl": text.encode() + b"\n"},
                     (f"{{d}}/t.jsonl{place}",))
             for name, text, place in lies for command, args in commands.items()]
    sharegpt = b'[{"id": "c", "conversations": [{"from": "human", "value": null}, {"from": "gpt", "value": "hi"}]}]'
    mooncake = b'{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [1], "hash_ids": [2]}\n'
    calibration = b'{"model": "tiny", "gpu": "cpu", "overhead_s": 0.001, "overhead_s": 9, "s_per_prefill_token": 0,' \
                  b' "s_per_decode_token": 0, "s_per_context_token": 0}'
    cases += [
        Hostile("json/sharegpt-value-null", ("trace", "import", "sharegpt", "{d}/src", "-o", "{d}/o"),
                {"src": sharegpt}, ("{d}/src", "[0].conversations[0].value")),
        Hostile("json/mooncake-duplicate-hash-ids", ("trace", "import", "mooncake", "{d}/src", "-o", "{d}/o"),
                {"src": mooncake}, ("{d}/src:1: hash_ids",)),
        Hostile("json/calibration-duplicate-key", ("simulate", *_TRACE, "--calibration", "{d}/c.json"),
                {"t.jsonl": GOOD, "c.json": calibration}, ("{d}/c.json", "overhead_s")),
        Hostile("json/calibration-nan", ("simulate", *_TRACE, "--calibration", "{d}/c.json"),
                {"t.jsonl": GOOD, "c.json": calibration.replace(b'"overhead_s": 9', b'"fit": NaN')},
                ("{d}/c.json", "NaN")),
    ]
    return cases


def located_cases(Hostile, FOLDER, STORE, FIFO) -> list:
    grid_file = b'trace = "t.jsonl"\nout = "g"\n'
    simulate = ("simulate", *_TRACE, "--mode", "replay")
    numbers = [("simulate-page-size-underscore", (*simulate, "--page-size", "1_024"), "--page-size"),
               ("simulate-page-size-full-width", (*simulate, "--page-size", "\uff16\uff14"), "--page-size"),
               ("simulate-kv-memory-underscore", (*simulate, "--kv-memory-gb", "4_0"), "--kv-memory-gb"),
               ("grid-axis-underscore", ("grid", *_TRACE, "--out", "{d}/g", "--page-size", "64,1_024"), "--page-size"),
               ("grid-jobs-underscore", ("grid", *_TRACE, "--out", "{d}/g", "--jobs", "1_0"), "--jobs"),
               ("gen-sessions-underscore", ("trace", "gen", "multiturn", "--num-sessions", "1_0", "-o", "{d}/o"),
                "--num-sessions"),
               ("gen-rate-underscore", ("trace", "gen", "multiturn", "--request-rate", "1_0.5", "-o", "{d}/o"),
                "--request-rate"),
               ("import-limit-full-width", ("trace", "import", "openai-jsonl", "{d}/t.jsonl", "-o", "{d}/o",
                                            "--limit", "\uff11"), "--limit"),
               ("simulate-knob-conflict", (*simulate, "--page-size", "64", "--track-interval", "100"),
                "--track-interval 100 must be a multiple of --page-size 64"),
               ("execute-knob-conflict", ("execute", *_TRACE, "--page-size", "64", "--track-interval", "100"),
                "--track-interval 100")]
    cases = [Hostile(f"located/{name}", args, {"t.jsonl": GOOD}, (place,)) for name, args, place in numbers]
    cases += [
        Hostile("located/toml-not-utf8", ("grid", "--config", "{d}/g.toml"),
                {"g.toml": grid_file + b"# caf\xe9\n", "t.jsonl": GOOD}, ("{d}/g.toml:3",)),
        Hostile("located/toml-mode-5", ("grid", "--config", "{d}/g.toml"),
                {"g.toml": grid_file + b"mode = 5\n", "t.jsonl": GOOD}, ("{d}/g.toml:3: mode",)),
        Hostile("located/toml-mode-5-and-mode-flag", ("grid", "--config", "{d}/g.toml", "--mode", "replay"),
                {"g.toml": grid_file + b"mode = 5\n", "t.jsonl": GOOD}, ("{d}/g.toml:3: mode",)),
        Hostile("located/toml-trace-not-a-path", ("grid", "--config", "{d}/g.toml"),
                {"g.toml": b'trace = 5\nout = "g"\n', "t.jsonl": GOOD}, ("{d}/g.toml:1: trace",)),
        Hostile("located/toml-value-with-comma", ("grid", "--config", "{d}/g.toml"),
                {"g.toml": grid_file + b'[axes]\npolicy = ["radix,sglang"]\n', "t.jsonl": GOOD},
                ("{d}/g.toml:4: [axes] policy",)),
    ]
    return cases


def round_two_cases(Hostile, FOLDER, STORE, FIFO) -> list:
    return [case for make in (write_cases, injection_cases, hang_cases, store_cases, json_cases, located_cases)
            for case in make(Hostile, FOLDER, STORE, FIFO)]
