"""A wheel of a pure-Python distribution installed here, built offline from its installed files.

The GPU machine reaches no registry, so a package it lacks travels as a wheel (docs/gpu-runs.md). This
builds that wheel from the local environment, of exactly the version the tests ran with: the installed
files, METADATA and WHEEL as installed, and a fresh RECORD. Pure-Python distributions only (WHEEL says
Root-Is-Purelib and the tag py3-none-any); anything else is refused by name. The bytes are deterministic.

    python scripts/wheel_from_env.py simpy -d .whl
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.metadata as metadata
import zipfile
from pathlib import Path, PurePosixPath

_NOT_PACKED = {
    "INSTALLER",
    "REQUESTED",
    "RECORD",
    "direct_url.json",
}  # written by the installer, not the wheel
_EPOCH = (1980, 1, 1, 0, 0, 0)


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _packed_files(dist: metadata.Distribution) -> list[tuple[str, bytes]]:
    files = []
    for path in dist.files or []:
        parts = PurePosixPath(str(path)).parts
        if parts[0] == ".." or "__pycache__" in parts or path.suffix == ".pyc":
            continue  # console scripts (pip makes them again from entry_points.txt) and byte code
        if parts[0].endswith(".dist-info") and parts[-1] in _NOT_PACKED:
            continue
        files.append((str(PurePosixPath(*parts)), Path(path.locate()).read_bytes()))
    return sorted(files)


def build_wheel(name: str, out_dir: str | Path) -> Path:
    """Write `<name>-<version>-py3-none-any.whl` into out_dir; returns its path."""
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError as err:
        raise SystemExit(f"wheel_from_env: {name!r} is not installed in this environment") from err
    wheel_text = dist.read_text("WHEEL") or ""
    if "Root-Is-Purelib: true" not in wheel_text or "Tag: py3-none-any" not in wheel_text:
        raise SystemExit(
            f"wheel_from_env: {name} {dist.version} is not pure Python (py3-none-any); "
            "download its wheel for the GPU's platform instead"
        )
    files = _packed_files(dist)
    info_dirs = {arc.split("/")[0] for arc, _ in files if arc.split("/")[0].endswith(".dist-info")}
    if len(info_dirs) != 1:
        raise SystemExit(
            f"wheel_from_env: expected one .dist-info folder for {name}, found {sorted(info_dirs)}"
        )
    record_name = f"{info_dirs.pop()}/RECORD"
    record = "".join(f"{arc},{_hash(data)},{len(data)}\n" for arc, data in files) + f"{record_name},,\n"
    stem = dist.metadata["Name"].replace("-", "_")
    target = Path(out_dir) / f"{stem}-{dist.version}-py3-none-any.whl"
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as wheel:
        for arc, data in [*files, (record_name, record.encode())]:
            wheel.writestr(zipfile.ZipInfo(arc, _EPOCH), data, zipfile.ZIP_DEFLATED)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="+", help="installed distributions to wheel")
    parser.add_argument("-d", "--dest", default=".whl", help="folder for the wheels [.whl]")
    args = parser.parse_args()
    for name in args.names:
        print(build_wheel(name, args.dest))


if __name__ == "__main__":
    main()
