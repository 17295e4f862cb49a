"""``key=value`` command-line arguments of the ``bench/`` scripts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def key_values(
    argv: Sequence[str], defaults: Mapping[str, str], usage: str | None, required: str = ""
) -> dict[str, str]:
    """``defaults`` updated from ``key=value`` arguments. An unknown key exits with a one-line
    error naming the known ones; an empty ``required`` value exits with ``usage``."""
    args = dict(defaults)
    for a in argv:
        key, _, value = a.partition("=")
        if key not in args:
            raise SystemExit(f"unknown argument {key!r}; expected one of {sorted(args)}")
        args[key] = value
    if required and not args[required]:
        raise SystemExit(usage)
    return args
