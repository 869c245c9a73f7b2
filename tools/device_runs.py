"""Put back the device-run archives that are kept out of the clone (run stores, composite exports,
bulk timelines), listed in docs/device-runs/archived.txt with their sizes and SHA-256.

    python tools/device_runs.py list [FOLDER ...]
    python tools/device_runs.py restore [FOLDER ...] [--archive FILE.tgz]
    python tools/device_runs.py pack FILE.tgz

``restore`` writes the files of the folders named (all of them without a name) back into
docs/device-runs/, from the commit the list names (git history of a full clone), or from a
``pack``ed archive (a release asset: the same paths, from the repository root), and checks each
against its hash.  Restored files are ignored by git (.gitignore), so they never go back in.
``pack`` writes that archive from files already restored.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "docs" / "device-runs"
LIST = RUNS / "archived.txt"


@dataclass(frozen=True)
class Archived:
    sha256: str
    size: int
    path: str  # from the repository root

    @property
    def folder(self) -> str:
        return Path(self.path).relative_to("docs/device-runs").parts[0]


def read_list() -> tuple[str, list[Archived]]:
    """The commit that holds the files, and the files."""
    commit, files = "", []
    for line in LIST.read_text(encoding="utf-8").splitlines():
        if line.startswith("# commit "):
            commit = line.split()[2]
        elif line.strip() and not line.startswith("#"):
            digest, size, path = line.split(maxsplit=2)
            files.append(Archived(digest, int(size), path))
    if not commit:
        raise SystemExit(f"{LIST}: no '# commit' line")
    return commit, files


def _chosen(files: list[Archived], folders: list[str]) -> list[Archived]:
    known = {f.folder for f in files}
    unknown = sorted(set(folders) - known)
    if unknown:
        raise SystemExit(f"no archived files in {', '.join(unknown)}; folders with some: {', '.join(sorted(known))}")
    return [f for f in files if not folders or f.folder in folders]


def _from_git(commit: str, path: str) -> bytes:
    try:
        return subprocess.run(["git", "show", f"{commit}:{path}"], cwd=ROOT, capture_output=True, check=True).stdout
    except subprocess.CalledProcessError as exc:
        raise SystemExit(f"git cannot show {commit}:{path} (a shallow clone? fetch the history or use --archive): "
                         f"{exc.stderr.decode(errors='replace').strip()}") from None


def restore(files: list[Archived], commit: str, archive: Path | None) -> int:
    members = tarfile.open(archive) if archive is not None else None
    for f in files:
        if members is not None:
            extracted = members.extractfile(f.path)
            if extracted is None:
                raise SystemExit(f"{archive} does not hold {f.path}")
            data = extracted.read()
        else:
            data = _from_git(commit, f.path)
        if hashlib.sha256(data).hexdigest() != f.sha256:
            raise SystemExit(f"{f.path}: the content does not match its hash in {LIST.name}")
        target = ROOT / f.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        print(f"restored {f.path} ({f.size:,} bytes)")
    return 0


def pack(files: list[Archived], out: Path) -> int:
    missing = [f.path for f in files if not (ROOT / f.path).is_file()]
    if missing:
        raise SystemExit(f"restore these first: {', '.join(missing)}")
    with tarfile.open(out, "w:gz") as tar:
        for f in files:
            data = (ROOT / f.path).read_bytes()
            info = tarfile.TarInfo(f.path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    print(f"wrote {out} ({len(files)} files)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["list", "restore", "pack"])
    parser.add_argument("names", nargs="*", help="folders of docs/device-runs (list, restore); the archive (pack)")
    parser.add_argument("--archive", type=Path, help="restore from this archive instead of git history")
    args = parser.parse_args()
    commit, files = read_list()
    if args.action == "pack":
        if len(args.names) != 1:
            parser.error("pack takes the archive's path")
        return pack(files, Path(args.names[0]))
    chosen = _chosen(files, args.names)
    if args.action == "list":
        for f in chosen:
            here = "restored" if (ROOT / f.path).is_file() else "archived"
            print(f"{f.size:>10,}  {here:8}  {f.path}")
        print(f"{sum(f.size for f in chosen):,} bytes in {len(chosen)} files; in git at commit {commit}")
        return 0
    return restore(chosen, commit, args.archive)


if __name__ == "__main__":
    sys.exit(main())
