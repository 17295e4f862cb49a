"""Run directories, resolved configs and the one-line JSON summary every command ends with."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import numpy as np
from omegaconf import DictConfig, OmegaConf


def make_run_dir(root: str | Path, name: str) -> Path:
    """``<root>/<YYYY-MM-DD>/<HH-MM-SS>-<name>/``, created; a numeric suffix avoids clashes."""
    now = datetime.now()
    base = Path(root) / now.strftime("%Y-%m-%d") / f"{now.strftime('%H-%M-%S')}-{name}"
    path, i = base, 1
    while path.exists():
        path = base.with_name(f"{base.name}-{i}")
        i += 1
    path.mkdir(parents=True)
    return path


def save_config(cfg: DictConfig, run_dir: Path) -> Path:
    """Write the resolved config as ``config.yaml`` (enough to reproduce the run)."""
    path = run_dir / "config.yaml"
    path.write_text(OmegaConf.to_yaml(cfg, resolve=True))
    return path


def config_list(node: Any) -> list[Any]:
    """A list config entry (``cfg.<key>``) as a plain list."""
    value = OmegaConf.to_object(node)
    if not isinstance(value, list):
        raise TypeError(f"expected a list, got {value!r}")
    return value


def config_dict(node: Any) -> dict[str, Any]:
    """A mapping config entry (``cfg.<key>``) as a plain dict with str keys."""
    value = OmegaConf.to_object(node)
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise TypeError(f"expected a mapping with str keys, got {value!r}")
    return cast(dict[str, Any], value)


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, Path):
        return str(x)
    if isinstance(x, float):
        return round(x, 6)
    return x


def emit_summary(summary: dict[str, Any]) -> None:
    """Print the command's summary as one JSON line on stdout (progress goes to stderr)."""
    sys.stdout.write(json.dumps(_jsonable(summary)) + "\n")
    sys.stdout.flush()
