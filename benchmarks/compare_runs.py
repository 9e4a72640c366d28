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
    "completed_at_utc",
    "migrated_at_utc",
    "saved",
    "loaded",
    # the digest of a zip's bytes: zip members carry the time they were written
    "sha256",
    "source_sha256",
    "latency",  # measured time, not behaviour
}
NOT_COMPARED = {".png", ".html", ".txt", ".md", ".sha256", ".sha256sums", ".db"}
SKIPPED_FOLDERS = {"mlflow", "resume", "mlartifacts", "mlruns"}
# An append-only folder of one file per run: compared as the rows of all its files together.
APPEND_ONLY = "trial_ledger"
VERSION = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}\.\d{2}\.\d{2}\.\d{3}Z$")  # Kedro's save version


def newest_versions(data: Path) -> dict[str, Path]:
    """``{dataset file relative to data/, version folder left out: its newest version's file}``
    (a versioned dataset is ``<name>/<version>/<name>``; unversioned files are taken as they are)."""
    found: dict[str, tuple[str, Path]] = {}
    for path in sorted(data.rglob("*")):
        parts = path.relative_to(data).parts
        if not path.is_file() or path.name == ".gitkeep" or SKIPPED_FOLDERS & set(parts):
            continue
        if APPEND_ONLY in parts[:-1]:
            key = "/".join(parts[: parts.index(APPEND_ONLY) + 1])
            found.setdefault(key, ("", path.parent))
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
        if name.rpartition(".")[2] in RUN_TIME_KEYS:
            return
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
    """Digest of every tensor file in a (possibly nested) zip, or of a torch file itself; of every
    member of a zip that holds no weights (an env spec archive)."""
    if not zipfile.is_zipfile(io.BytesIO(raw)):
        return _tensor_digest(raw)
    parts = []
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        if any(name.endswith("/data.pkl") for name in archive.namelist()):  # torch.save's own zip
            return _tensor_digest(raw)
        names = sorted(archive.namelist())
        holds_weights = any(name.endswith((".pth", ".pt", ".zip")) for name in names)
        for name in names:
            member = archive.read(name)
            if name.endswith((".pth", ".pt")):
                parts.append(f"{name}:{_tensor_digest(member)}")
            elif name.endswith(".zip"):
                parts.append(f"{name}:{weights_digest(member)}")
            elif not holds_weights:  # a data archive (an env spec): every member's bytes
                parts.append(f"{name}:{hashlib.sha256(member).hexdigest()}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def _compare_onnx(before: Path, after: Path) -> tuple[str, str]:
    """The graphs' weights (initializers) and operators in order: node and value names carry the
    module path of the exported class, which a move changes without changing the function."""
    import onnx
    from onnx import numpy_helper

    left, right = onnx.load(str(before)), onnx.load(str(after))
    weights = [sorted(numpy_helper.to_array(t).tobytes() for t in model.graph.initializer) for model in (left, right)]
    operators = [[node.op_type for node in model.graph.node] for model in (left, right)]
    if weights[0] == weights[1] and operators[0] == operators[1]:
        return "identical", f"{len(weights[0])} initializers, {len(operators[0])} operators"
    return "differs", "initializers or operators"


def compare_file(before: Path, after: Path) -> tuple[str, str]:
    """``(status, detail)``: ``identical``, ``differs`` or ``not compared``."""
    if before.is_dir():  # an append-only ledger folder
        left, right = (pd.concat([pd.read_parquet(f) for f in sorted(d.glob("*.parquet"))]) for d in (before, after))
        before_rows = left.drop(columns=[c for c in left.columns if c in RUN_TIME_KEYS]).reset_index(drop=True)
        after_rows = right.drop(columns=[c for c in right.columns if c in RUN_TIME_KEYS]).reset_index(drop=True)
        try:
            pd.testing.assert_frame_equal(before_rows, after_rows, check_exact=True)
            return "identical", f"{len(before_rows)} rows"
        except AssertionError as error:
            return "differs", str(error).splitlines()[0][:200]
    suffix = before.suffix or before.name  # ".sha256sums" has no suffix of its own
    if suffix == ".onnx":
        return _compare_onnx(before, after)
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
    parser.add_argument("--exclude", action="append", default=[], help="a folder under --data to leave out (ci)")
    parser.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="KEY",
        help="a report key whose difference is explained (e.g. a class path a move changed): listed, not failed",
    )
    args = parser.parse_args()
    before, after = (
        {key: path for key, path in newest_versions(root / args.data).items() if key.split("/")[0] not in args.exclude}
        for root in (args.before, args.after)
    )
    failed = False
    for key in sorted(set(before) | set(after)):
        if key not in before or key not in after:
            print(f"only in {'after' if key in after else 'before'}: {key}")
            failed = True
            continue
        status, detail = compare_file(before[key], after[key])
        if status == "differs" and detail and set(detail.split(", ")) <= set(args.allow):
            status = "allowed"
        failed |= status == "differs"
        print(f"{status:13} {key}  {detail}")
    print("DIFFERENT" if failed else "IDENTICAL (every compared dataset)")
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
