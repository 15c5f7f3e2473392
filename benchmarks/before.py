"""avstack as it was at a git revision, for a baseline measured in the same run as the change."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def checkout(rev: str, into: Path) -> dict[str, str]:
    """The environment under which `python -c 'from avstack_cli.app import main'` is avstack at
    `rev` (its tree unpacked under `into`, first on PYTHONPATH)."""
    repo = Path(__file__).resolve().parents[1]
    tree = into / "tree"
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(repo), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    path = into / "path"
    path.mkdir()
    (path / "avstack").symlink_to(tree / "src" / "avstack")
    (path / "avstack_cli").symlink_to(tree / "cli")
    return dict(os.environ, PYTHONPATH=str(path))
