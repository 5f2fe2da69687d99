"""README's lists are whole and the docs and help refer to nothing the repository lacks (issue 25, item 7)."""
from __future__ import annotations

import re
from pathlib import Path

import click
from click.testing import CliRunner

from cli import cli
from commands.simulate import experiment
from sim.cost import GPUS
from sim.engines.negative import CONTROLS
from sim.engines.registry import PRESETS
from sim.models import MODELS

REPO = Path(__file__).resolve().parents[1]


def test_readme_names_every_preset_model_gpu_and_experiment():
    readme = (REPO / "README.md").read_text()
    controls = {name for name, *_ in CONTROLS}
    experiments = next(p for p in experiment.params if p.name == "name").type.choices
    for name in [*(set(PRESETS) - controls), *MODELS, *GPUS, *experiments]:
        assert f"`{name}`" in readme or re.search(rf"[ |]{re.escape(name)}[|`]", readme), name


def help_texts(group: click.Group, path: tuple[str, ...] = ()):
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from help_texts(command, path + (name,))
        else:
            yield CliRunner().invoke(cli, [*path, name, "--help"], terminal_width=200).output


def test_no_doc_or_help_cites_a_spec_section_the_repository_does_not_have():
    pages = [REPO / "README.md", *(REPO / "docs").rglob("*.md")]
    for text in [*(p.read_text() for p in pages), *help_texts(cli)]:
        assert not re.search(r"SPEC('s| section| S\d|:)", text), text[:200]
