"""Model directories on disk: replace only what ptui wrote, and notice edits on load.

A ptui model directory holds ``meta.json`` plus the files it lists under ``files`` (name -> SHA-256),
whatever the model kind (the NN's ``time.npz``/``power.npz``, or any other kind's arrays).
``meta.json`` also carries ``digest``, a SHA-256 over its own content and the file checksums, so an
edited device name, a swapped or damaged weight file is reported on load instead of silently used.

Writing (write_model_dir): the new model goes into a hidden sibling directory that is swapped in
at the end.  An existing directory is replaced only when it is a ptui model directory holding
nothing but the files ptui recorded there; the working directory and its parents never are.
check_out_dir() runs the same test up front so a command can refuse before training.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import stat
import tempfile
from pathlib import Path

from ..board.files import PathError, check_name_length, existing, read_head, write_error
from ..board.locks import current_umask as _umask
from ..board.locks import pid_alive as _pid_alive
from .nets import ModelError

META = "meta.json"
LEGACY_FILES = ("time.npz", "power.npz")     # models written before meta.json listed its files
_NEW, _OLD = "ptui-new", "ptui-old"


def _error(msg: str):
    return ModelError(msg)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def finite_json(obj):
    """obj with non-finite floats replaced by None (JSON has no NaN or Infinity)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj


def meta_digest(meta: dict) -> str:
    """The digest of meta.json's content; a NaN or infinity (which ptui never writes) gives a
    digest no model has, so the model reads as damaged (it was a ValueError traceback)."""
    body = {k: v for k, v in meta.items() if k != "digest"}
    try:
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except ValueError:
        return "not-finite"
    return hashlib.sha256(text.encode()).hexdigest()


def _read_meta(d: Path) -> dict | None:
    got = read_head(d / META)                 # a regular file only, and at most READ_CAP bytes
    if got is None or not got[1]:
        return None
    try:
        meta = json.loads(got[0].decode("utf-8"))
    except ValueError:
        return None
    if not isinstance(meta, dict) or not str(meta.get("format", "")).startswith("ptui-"):
        return None
    return meta


def owned_names(meta: dict) -> set[str]:
    files = meta.get("files")
    names = set(files) if isinstance(files, dict) else set(LEGACY_FILES)
    return names | {META}


def check_out_dir(directory) -> Path:
    """Refuse (ModelError) a --out that ptui may not replace; return its absolute path."""
    text = str(directory)
    if not text.strip():
        raise _error("--out is empty; give a directory for the model")
    d = Path(os.path.abspath(text))
    if Path(text).is_symlink():
        raise _error(f"{text} is a symbolic link; give the model directory itself")
    real, cwd = d.resolve(), Path.cwd().resolve()
    if real == cwd or real in cwd.parents:
        raise _error(f"{text} is the working directory or one of its parents; ptui will not replace "
                     f"it: give a new directory for the model, e.g. --out ./model")
    try:
        st = existing(d, "--out", "a directory")
        check_name_length(d)                  # room for the hidden sibling it is written in
    except PathError as e:
        raise _error(str(e)) from None
    if st is None:
        for p in d.parents:
            if p.exists():
                if not p.is_dir():
                    raise _error(f"{text}: {p} is a file, not a directory; nothing written")
                break
        return d
    if not stat.S_ISDIR(st.st_mode):
        raise _error(f"{text} exists and is not a model directory; nothing written")
    entries = sorted(e.name for e in d.iterdir())
    if not entries:
        return d
    meta = _read_meta(d)
    if meta is None:
        raise _error(f"{text} exists and is not a ptui model directory (no ptui meta.json); ptui "
                     f"only replaces its own model directories: choose a new --out")
    foreign = [n for n in entries if n not in owned_names(meta)]
    if foreign:
        more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        raise _error(f"{text} holds files ptui did not write ({', '.join(foreign[:3])}{more}); "
                     f"move them out or choose a new --out")
    return d


def _clean_stale(d: Path) -> None:
    """Hidden temporaries of d left by a ptui process that died mid-save (kill -9)."""
    for p in d.parent.glob(f".{d.name}.ptui-*-*-*"):
        parts = p.name[len(d.name) + 2:].split("-")       # ptui, new|old, pid, random
        if len(parts) < 4 or parts[1] not in ("new", "old") or not parts[2].isdigit():
            continue
        if _pid_alive(int(parts[2])) or not p.is_dir():
            continue
        if parts[1] == "old" and not d.exists():
            os.replace(p, d)                  # died between the two renames: put the old one back
        else:
            shutil.rmtree(p, ignore_errors=True)


def write_model_dir(directory, meta: dict, write_files) -> Path:
    """Write a model directory: write_files(tmp_dir) puts the weight files in, then meta.json gets
    their checksums, and the directory is swapped in.  Refuses what check_out_dir refuses."""
    d = check_out_dir(directory)
    try:
        d.parent.mkdir(parents=True, exist_ok=True)
        _clean_stale(d)
        tmp = Path(tempfile.mkdtemp(prefix=f".{d.name}.{_NEW}-{os.getpid()}-", dir=d.parent))
        os.chmod(tmp, 0o777 & ~_umask())
    except OSError as e:
        raise write_error(d, e) from None
    try:
        write_files(tmp)
        files = {p.name: sha256_file(p) for p in sorted(tmp.iterdir()) if p.name != META}
        meta = finite_json(dict(meta, files=files))
        meta.pop("digest", None)
        meta["digest"] = meta_digest(meta)
        (tmp / META).write_text(json.dumps(meta, indent=2, sort_keys=True, allow_nan=False) + "\n")
        check_out_dir(d)                     # again: something may have appeared while training
        if d.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{d.name}.{_OLD}-{os.getpid()}-", dir=d.parent))
            os.rmdir(old)
            os.replace(d, old)
            os.replace(tmp, d)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, d)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError):            # disk full, read-only, ...: one line
            raise write_error(d, e) from None
        raise
    return d


def verify_model_dir(d: Path, meta: dict) -> None:
    """ModelError unless meta.json and every file it lists are as ptui wrote them.  Models written
    before checksums were recorded (no ``files``) are accepted as they are."""
    files = meta.get("files")
    if files is None:
        return
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise _error(f"{d}/{META}: 'files' is not a name -> checksum table; not a ptui model")
    for name, digest in files.items():
        f = d / name
        if Path(name).name != name:
            raise _error(f"{d}/{META}: bad file name {name!r}")
        if not f.is_file():
            raise _error(f"{f}: missing (meta.json lists it); rebuild the model with ptui fit")
        if sha256_file(f) != digest:
            raise _error(f"{f}: corrupt or replaced (it differs from the file ptui wrote; "
                         f"meta.json records its checksum); rebuild the model with ptui fit")
    if meta.get("digest") != meta_digest(meta):
        raise _error(f"{d}/{META} was edited after ptui wrote it (its checksum does not match); "
                     f"rebuild the model with ptui fit")
