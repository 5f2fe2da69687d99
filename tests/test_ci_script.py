"""`.ci/run` installs a browser only where none is, saying what it installs, and never upgrades what is
installed (issue 25, item 7): its browser step run against a stand-in apt-get."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / ".ci" / "run"
FAKE_APT = """#!/bin/bash
case " $* " in
  *" -s "*) echo "Inst libfoo (1.0 Debian:stable [amd64])"; echo "Inst chromium (120 Debian:stable [amd64])"
            [ -n "$UPGRADE" ] && echo "Inst libc6 [2.36-1] (2.36-9 Debian:stable [amd64])"; exit 0;;
  *" install "*) echo "$*" >> "$LOG";;
esac
"""


def browser_step(tmp_path: Path, **env: str) -> tuple[str, str]:
    """The script's own functions (step, install_browser), run with apt-get stood in for."""
    text = SCRIPT.read_text()
    functions = re.search(r"^step\(\).*?$", text, re.MULTILINE).group(0) + "\n" + re.search(
        r"^install_browser\(\) \{.*?^\}", text, re.MULTILINE | re.DOTALL).group(0)
    (tmp_path / "apt-get").write_text(FAKE_APT)
    (tmp_path / "apt-get").chmod(0o755)
    log = tmp_path / "installed.log"
    run = subprocess.run(["bash", "-c", f"set -euo pipefail\n{functions}\ninstall_browser"], capture_output=True,
                         text=True, env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "LOG": str(log),
                                         **env}, timeout=60)
    assert run.returncode == 0, run.stderr
    return run.stderr, log.read_text() if log.exists() else ""


@pytest.mark.skipif(os.geteuid() != 0, reason="the step installs as root (or with sudo -n)")
def test_the_browser_step_says_what_it_installs(tmp_path):
    said, installed = browser_step(tmp_path)
    assert "installing Debian's chromium for the HTML report's browser test: 2 new packages, no upgrades" in said
    assert "--no-install-recommends chromium" in installed


@pytest.mark.skipif(os.geteuid() != 0, reason="the step installs as root (or with sudo -n)")
def test_the_browser_step_installs_nothing_that_would_upgrade_a_package(tmp_path):
    said, installed = browser_step(tmp_path, UPGRADE="1")
    assert "not installing chromium: apt would upgrade 1 installed packages" in said and installed == ""


def test_the_script_checks_for_a_browser_before_installing_one_and_parses():
    text = SCRIPT.read_text()
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0
    check = text.index('if command -v chromium >/dev/null 2>&1 || command -v chromium-browser')
    assert check < text.index("\n  install_browser\n") and "HYBRIDCACHE_NO_BROWSER_INSTALL" in text
    assert " -q " not in text.split("step \"1/5")[1].split("step \"3/5")[0]  # pip shows what it installs
