"""``--config FILE``: a study command's options from a YAML or JSON file, or from a finished
run's ``config.yaml`` (to run it again, e.g. with another ``--model``).

The file's keys are the command's option names (``n_options`` or ``n-options``); options
given on the command line override them (``--output`` and ``--run-id`` included). In a
run's config.yaml, the keys that are records rather than options are read as checks or
ignored (:data:`RECORD_KEYS`): ``suite`` must name this command; versions, commit, dates,
data hashes, the placement, the parsed task (``task_spec``, re-parsed from ``task``), the
run id (a re-run gets a new folder unless ``--run-id`` names one) and the ``_volatile``
list are not options. A key that is neither an option nor a record is an error naming it
(exit 2): a typo never runs silently with a default.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

#: config.yaml keys that record a run rather than set an option (read as checks or ignored)
RECORD_KEYS = frozenset({
    "suite", "run_id", "created", "_volatile", "data_files", "demonstrations", "placement", "task_spec",
    "python_version", "torch_version", "transformers_version", "whitebox_eval_version", "whitebox_eval_git_commit",
    "versions", "git", "date", "sae_loaded", "model_source", "resolved",
})


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The mapping a YAML (``.yaml``/``.yml``) or JSON file holds; a bad file is one line."""
    import yaml

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise click.BadParameter(f"cannot read {path}: {error}", param_hint="--config") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise click.BadParameter(f"{path} is not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {first}",
                                 param_hint="--config") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise click.BadParameter(f"{path} must hold a mapping of option names to values, not a "
                                 f"{type(data).__name__}", param_hint="--config")
    return dict(data)


def _value(param: click.Parameter, value: Any, key: str, path: str) -> Any:
    """A file's value as the option takes it: a list becomes a comma list for a single-valued
    text option (``methods: [baseline, qk]``), stays a list for a repeatable one."""
    if isinstance(value, (list, tuple)):
        if getattr(param, "multiple", False) or param.nargs != 1:
            return list(value)
        return ",".join(str(v) for v in value)
    if isinstance(value, Mapping):
        raise click.BadParameter(f"{path}: {key} is a mapping; the option --{key.replace('_', '-')} takes a value",
                                 param_hint="--config")
    if getattr(param, "multiple", False):
        return [value]
    return value


def _field_defaults(configs: tuple[str, ...]) -> dict[str, Any]:
    """Each config dataclass field's default (the first class naming a field wins)."""
    import dataclasses

    from whitebox_eval.lazy import resolve

    out: dict[str, Any] = {}
    for name in configs:
        for f in dataclasses.fields(resolve(name)):
            if f.name in out:
                continue
            if f.default is not dataclasses.MISSING:
                out[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
                out[f.name] = f.default_factory()  # type: ignore[misc]
    return out


def _same(a: Any, b: Any) -> bool:
    norm = (lambda v: list(v) if isinstance(v, (list, tuple)) else v)
    return norm(a) == norm(b)


def options_from_file(command: click.Command, path: str, configs: tuple[str, ...] = ()) -> dict[str, Any]:
    """The ``default_map`` the file gives ``command`` (see the module docstring). ``configs``:
    the study's config classes as ``module:attribute``; a run's config.yaml key that is a
    field without an option must hold the field's default (else the command cannot repeat
    the run, and says so)."""
    data = read_config_file(path)
    params: dict[str, click.Parameter] = {}
    for p in command.params:
        if isinstance(p, click.Option) and p.name and p.expose_value:
            params[p.name] = p
            for opt in p.opts:  # --task for the param `tasks`, --n-options for n_options
                params.setdefault(opt.lstrip("-").replace("-", "_"), p)
    defaults = _field_defaults(configs) if configs else {}
    out: dict[str, Any] = {}
    unknown, fixed = [], []
    a_run = "whitebox_eval_version" in data  # a finished run's config.yaml: its run id is a record
    for raw_key, value in data.items():
        key = str(raw_key).replace("-", "_")
        if key == "suite" and value not in (None, command.name):
            raise click.BadParameter(f"{path} is a config of the {value} suite, not {command.name}: "
                                     f"run it with `whitebox-eval {value} --config {path}`", param_hint="--config")
        if (a_run and key in RECORD_KEYS) or key == "config":
            continue
        if key not in params:
            if a_run and key in defaults:
                if not _same(value, defaults[key]):
                    fixed.append(f"{key}={value!r}")
            elif key not in RECORD_KEYS:
                unknown.append(str(raw_key))
            continue
        if value is None:
            continue
        out[params[key].name] = _value(params[key], value, key, path)
    if fixed:
        raise click.BadParameter(f"{path} sets {', '.join(fixed)}, which `whitebox-eval {command.name}` has no "
                                 "option for (the run was made from Python): repeat it with whitebox_eval.studies",
                                 param_hint="--config")
    if unknown:
        known = ", ".join(sorted(params))
        raise click.BadParameter(f"{path}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
                                 f"(not an option of `whitebox-eval {command.name}`; its options: {known})",
                                 param_hint="--config")
    return out


class _ConfigOption(click.Option):
    """``--config``, not read when ``--help`` is asked for too (the help needs no file)."""

    def handle_parse_result(self, ctx, opts, args):
        helps = {p.name for p in ctx.command.get_params(ctx) if p.is_eager and "--help" in p.opts}
        if any(opts.get(h) for h in helps | {"help"}):
            opts = {k: v for k, v in opts.items() if k != self.name}
        return super().handle_parse_result(ctx, opts, args)


def config_file_option(*configs: str):
    """``--config FILE`` (read first; every option given on the command line wins); ``configs``:
    the study's config classes (``module:attribute``), for the fields that have no option."""
    def load(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
        if value is None:
            return
        ctx.default_map = {**(ctx.default_map or {}), **options_from_file(ctx.command, value, configs)}

    return lambda f: click.option(
        "--config", "config_file", cls=_ConfigOption, metavar="FILE", is_eager=True, expose_value=False, callback=load,
        help="YAML or JSON file of this command's options (keys are option names, e.g. limit: 100, methods: "
             "[baseline, qk]), or a finished run's config.yaml to run it again; options given here win; an "
             "unknown key is an error")(f)
