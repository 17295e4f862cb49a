"""What every config key of a ``robotrl`` command means, and which overrides it accepts.

The field docs are the YAML files themselves (``robotrl/conf``): the header comment describes the
command, the trailing ``# ...`` comment on a key's line describes the key, and comment lines
directly above a key without one describe it instead. ``robotrl <cmd> --help`` prints them next
to the defaults. :func:`check_overrides` compares every ``key=value`` override with the key
paths of the composed config before Hydra sees it, so a typo is an error that names the closest
valid keys instead of being dropped (``+key=value``) or reported in Hydra's terms.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import shutil
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

CONF_PACKAGE = "robotrl.conf"
MISSING = "???"
# A required key a user would naturally give as the first bare argument, in this order
# (``robotrl dataset verify data/lift.zarr``, ``robotrl eval <checkpoint>``).
POSITIONAL_KEYS = ("path", "checkpoint", "dataset")


class ConfigKeyError(ValueError):
    """An override names a key (or group option) the command's config does not have."""


@dataclass(frozen=True)
class KeyDoc:
    """One key as written in a YAML file."""

    path: str  # dotted, relative to the file
    raw: str  # the default as written ('' for a mapping written as an indented block)
    doc: str  # its comment ('' when it has none)
    section: str = ""  # a heading comment that stands above it (e.g. "# export")


@dataclass(frozen=True)
class ConfigDoc:
    """The comments of one YAML config file."""

    name: str
    header: str
    keys: dict[str, KeyDoc] = field(default_factory=dict)
    defaults: dict[str, str] = field(default_factory=dict)  # group -> option from `defaults:`


@dataclass(frozen=True)
class Override:
    """One command-line override split into its parts (values stay Hydra's business)."""

    text: str
    prefix: str  # '' | '+' | '++' | '~'
    path: str  # dotted key path
    value: str | None  # None for a bare '~key'


_KEY_LINE = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z_][\w\-]*)\s*:(?:\s+|$)(?P<rest>.*)$")
_DEFAULTS_ITEM = re.compile(r"^\s*-\s*(?P<group>[\w\-/]+)\s*:\s*(?P<option>[\w\-/]+)")


def _split_comment(text: str) -> tuple[str, str]:
    """``value  # comment`` -> (value, comment); a '#' inside quotes is part of the value."""
    quote = ""
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i].strip(), text[i + 1 :].strip()
    return text.strip(), ""


def _key_line(
    line: str, stack: list[tuple[int, str]]
) -> tuple[re.Match[str], str, str, str] | None:
    """``(match, dotted path, value, comment)`` of a ``key: value  # comment`` line, None for
    any other line. ``stack`` holds the (indent, key) of the enclosing mappings and is kept up
    to date: a key without a value opens a mapping."""
    m = _KEY_LINE.match(line)
    if m is None:
        return None
    indent = len(m["indent"])
    while stack and stack[-1][0] >= indent:
        stack.pop()
    path = ".".join([*(k for _, k in stack), m["key"]])
    raw, comment = _split_comment(m["rest"])
    if not raw:
        stack.append((indent, m["key"]))
    return m, path, raw, comment


def parse_config_doc(name: str, text: str) -> ConfigDoc:
    """The header, per-key comments and defaults list of one YAML config's text."""
    header: list[str] = []
    keys: dict[str, KeyDoc] = {}
    defaults: dict[str, str] = {}
    stack: list[tuple[int, str]] = []  # (indent, key) of the enclosing mappings
    pending: list[str] = []  # comment lines since the last key (docs of the next one)
    in_header, in_defaults = True, False
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            in_header = False
            pending = []  # a blank line separates a comment from the next key
            continue
        if stripped.startswith("#"):
            (header if in_header else pending).append(stripped.lstrip("#").strip())
            continue
        in_header = False
        if stripped.startswith("-"):
            item = _DEFAULTS_ITEM.match(line) if in_defaults else None
            if item:
                defaults[item["group"]] = item["option"]
            continue
        key = _key_line(line, stack)
        if key is None:
            continue  # a continuation line of a multi-line value
        _, path, raw, comment = key
        in_defaults = path == "defaults"
        section = ""
        if comment:
            section = " ".join(pending)
        else:
            comment = " ".join(pending)
        pending = []
        if not in_defaults:
            keys[path] = KeyDoc(path, raw, comment, section)
    return ConfigDoc(name, " ".join(header), keys, defaults)


def _yaml_value(value: Any) -> str:
    """A default as a one-line YAML value (tuples and lists in flow style).

    Raises:
        TypeError: a value a YAML scalar or list cannot hold as the same Python value (a
            mapping, an enum, a numpy scalar, ...).
    """
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_yaml_value(v) for v in value) + "]"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if type(value) is int:
        return repr(value)
    if type(value) is float:
        if math.isnan(value):
            return ".nan"
        return {math.inf: ".inf", -math.inf: "-.inf"}.get(value, repr(value))
    if type(value) is not str:
        raise TypeError(f"{value!r} ({type(value).__name__}) has no one-line YAML form")
    plain = re.fullmatch(r"[A-Za-z_][\w\-./]*", value) and value.lower() not in _YAML_WORDS
    return value if plain else json.dumps(value)


_YAML_WORDS = {"null", "true", "false", "yes", "no", "on", "off", "y", "n", "none"}


def same_value(a: Any, b: Any) -> bool:
    """``a == b`` with the same types all the way down (``1``, ``1.0`` and ``True`` differ;
    a tuple equals the list of its elements)."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return type(a) is type(b)
    return type(a) is type(b) and a == b


def restate_defaults(text: str, defaults: dict[str, Any]) -> str:
    """``text`` (a YAML config) with the value of every key path in ``defaults`` set to its
    default there, where the two differ; the comments and every other line are kept.

    The dataclasses a command builds are the one source of its defaults; the YAML restates them
    beside their docs, and this rewrites the restatement (``python -m robotrl.commands
    --defaults``).

    Raises:
        KeyError: a path of ``defaults`` is not a one-line value of ``text``: missing, a
            mapping or block value, a block scalar (``|``, ``>``), an interpolation
            (``${...}``) or a required value (``???``), which the dataclass would replace.
        TypeError: a default without a one-line YAML form.
    """
    lines = text.splitlines(keepends=True)
    stack: list[tuple[int, str]] = []
    seen: set[str] = set()
    for i, line in enumerate(lines):
        key = _key_line(line, stack)
        if key is None or key[1] not in defaults:
            continue
        m, path, raw, _ = key
        if not raw or raw[0] in "|>" or "${" in raw or raw == MISSING:
            what = "a mapping or block value" if not raw else f"written {raw!r}"
            raise KeyError(f"{path} is {what} in the YAML, not a one-line value to restate")
        seen.add(path)
        default = defaults[path]
        current = cast(dict[str, Any], OmegaConf.to_container(OmegaConf.create(f"v: {raw}")))["v"]
        if same_value(current, default):
            continue
        value = _yaml_value(default)
        tail = m["rest"][len(raw) :]  # the spaces and the comment after the value
        if tail.strip():  # keep the comment's column where the value allows
            spaces = len(tail) - len(tail.lstrip())
            tail = " " * max(1, spaces - (len(value) - len(raw))) + tail.lstrip()
        end = line[len(line.rstrip("\r\n")) :]
        lines[i] = f"{line[: m.start('rest')]}{value}{tail}{end}"
    missing = sorted(set(defaults) - seen)
    if missing:
        raise KeyError(f"not keys of the YAML: {missing}")
    return "".join(lines)


@cache
def read_config_doc(name: str) -> ConfigDoc:
    """The docs of ``robotrl/conf/<name>.yaml`` (``name`` may be ``group/option``)."""
    text = resources.files(CONF_PACKAGE).joinpath(f"{name}.yaml").read_text()
    return parse_config_doc(name, text)


@cache
def config_groups() -> dict[str, tuple[str, ...]]:
    """Config groups (subdirectories of ``robotrl/conf``) -> their options, sorted."""
    out: dict[str, tuple[str, ...]] = {}
    for entry in resources.files(CONF_PACKAGE).iterdir():
        if entry.is_dir():
            options = sorted(f.name[:-5] for f in entry.iterdir() if f.name.endswith(".yaml"))
            if options:
                out[entry.name] = tuple(options)
    return out


def hydra_compose(config_name: str, overrides: Sequence[str]) -> DictConfig:
    """Hydra's composition of ``robotrl/conf/<config_name>.yaml`` with ``overrides`` as given."""
    from hydra import compose as _compose
    from hydra import initialize_config_module

    with initialize_config_module(config_module=CONF_PACKAGE, version_base=None):
        return _compose(config_name=config_name, overrides=list(overrides))


def flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """Every key path of a config container (mappings too) -> its value, in order."""
    out: dict[str, Any] = {}
    if isinstance(node, dict):
        for k, v in node.items():
            path = f"{prefix}{k}"
            out[path] = v
            if isinstance(v, dict):
                out.update(flatten(v, f"{path}."))
    return out


@cache
def _composed_keys(config_name: str, group_choices: tuple[str, ...]) -> dict[str, Any]:
    cfg = hydra_compose(config_name, group_choices)
    return flatten(OmegaConf.to_container(cfg, resolve=False))


def config_keys(config_name: str, group_choices: Sequence[str] = ()) -> dict[str, Any]:
    """Key paths of the composed config (with ``group=option`` choices) -> unresolved values."""
    return dict(_composed_keys(config_name, tuple(group_choices)))


def parse_override(text: str) -> Override:
    """Split ``[+|++|~]key.path[@pkg][=value]``; raises :class:`ConfigKeyError` when it is not
    an override at all."""
    prefix = next((p for p in ("++", "+", "~") if text.startswith(p)), "")
    body = text[len(prefix) :]
    key, sep, value = body.partition("=")
    key = key.split("@", 1)[0].strip().replace("/", ".")
    if not key or (not sep and prefix != "~"):
        raise ConfigKeyError(f"{text!r} is not an override; overrides are key=value")
    return Override(text, prefix, key, value if sep else None)


def _is_open(value: Any) -> bool:
    # null and {} defaults take a mapping of free-form entries (policy_kwargs, topics,
    # device_kwargs): their sub-keys cannot be known in advance
    return value is None or (isinstance(value, dict) and not value)


def _close(word: str, candidates: Sequence[str], n: int) -> list[str]:
    # difflib's ranking, but only the near-best: a list of three loose matches buries the one
    # the user meant (residual.actor_lrr -> actor_lr, not also critic_lr and cql)
    scored = []
    for c in candidates:
        m = difflib.SequenceMatcher(None, word, c)
        if m.real_quick_ratio() >= 0.6 and m.quick_ratio() >= 0.6 and m.ratio() >= 0.6:
            scored.append((m.ratio(), c))
    scored.sort(key=lambda rc: -rc[0])
    return [c for r, c in scored[:n] if r >= scored[0][0] - 0.1]


def suggest(path: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """The valid key paths closest to ``path``: every key with the same last component, then up
    to ``n`` in all by spelling."""
    cands = list(candidates)
    last = path.rsplit(".", 1)[-1]
    same_leaf = [c for c in cands if c != path and c.rsplit(".", 1)[-1] == last]
    close = _close(path, cands, n)
    if not close and "." in path:  # a typo in the last component of a nested key
        parent = path.rsplit(".", 1)[0] + "."
        under = [c[len(parent) :] for c in cands if c.startswith(parent)]
        close = [parent + c for c in _close(last, under, n)]
    return list(dict.fromkeys([*same_leaf, *close]))[: max(n, len(same_leaf))]


def _did_you_mean(names: Sequence[str]) -> str:
    if not names:
        return ""
    quoted = [f"'{n}'" for n in names]
    alts = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
    return f"did you mean {alts}?"


def check_overrides(
    config_name: str, overrides: Sequence[str], command: str | None = None
) -> list[str]:
    """Overrides checked against the composed config's key paths, ready for Hydra.

    Unknown keys raise :class:`ConfigKeyError` naming the closest valid keys, whatever the
    prefix (``+`` and ``++`` add nothing that the config does not declare). Keys below a null or
    ``{}`` default (``policy_kwargs.dim=96``, ``+topics.cameras.front=...``) are free-form: they
    are passed on as ``++`` additions. ``command`` (e.g. ``train-bc``) goes into the hint.
    """
    parsed = [parse_override(o) for o in overrides]
    doc = read_config_doc(config_name)
    groups = config_groups()
    hint = f" (robotrl {command} --help lists every key)" if command else ""
    choices: list[str] = []
    rest: list[Override] = []
    for o in parsed:
        if o.path in doc.defaults and o.path in groups and o.prefix != "~":
            options = groups[o.path]
            if o.value not in options:
                did = _did_you_mean(difflib.get_close_matches(o.value or "", options, n=1))
                raise ConfigKeyError(
                    f"unknown {o.path} {o.value!r}; "
                    + (f"{did} " if did else "")
                    + f"choose from {', '.join(options)}"
                )
            choices.append(f"{o.path}={o.value}")
        else:
            rest.append(o)
    keys = config_keys(config_name, choices)
    out = list(choices)
    unknown: list[str] = []
    for o in rest:
        if o.path in keys:
            out.append(o.text)
            continue
        parts = o.path.split(".")
        # the deepest declared key above the path decides whether the path may exist
        depth = next((i for i in range(len(parts) - 1, 0, -1) if ".".join(parts[:i]) in keys), 0)
        parent = keys[".".join(parts[:depth])] if depth else None
        if depth and _is_open(parent) and o.prefix != "~":
            # Hydra refuses a plain override of a key its struct config does not hold yet
            out.append(o.text if o.prefix else f"++{o.text}")
        elif depth and isinstance(parent, list) and parts[depth].isdigit():
            out.append(o.text)  # a list element (image_size.0=64): Hydra checks the index
        else:
            unknown.append(o.path)
    if len(unknown) == 1:
        did = _did_you_mean(suggest(unknown[0], keys))
        raise ConfigKeyError(
            f"unknown config key '{unknown[0]}'" + (f"; {did}" if did else "") + hint
        )
    if unknown:
        each = []
        for path in unknown:
            did = _did_you_mean(suggest(path, keys))
            each.append(f"'{path}'" + (f" ({did})" if did else ""))
        raise ConfigKeyError(f"unknown config keys {', '.join(each)}{hint}")
    return out


def positional_key(config_name: str) -> str | None:
    """The required key a bare first argument stands for (``path=``, ``checkpoint=``...)."""
    keys = read_config_doc(config_name).keys
    return next((k for k in POSITIONAL_KEYS if k in keys and keys[k].raw == MISSING), None)


def required_keys(cfg: DictConfig) -> list[str]:
    """Dotted paths of the keys still ``???`` in a composed config."""
    return [
        path
        for path, value in flatten(OmegaConf.to_container(cfg, resolve=False)).items()
        if value == MISSING
    ]


def quote_value(text: str) -> str:
    """``text`` as a Hydra override value that stays the literal string (paths with spaces,
    commas, brackets or quotes)."""
    if re.fullmatch(r"[\w./\-]+", text):
        return text
    # Hydra un-escapes backslashes only before a quote or at the end of a quoted string
    escaped = re.sub(r"(\\+)(?='|$)", lambda m: m[1] * 2, text)
    escaped = escaped.replace("'", "\\'").replace("${", "\\${")
    return f"'{escaped}'"


def _format_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, list):
        return "[" + ", ".join(_format_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_format_value(v)}" for k, v in value.items()) + "}"
    return str(value)


@dataclass(frozen=True)
class _Row:
    key: str
    default: str
    doc: str
    section: str = ""


def _rows(config_name: str) -> list[_Row]:
    doc = read_config_doc(config_name)
    groups = config_groups()
    docs: dict[str, KeyDoc] = dict(doc.keys)
    group_rows: dict[str, _Row] = {}
    for group, option in doc.defaults.items():
        if group not in groups:
            continue  # _self_ and the like
        option_doc = read_config_doc(f"{group}/{option}")
        for path, kd in option_doc.keys.items():
            docs[f"{group}.{path}"] = KeyDoc(f"{group}.{path}", kd.raw, kd.doc, kd.section)
        meaning = f"config group: {' | '.join(groups[group])}"
        if option_doc.header:
            meaning += f". {option}: {option_doc.header}"
        group_rows[group] = _Row(group, option, meaning)
    rows = []
    for path, value in config_keys(config_name).items():
        if path in group_rows:
            rows.append(group_rows[path])
            continue
        key_doc = docs.get(path)
        if key_doc is not None and key_doc.raw:
            default = key_doc.raw
        elif isinstance(value, dict) and value:
            default = ""  # a block of nested keys, listed below it
        else:
            default = _format_value(value)
        if default == MISSING:
            default = "(required)"
        rows.append(
            _Row(path, default, key_doc.doc if key_doc else "", key_doc.section if key_doc else "")
        )
    return rows


def format_help(
    command: str,
    config_name: str,
    summary: str,
    width: int | None = None,
) -> str:
    """The ``robotrl <command> --help`` text: usage, what it does and every config key with its
    default and meaning, in aligned, wrapped columns."""
    if width is None:
        width = shutil.get_terminal_size((100, 24)).columns
    width = max(60, min(width, 120))
    doc = read_config_doc(config_name)
    pos = positional_key(config_name)
    usage = f"usage: robotrl {command} " + (f"[{pos.upper()}] " if pos else "") + "[key=value ...]"
    lines = [usage]
    # a header that starts with "robotrl <command>:" describes this command already; a config
    # shared by several commands (dataset) needs the command's own summary first
    if summary and not doc.header.startswith(f"robotrl {command}:"):
        lines += ["", *textwrap.wrap(summary, width)]
    if doc.header:
        lines += ["", *textwrap.wrap(doc.header, width)]
    rows = _rows(config_name)
    key_w = min(max(len(r.key) for r in rows), 28)
    def_w = min(max(len(r.default) for r in rows), 18)
    doc_col = 2 + key_w + 2 + def_w + 2
    doc_w = max(width - doc_col, 30)
    lines += [
        "",
        f"config keys (robotrl/conf/{config_name}.yaml); override with key=value, nested keys "
        "as a.b=value:",
        f"  {'key':<{key_w}}  {'default':<{def_w}}  meaning",
    ]
    for r in rows:
        if r.section:
            lines += ["", f"  # {r.section}"]
        wrapped = textwrap.wrap(r.doc, doc_w) or [""]
        if len(r.key) > key_w or len(r.default) > def_w:
            # the key or default overflows its column: the meaning starts on the next line
            def_col = 2 + key_w + 2
            values = textwrap.wrap(
                r.default,
                max(width - def_col, 30),
                break_long_words=False,
                break_on_hyphens=False,
            )
            lines.append(f"  {r.key:<{key_w}}  {values[0] if values else ''}".rstrip())
            lines += [" " * def_col + v for v in values[1:]]
            lines += [" " * doc_col + w for w in wrapped if w]
        else:
            lines.append(f"  {r.key:<{key_w}}  {r.default:<{def_w}}  {wrapped[0]}".rstrip())
            lines += [" " * doc_col + w for w in wrapped[1:]]
    notes = (
        "(required) keys must be given"
        + (f" (the first bare argument is {pos}=)" if pos else "")
        + ". Below a key whose default is null or {}, entries may be added: key={a: 1} or "
        "key.a=1. "
        "Errors are one line; --debug (or ROBOTRL_DEBUG=1) shows the traceback."
    )
    lines += ["", *textwrap.wrap(notes, width)]
    return "\n".join(lines) + "\n"


def _cell(text: str, code: bool = False) -> str:
    """``text`` safe inside a markdown table cell (``code``: it goes between backticks)."""
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if code else text.replace("<", "&lt;").replace(">", "&gt;")


def reference_markdown(commands: Sequence[tuple[str, str, str]]) -> str:
    """The configuration reference page (``docs/configuration.md``): for each ``(command,
    config name, summary)`` every key with its default and meaning, as ``--help`` shows them."""
    lines = [
        "# Configuration reference",
        "",
        "Every key of every `robotrl` command, with its default and meaning. This page is",
        "generated from the YAML files in `robotrl/conf/` (`python -m robotrl.commands",
        "docs/configuration.md`); `robotrl <command> --help` prints the same. Override a key with",
        "`key=value`, a nested one with `a.b=value`; an unknown key, or a value of another type",
        "than the default's (`total_steps=abc`), is refused in one line before anything runs.",
        "Keys that the command hands to a dataclass (the RL sections `residual`, `dsrl`,",
        "`flow_pg`; the training loops' and BC's settings) take their defaults from it: the",
        "dataclass is the one source, `python -m robotrl.commands --defaults` writes them into",
        "the YAML, and a test fails while the two differ.",
    ]
    for command, config_name, summary in commands:
        doc = read_config_doc(config_name)
        lines += ["", f"## `robotrl {command}`", ""]
        header = summary if not doc.header.startswith("robotrl ") else doc.header
        lines += [_cell(header), "", f"Config: `robotrl/conf/{config_name}.yaml`.", ""]
        lines += ["| key | default | meaning |", "|---|---|---|"]
        for r in _rows(config_name):
            default = f"`{_cell(r.default, code=True)}`" if r.default else ""
            meaning = _cell(r.doc) if not r.section else f"*{_cell(r.section)}.* {_cell(r.doc)}"
            lines.append(f"| `{r.key}` | {default} | {meaning} |")
    return "\n".join(lines) + "\n"


def compose(
    config_name: str, overrides: Sequence[str], *, command: str | None = None
) -> DictConfig:
    """Compose ``robotrl/conf/<config_name>.yaml`` with ``key=value`` overrides.

    An override of a key the config does not declare (also with ``+`` or ``++``) raises
    :class:`ConfigKeyError` naming the closest valid keys; ``command``
    (e.g. ``train-bc``) is named in its hint.
    """
    checked = check_overrides(config_name, overrides, command)
    cfg = hydra_compose(config_name, checked)
    check_types(config_name, checked, cfg)
    return cfg


def _kind(value: Any) -> str | None:
    """The type a default asks of its overrides (None: any)."""
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    return None  # strings, null and mappings: checked by the command that reads them


def _fits(kind: str, value: Any) -> bool:
    if value is None:
        return True  # null: the command decides whether the key may be empty
    if kind == "true or false":
        return isinstance(value, bool)
    if kind == "an integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "a number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, list)


# keys whose default is one value but which also take one per element (their comments say so)
PER_ELEMENT_LISTS = {("collect", "expert_bias"), ("dataset", "success")}


def check_types(config_name: str, overrides: Sequence[str], cfg: DictConfig) -> None:
    """Raise :class:`ConfigKeyError` when an override's value is not of its default's type
    (``total_steps=abc``, ``residual.utd=1.5``, ``progress=maybe``), before any work starts."""
    values = flatten(OmegaConf.to_container(cfg, resolve=False))
    choices = tuple(o for o in overrides if parse_override(o).path in config_groups())
    defaults = _composed_keys(config_name, choices)
    for text in overrides:
        o = parse_override(text)
        if o.value is None or o.path not in defaults or o.path not in values:
            continue
        kind = _kind(defaults[o.path])
        value = values[o.path]
        if kind is not None and (config_name, o.path) in PER_ELEMENT_LISTS:
            elements = value if isinstance(value, list) else [value]
            if not all(_fits(kind, v) for v in elements):
                raise ConfigKeyError(
                    f"{o.path}={o.value}: expected {kind} or a list of them "
                    f"(default {defaults[o.path]!r})"
                )
        elif kind is not None and not _fits(kind, value):
            raise ConfigKeyError(
                f"{o.path}={o.value}: expected {kind} (default {defaults[o.path]!r})"
            )
