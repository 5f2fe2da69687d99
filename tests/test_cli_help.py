"""The command line as a new user meets it: every option has a help text and shows its default, one
``--format`` flag, ``--version``, per-format import help, and a message when a command succeeds."""
from __future__ import annotations

import json
import re

import click
import pytest
from click.testing import CliRunner

from cli import cli
from sim.code_version import package_version, source_sha256
from sim.engines.registry import CLI_KNOBS
from sim.run.config import POOL_KNOBS


def commands(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from commands(command, prefix + (name,))
        else:
            yield prefix + (name,), command


ALL_COMMANDS = sorted(commands(cli))


def help_text(*path: str) -> str:
    result = CliRunner().invoke(cli, [*path, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("path, command", ALL_COMMANDS, ids=[" ".join(p) for p, _ in ALL_COMMANDS])
def test_every_option_has_help_and_says_its_default(path, command):
    text = help_text(*path)
    for param in command.params:
        if not isinstance(param, click.Option) or param.hidden or param.name == "help":
            continue
        assert param.help, f"{' '.join(path)} {param.opts[0]} has no help"
        flag_or_required = param.is_flag and not param.secondary_opts or param.required
        if not flag_or_required:
            assert param.show_default, f"{' '.join(path)} {param.opts[0]} shows no default"
    assert "[default: (" not in text  # defaults that are not values read plainly, not in parentheses


def test_knob_and_pool_options_take_help_and_defaults_from_the_schema():
    text = help_text("simulate")
    for spec in CLI_KNOBS.values():
        assert spec.flag in text and spec.help.split(":")[0] in " ".join(text.split())
    assert "[default: the preset's, see cli.py policies]" in " ".join(text.split())
    assert "--kv-memory-gb FLOAT" in text and "[default: 40.0]" in text
    executor = " ".join(help_text("execute").split())
    for spec in POOL_KNOBS.values():
        assert spec.flag in executor
    assert "[default: 200000]" in executor and "[default: 256]" in executor  # the executor's own small pools


def test_grid_axes_say_what_they_sweep():
    text = " ".join(help_text("grid").split())
    assert "page_size values" not in text
    assert "--page-size V1,V2,.. radix page" in text and "--kv-memory-gb V1,V2,.. memory for the cache pools" in text


def test_one_format_flag_everywhere():
    for path in (("simulate",), ("trace", "stats"), ("experiment",), ("execute",)):
        text = help_text(*path)
        assert "--format" in text and "--json" not in text and "--markdown" not in text, path


def test_version_names_the_package_and_the_source():
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert result.output.startswith(f"hybridcache {package_version()}, source {source_sha256()[:12]}")


def test_trace_gen_and_import_say_what_they_wrote(tmp_path, data_dir):
    out = tmp_path / "s3.jsonl"
    result = CliRunner().invoke(cli, ["trace", "gen", "s3", "-o", str(out)])
    assert result.exit_code == 0 and result.output == f"wrote {out}: 2 requests, 15,560 prompt tokens\n"
    imported = tmp_path / "mc.jsonl"
    result = CliRunner().invoke(cli, ["trace", "import", "mooncake", str(data_dir / "mooncake_conversation_head.jsonl"),
                                      "-o", str(imported)])
    assert result.exit_code == 0 and result.output.rstrip().endswith(f"wrote {imported}")
    stats = CliRunner().invoke(cli, ["trace", "stats", str(imported), "--format", "md"])
    assert stats.output.startswith("| statistic | value |\n|:---|---:|\n| requests | 40 |")
    assert json.loads(CliRunner().invoke(cli, ["trace", "stats", str(imported), "--format", "json"]).stdout)[
        "requests"] == 40


@pytest.mark.parametrize("command", ["execute", "calibrate"])
def test_executor_help_lists_its_own_options_first_and_no_knob_it_cannot_run(command):
    """--trace, --policy, --model ... before the knobs; every executing engine's knobs are offered (vLLM executes)."""
    text = help_text(command)
    flags = re.findall(r"^  (--[a-z-]+|-o, --output)", text, flags=re.MULTILINE)
    assert flags.index("--trace") == 0 and flags.index("--seed") < flags.index("--page-size")
    assert "--finish-trim-gap" in text and "--marconi-eviction" in text and "--junction" in text
    assert flags.index("--junction") > flags.index("--seed")


def test_a_knob_only_an_engine_execute_cannot_run_reads_is_not_offered(monkeypatch):
    import dataclasses

    from commands import execute_options
    from sim.engines.registry import ENGINES

    not_executing = {**ENGINES, "vllm": dataclasses.replace(ENGINES["vllm"], executes="not here")}
    monkeypatch.setattr(execute_options, "ENGINES", not_executing)
    command = click.Command("probe", callback=lambda **_: None)
    command = execute_options.executor_knobs(command)
    names = {param.name for param in command.params}
    assert "junction" not in names and "retention_interval" not in names
    assert "finish_trim_gap" in names and "pool_tokens" in names
