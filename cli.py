"""hybridcache's command line: `python cli.py --help`. The commands live in ``commands/`` (``commands/main.py``)."""

from __future__ import annotations

from commands.main import cli

if __name__ == "__main__":
    cli()
