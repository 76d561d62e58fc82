"""The one way from what a user gives to a study's config: a command's options, a ``--config``
file (YAML/JSON, or a finished run's ``config.yaml``) and the config dataclass's defaults.

:func:`study_config` builds every command's config through its suite's record
(``Suite.config``): the settings are the ``--config`` file's fields, then every option the user
gave (on the command line or in the file) under its field's name (an option is named as its
field, or the command names the field: ``renames``), then what the command resolved (``--dtype
auto``, ``--batch-size auto``); a setting not given takes the dataclass's own default, stated
there once. Every value is checked against the field's declared type
(:func:`whitebox_eval.runs.settings.checked_settings`).

``--config FILE``: the file's keys are option names (``n_options`` or ``n-options``) or config
fields; options given on the command line override them. A key that is neither, nor a record,
is refused naming the nearest one. In a run's config.yaml the records (:data:`RECORD_KEYS`:
versions, dates, data hashes, the parsed task, the run id, what the run derived) are ignored;
``model_load`` maps back to the loading options (``--model-arg``, ``--adapter`` whose SHA-256 must
still match, ``--models-root``), so a run re-runs from its config.yaml alone.

:func:`read_user_file` is the boundary every user file passes (a size cap, YAML anchors and
aliases refused unexpanded, non-finite JSON numbers refused, a mapping at the top): paper files
and SAE configs may call it too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from whitebox_eval.errors import WhiteboxError

#: config.yaml keys that record a run rather than set an option (ignored when it is re-run)
RECORD_KEYS = frozenset({
    "suite", "run_id", "created", "_volatile", "data_files", "demonstrations", "demonstration", "placement",
    "task_spec", "python_version", "torch_version", "transformers_version", "whitebox_eval_version",
    "whitebox_eval_git_commit", "versions", "git", "date", "sae_loaded", "model_source", "resolved",
})

#: the largest user file read (a config or paper file is a few kB)
MAX_BYTES = 1 << 20
#: ctx.meta key of a --config file's fields that no option sets
FILE_SETTINGS = "whitebox_eval.config_settings"


def read_user_file(path: str | Path, what: str = "--config") -> dict[str, Any]:
    """The mapping a user's YAML (``.yaml``/``.yml``) or JSON file holds, read at the boundary:
    at most :data:`MAX_BYTES`, no YAML anchor or alias (refused before anything expands), no
    NaN or infinity in JSON, a mapping at the top. A fault is one :class:`WhiteboxError` line
    naming ``what`` and the file."""
    import yaml

    path = Path(path).expanduser()
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise WhiteboxError(f"{what} {path}: {size:,} bytes, over the {MAX_BYTES:,} a settings file may hold")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise WhiteboxError(f"{what}: cannot read {path}: {error}") from None
    kind = "JSON" if path.suffix == ".json" else "YAML"
    try:
        if kind == "JSON":
            data = json.loads(text, parse_constant=_no_constant)
        else:
            _no_anchors(yaml, text, path, what)
            data = yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise WhiteboxError(f"{what}: {path} is not valid {kind}: {first}") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise WhiteboxError(f"{what}: {path} must hold a mapping of names to values, not a {type(data).__name__}")
    return dict(data)


def _no_constant(name: str):
    raise ValueError(f"{name} is not a finite number")


def _no_anchors(yaml, text: str, path: Path, what: str) -> None:
    """Refuse any anchor (``&a``) or alias (``*a``): read as events, nothing is expanded."""
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            line = event.start_mark.line + 1
            raise WhiteboxError(f"{what}: {path} line {line} uses a YAML anchor or alias (&/*), which settings files "
                                "may not: write each value out")


def read_config_file(path: str | Path) -> dict[str, Any]:
    """``--config``'s file (:func:`read_user_file`), a fault as click's one-line usage error."""
    try:
        return read_user_file(path)
    except WhiteboxError as error:
        raise click.BadParameter(str(error).removeprefix("--config: "), param_hint="--config") from None


def _field_types(configs: tuple[str, ...]) -> dict[str, Any]:
    """Each config dataclass field's declared type (the first class naming a field wins)."""
    from whitebox_eval.lazy import resolve
    from whitebox_eval.runs.settings import field_types

    out: dict[str, Any] = {}
    for name in configs:
        for key, annotation in field_types(resolve(name)).items():
            out.setdefault(key, annotation)
    return out


def _model_load(value: Any, path: str) -> dict[str, Any]:
    """config.yaml's ``model_load`` as the loading options that made it."""
    from whitebox_eval.models.load_options import file_sha256, adapter_files

    if not isinstance(value, Mapping):
        raise click.BadParameter(f"{path}: model_load is a mapping", param_hint="--config")
    out: dict[str, Any] = {}
    if value.get("model_args"):
        out["model_args"] = [f"{k}={_text(v)}" for k, v in dict(value["model_args"]).items()]
    adapter = value.get("adapter")
    if adapter:
        folder = adapter.get("path") if isinstance(adapter, Mapping) else None
        if not folder:
            raise click.BadParameter(f"{path}: model_load.adapter names no path", param_hint="--config")
        try:
            _, weights = adapter_files(folder, bool(value.get("allow_pickle")))
        except WhiteboxError as error:
            raise click.BadParameter(f"{path}: {error}", param_hint="--config") from None
        if adapter.get("sha256") and file_sha256(weights) != adapter["sha256"]:
            raise click.BadParameter(f"{path}: the adapter at {folder} changed since the run (SHA-256 differs)",
                                     param_hint="--config")
        out["adapter"], out["adapter_mode"] = folder, adapter.get("mode", "merge")
    for key in ("trust_remote_code", "allow_pickle"):
        if value.get(key):
            out[key] = value[key]
    root = value.get("models_root")
    if isinstance(root, Mapping) and root.get("folder"):  # where the run found its model (relative or ~/)
        out["models_root"] = root["folder"]
    return out


def _text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _option_value(param: click.Parameter, value: Any, key: str, path: str, annotation: Any) -> Any:
    """A file's value as the option takes it, its type checked first (as the command line's):
    by the field's declared type, else by the option's own type."""
    from whitebox_eval.runs.settings import checked_value

    where = f"{path}: {key}"
    try:
        if annotation is not None:
            checked_value(annotation, value, where)
        else:
            _strict(param, value, where)
    except WhiteboxError as error:
        raise click.BadParameter(str(error), param_hint="--config") from None
    if isinstance(value, (list, tuple)):
        if getattr(param, "multiple", False) or param.nargs != 1:
            return list(value)
        return ",".join(str(v) for v in value)
    if isinstance(value, Mapping):
        raise click.BadParameter(f"{where} is a mapping; the option --{key.replace('_', '-')} takes a value",
                                 param_hint="--config")
    if getattr(param, "multiple", False):
        return [value]
    return value


def _strict(param: click.Parameter, value: Any, where: str) -> None:
    """An option without a field: a number where it takes a whole number or a flag is refused
    (click would round 1.5 to 1)."""
    from whitebox_eval.runs.settings import checked_value

    kind = getattr(param.type, "_number_class", None)
    if getattr(param, "is_flag", False) and not getattr(param, "multiple", False):
        checked_value(bool, value, where)
    elif kind in (int, float) and not isinstance(value, str):
        for v in (value if isinstance(value, (list, tuple)) else [value]):
            checked_value(kind, v, where)


def _missing(params, fields, data) -> set[str]:
    """The option and setting names a file does not name (what a misspelt key would have meant)."""
    return {*params, *fields} - {str(k).replace("-", "_") for k in data}


def options_from_file(command: click.Command, path: str, configs: tuple[str, ...] = ()) -> dict[str, Any]:
    """The ``default_map`` the file gives ``command`` (see the module docstring); the file's
    fields that no option sets go to :data:`FILE_SETTINGS` of the current context, if any."""
    from whitebox_eval.runs.settings import checked_value, nearest

    data = read_config_file(path)
    params: dict[str, click.Parameter] = {}
    for p in command.params:
        if isinstance(p, click.Option) and p.name and p.expose_value:
            params[p.name] = p
            for opt in p.opts:  # --task for the param `tasks`, --n-options for n_options
                params.setdefault(opt.lstrip("-").replace("-", "_"), p)
    fields = _field_types(configs) if configs else {}
    out: dict[str, Any] = {}
    settings: dict[str, Any] = {}
    unknown = []
    a_run = "whitebox_eval_version" in data  # a finished run's config.yaml: its run id is a record
    for raw_key, value in data.items():
        key = str(raw_key).replace("-", "_")
        if key == "suite" and value not in (None, command.name):
            raise click.BadParameter(f"{path} is a config of the {value} suite, not {command.name}: "
                                     f"run it with `whitebox-eval {value} --config {path}`", param_hint="--config")
        if (a_run and key in RECORD_KEYS) or key == "config":
            continue
        if key == "model_load" and "model_args" in params:
            for name, v in _model_load(value, path).items():
                if name in params:
                    out[params[name].name] = v
            continue
        if key in fields and (isinstance(value, Mapping) or key not in params):  # a setting no option writes
            try:
                settings[key] = checked_value(fields[key], value, f"{path}: {key}")
            except WhiteboxError as error:
                raise click.BadParameter(str(error), param_hint="--config") from None
        elif key in params:
            if value is not None:
                out[params[key].name] = _option_value(params[key], value, key, path, fields.get(params[key].name))
        elif not a_run or nearest(key, _missing(params, fields, data), cutoff=0.85):  # a run's own record, unless misspelt
            unknown.append(str(raw_key))
    if unknown:
        known = sorted({*params, *fields})
        raise click.BadParameter(f"{path}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}"
                                 f"{nearest(unknown[0], known)} (not an option of `whitebox-eval {command.name}` "
                                 f"nor a setting of its study; they are: {', '.join(known)})", param_hint="--config")
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.meta[FILE_SETTINGS] = {**ctx.meta.get(FILE_SETTINGS, {}), **settings}
    return out


def given(name: str) -> bool:
    """Whether the current command's option ``name`` was given (on the command line or in a
    ``--config`` file), not left at its default."""
    source = click.get_current_context().get_parameter_source(name)
    return source is not None and source != click.core.ParameterSource.DEFAULT


def study_config(suite, options: Mapping[str, Any], mode: str | None = None, *,
                 renames: Mapping[str, str | tuple[str, ...]] | None = None, **resolved: Any):
    """``suite``'s config for ``mode`` from a command's ``options`` (its ``**kw``): the ``--config``
    file's fields, then each option the user gave, by field name (``renames``: option -> field,
    or several; ``a.b`` is field ``b`` of the nested config ``a``), then ``resolved``; the rest
    takes the dataclass's defaults. Options that are no setting (``--output``, ...) are left out."""
    from whitebox_eval.lazy import resolve
    from whitebox_eval.runs.settings import field_types

    ctx = click.get_current_context()
    fields = field_types(resolve(suite.mode(mode).config))
    settings: dict[str, Any] = {k: v for k, v in ctx.meta.get(FILE_SETTINGS, {}).items() if k in fields}
    renames = renames or {}
    for name, value in options.items():
        if not given(name):
            continue
        targets = renames.get(name, name)
        for target in (targets,) if isinstance(targets, str) else targets:
            top, _, inner = target.partition(".")
            if top not in fields:
                continue
            if inner:
                nested = settings.get(top) or {}
                if not isinstance(nested, Mapping):  # an object: its fields as a mapping
                    import dataclasses

                    nested = dataclasses.asdict(nested)
                settings[top] = {**nested, inner: value}
            else:
                settings[top] = value
    settings.update({k: v for k, v in resolved.items() if k in fields})  # edit_at: only the modes that edit
    return suite.config(mode, settings)


def run_settings(path: str | Path, suite) -> tuple[str | None, dict[str, Any]]:
    """``(mode, settings)`` a finished run's config.yaml gives ``suite``'s record, its records left
    out and every value checked: the same run again from Python, ``studies.<suite>(**settings)``
    (a suite without a command re-runs this way). A config of another suite is one line."""
    from whitebox_eval.lazy import resolve
    from whitebox_eval.runs.settings import checked_settings, field_types

    data = read_user_file(path, "a run's config")
    if data.get("suite") not in (None, suite.name):
        raise WhiteboxError(f"{path} is a config of the {data['suite']} suite, not {suite.name}")
    mode = data.get("mode") if len(suite.modes) > 1 else None
    cls = resolve(suite.mode(mode).config)
    fields = field_types(cls)
    return mode, checked_settings(cls, {k: v for k, v in data.items() if k in fields}, str(path))


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
        help="YAML or JSON file of this command's options or its study's settings (keys are option or setting "
             "names, e.g. limit: 100, methods: [baseline, qk]), or a finished run's config.yaml to run it again; "
             "options given here win; an unknown key or a value of the wrong type is an error")(f)
