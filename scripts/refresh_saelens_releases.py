"""Refresh the SAELens release list ``saelens:RELEASE/SAE_ID`` reads without sae-lens installed:
``src/whitebox_eval/sae/data/saelens_releases.json.gz``, a dated snapshot of SAELens'
``pretrained_saes.yaml`` (MIT licence, Copyright (c) 2023 Joseph Bloom; the notice is kept
beside it as ``saelens_releases.LICENSE``), cut to the fields we read: each release's
``repo_id`` and ``model``, each SAE's ``id``, ``path``, ``neuronpedia`` and its own
``repo_id`` / ``model`` where it has one.

    python scripts/refresh_saelens_releases.py                       # from the installed sae-lens
    python scripts/refresh_saelens_releases.py --from sae_lens-6.54.12-py3-none-any.whl
    python scripts/refresh_saelens_releases.py --from path/to/pretrained_saes.yaml --version 6.54.12

The output is deterministic (sorted keys, gzip without a time stamp): the same list gives the
same bytes, so a refresh that changes nothing changes no file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import re
import sys
import zipfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "src" / "whitebox_eval" / "sae" / "data"
OUT, LICENSE = DATA / "saelens_releases.json.gz", DATA / "saelens_releases.LICENSE"
RELEASE_KEYS, SAE_KEYS = ("repo_id", "model"), ("id", "path", "neuronpedia", "repo_id", "model")
LIST, LICENSE_NAME = "sae_lens/pretrained_saes.yaml", "LICENSE"


def _installed() -> tuple[str, str, str]:
    """(yaml text, licence text, version) of the installed sae-lens, read as files (not imported)."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution("sae-lens")
    except PackageNotFoundError:
        sys.exit("sae-lens is not installed: pip install sae-lens, or give --from a wheel or pretrained_saes.yaml")
    files = {str(f): f for f in dist.files or []}
    licence = next((dist.locate_file(f).read_text() for name, f in files.items() if name.endswith("/" + LICENSE_NAME)
                    or name.endswith("licenses/" + LICENSE_NAME)), "")
    return dist.locate_file(files[LIST]).read_text(encoding="utf-8"), licence, dist.version


def _from(path: Path, version: str | None) -> tuple[str, str, str]:
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
            licence = next((z.read(n).decode() for n in names if n.endswith(".dist-info/licenses/" + LICENSE_NAME)
                            or n.endswith(".dist-info/" + LICENSE_NAME)), "")
            found = re.match(r"sae_lens-([^-]+)-", path.name)
            return z.read(LIST).decode("utf-8"), licence, version or (found.group(1) if found else "unknown")
    licence_file = path.parent.parent / LICENSE_NAME
    return (path.read_text(encoding="utf-8"), licence_file.read_text() if licence_file.is_file() else "",
            version or "unknown")


def snapshot(text: str, version: str, date: str) -> dict:
    """The release list cut to the fields ``whitebox_eval.sae.sources`` reads."""
    data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    lookup = data.get("SAE_LOOKUP", data) if isinstance(data, dict) else None
    if not isinstance(lookup, dict):
        sys.exit("the release list holds no releases (a mapping of release names)")
    releases = {}
    for name, entry in sorted(lookup.items()):
        entry = entry or {}
        releases[str(name)] = {**{k: entry[k] for k in RELEASE_KEYS if entry.get(k) is not None},
                               "saes": [{k: s[k] for k in SAE_KEYS if s.get(k) is not None}
                                        for s in entry.get("saes") or [] if isinstance(s, dict)]}
    return {"source": {"package": "sae-lens", "version": version, "file": LIST, "taken": date,
                       "licence": "MIT, Copyright (c) 2023 Joseph Bloom (saelens_releases.LICENSE)"},
            "releases": releases}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--from", dest="source", type=Path, help="a sae-lens wheel or a pretrained_saes.yaml")
    ap.add_argument("--version", help="the sae-lens version the file is from (read from a wheel's name)")
    ap.add_argument("--date", default=dt.date.today().isoformat(), help="the snapshot's date (default today)")
    ap.add_argument("--out", type=Path, default=OUT, help=f"where to write it (default {OUT.relative_to(ROOT)})")
    args = ap.parse_args(argv)
    text, licence, version = _from(args.source, args.version) if args.source else _installed()
    if "MIT License" not in licence:
        sys.exit("no MIT licence text found beside the release list: the snapshot keeps SAELens' notice")
    snap = snapshot(text, version, args.date)
    body = json.dumps(snap, sort_keys=True, separators=(",", ":")).encode("utf-8")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(gzip.compress(body, mtime=0))
    args.out.with_name(LICENSE.name).write_text(
        "The SAE release list in saelens_releases.json.gz is taken from SAELens' pretrained_saes.yaml\n"
        f"(sae-lens {version}, {args.date}), cut to the fields whitebox-eval reads. SAELens' licence:\n\n" + licence)
    n = sum(len(r["saes"]) for r in snap["releases"].values())
    print(f"wrote {args.out}: {len(snap['releases'])} releases, {n} SAEs, sae-lens {version}, {args.out.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
