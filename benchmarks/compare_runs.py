"""Compare the outputs of two runs of the same command, dataset by dataset: what a restructuring that
must not change behaviour is checked with ("tables, models' digests and ledger rows identical").

    python benchmarks/compare_runs.py BEFORE_PROJECT AFTER_PROJECT [--data data]

Each project's newest version of every dataset under ``data/`` is compared with the other's:
parquet tables value by value (run-time columns such as timestamps, save versions and commits
left out), JSON reports key by key (the same run-time keys left out), model files by the digest of
their weights (every ``*.pth`` / ``*.pt`` tensor, inside nested zips too, so a class moved to another
module does not count), ONNX files by bytes. Figures and HTML pages are listed, not compared (they
print the run's save version). Exits 1 when anything compared differs.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import re
import sys
import zipfile
from pathlib import Path
from typing import Any

import pandas as pd
import torch

# Keys and columns that name the run rather than what it computed.
RUN_TIME_KEYS = {
    "timestamp",
    "save_version",
    "scored_in",
    "run_id",
    "mlflow_run_id",
    "git_commit",
    "started",
    "finished",
    "created",
    "elapsed",
    "elapsed_seconds",
    "duration_seconds",
    "seconds",
    "wall_seconds",
    "run",
    "path",
    "paths",
    "input_versions",
    "model_metadata",
    "code_version",
    "hostname",
    "user",
}
NOT_COMPARED = {".png", ".html", ".txt", ".md"}
VERSION = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}\.\d{2}\.\d{2}\.\d{3}Z$")  # Kedro's save version


def newest_versions(data: Path) -> dict[str, Path]:
    """``{dataset file relative to data/, version folder left out: its newest version's file}``
    (a versioned dataset is ``<name>/<version>/<name>``; unversioned files are taken as they are)."""
    found: dict[str, tuple[str, Path]] = {}
    for path in sorted(data.rglob("*")):
        parts = path.relative_to(data).parts
        if not path.is_file() or path.name == ".gitkeep" or {"mlflow", "resume"} & set(parts):
            continue
        versions = [part for part in parts if VERSION.match(part)]
        key = "/".join(part for part in parts if not VERSION.match(part))
        version = versions[0] if versions else ""
        if key not in found or version > found[key][0]:
            found[key] = (version, path)
    return {key: path for key, (_, path) in found.items()}


def _drop_run_time(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _drop_run_time(item) for key, item in value.items() if key not in RUN_TIME_KEYS}
    if isinstance(value, list):
        return [_drop_run_time(item) for item in value]
    return value


def _differences(before: Any, after: Any, prefix: str = "") -> list[str]:
    if isinstance(before, dict) and isinstance(after, dict):
        keys = sorted(set(before) | set(after), key=str)
        return [path for key in keys for path in _differences(before.get(key), after.get(key), f"{prefix}.{key}")]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [path for i, (b, a) in enumerate(zip(before, after)) for path in _differences(b, a, f"{prefix}[{i}]")]
    same = before == after or (before != before and after != after)  # NaN == NaN here
    return [] if same else [prefix or "."]


def _tensor_digest(raw: bytes) -> str:
    state = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=False)
    digest = hashlib.sha256()

    def add(value: Any, name: str) -> None:
        if isinstance(value, torch.Tensor):
            digest.update(f"{name}:{value.dtype}:{tuple(value.shape)}".encode())
            digest.update(value.detach().contiguous().numpy().tobytes())
        elif isinstance(value, dict):
            for key in sorted(value, key=str):
                add(value[key], f"{name}.{key}")
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                add(item, f"{name}[{index}]")
        else:
            digest.update(f"{name}={value!r}".encode())

    add(state, "")
    return digest.hexdigest()[:32]


def weights_digest(raw: bytes) -> str:
    """Digest of every tensor file in a (possibly nested) zip, or of a torch file itself."""
    if not zipfile.is_zipfile(io.BytesIO(raw)):
        return _tensor_digest(raw)
    parts = []
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        if any(name.endswith("/data.pkl") for name in archive.namelist()):  # torch.save's own zip
            return _tensor_digest(raw)
        for name in sorted(archive.namelist()):
            member = archive.read(name)
            if name.endswith((".pth", ".pt")):
                parts.append(f"{name}:{_tensor_digest(member)}")
            elif name.endswith(".zip"):
                parts.append(f"{name}:{weights_digest(member)}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def compare_file(before: Path, after: Path) -> tuple[str, str]:
    """``(status, detail)``: ``identical``, ``differs`` or ``not compared``."""
    suffix = before.suffix
    if suffix in NOT_COMPARED:
        return "not compared", suffix
    if suffix == ".parquet":
        left, right = pd.read_parquet(before), pd.read_parquet(after)
        left = left.drop(columns=[c for c in left.columns if c in RUN_TIME_KEYS])
        right = right.drop(columns=[c for c in right.columns if c in RUN_TIME_KEYS])
        try:
            pd.testing.assert_frame_equal(left, right, check_exact=True)
            return "identical", f"{left.shape[0]} rows x {left.shape[1]} columns"
        except AssertionError as error:
            return "differs", str(error).splitlines()[0][:200]
    if suffix == ".json" or suffix in (".yml", ".yaml"):
        load = json.loads if suffix == ".json" else __import__("yaml").safe_load
        left, right = (_drop_run_time(load(path.read_text())) for path in (before, after))
        differing = _differences(left, right)
        return ("identical", "") if not differing else ("differs", ", ".join(differing[:8]))
    if suffix in (".zip", ".pt", ".pth"):
        left_digest, right_digest = weights_digest(before.read_bytes()), weights_digest(after.read_bytes())
        return ("identical", left_digest) if left_digest == right_digest else ("differs", "weights")
    same = before.read_bytes() == after.read_bytes()
    return ("identical" if same else "differs"), "bytes"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--data", default="data", help="the data folder inside each project")
    args = parser.parse_args()
    before, after = newest_versions(args.before / args.data), newest_versions(args.after / args.data)
    failed = False
    for key in sorted(set(before) | set(after)):
        if key not in before or key not in after:
            print(f"only in {'after' if key in after else 'before'}: {key}")
            failed = True
            continue
        status, detail = compare_file(before[key], after[key])
        failed |= status == "differs"
        print(f"{status:13} {key}  {detail}")
    print("DIFFERENT" if failed else "IDENTICAL (every compared dataset)")
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
