"""The command layer's shared options (click), used by every suite's ``command.py`` and
``cli.py``: kept out of ``runs/`` so the run infrastructure stands on ``stats`` and
``errors`` alone (no ``tasks``, ``models`` or click). The options every study shares: its run
folder and the model's dtype, and
the options lm-eval users type under lm-eval's spelling: ``--tasks``,
``--num_fewshot``, ``--batch_size`` and ``--output_path`` are aliases of ``--task``,
``--shots``, ``--batch-size`` and ``--output`` (``--seed`` and ``--limit`` are spelled
alike); ``--log_samples`` is accepted (samples.jsonl is always written) and
``--gen_kwargs`` maps onto the generation options a command has. Each helper returns a
click decorator; ``--help`` lists both spellings."""

from __future__ import annotations

import click

from whitebox_eval.runs.run_ids import run_id_option


EDIT_HELP = ("run every pass under this edit (repeatable): ablate:14.0,L17H1 (zero heads), scale:14.0=0.5, "
             "neurons:5:10,20[=VALUE] (MLP neurons), steer:resid:12:v.pt*4 (add 4 x a vector from .pt/.safetensors/.npy "
             "at a point: resid_pre, resid, attn_out, mlp_out, mlp_act, head_out, or a hook name such as "
             "blocks.12.hook_resid_post), patch:resid:12:act.npy (set a point to a saved activation), sae:123,456=8:12=SAE or sae:123*0:12=SAE (clamp or scale SAE features, the "
             "SAE as mui --sae takes it, its error term kept), attn:14.0:last>first:add=0.5 (post-softmax attention "
             "from the last position to the first; modes add=C, force, copy=HEAD; keys also all, self, prev, a "
             "position); @last after a spec edits the last prompt position "
             "only; recorded in config.yaml; compare with the unedited run: whitebox-eval compare RUN_A RUN_B")


def edit_option(extra: str = "", own: tuple[str, ...] = ()):
    """``--edit SPEC`` (repeatable), read by :mod:`whitebox_eval.internals.edit_specs`: every study
    command's passes run under the edits (``extra``: what the command does with them; ``own``: spec
    kinds the command reads itself, e.g. gar's ``at:``). Each spec is read as the command line is,
    so a malformed one is one line before anything runs (``--batch-size auto``'s probe included)."""
    def read(ctx, param, value):
        if not value:  # no --edit: nothing to read, and torch is not imported for it
            return value
        from whitebox_eval.internals.edit_specs import parse_edit

        for spec in value or ():
            if str(spec).strip().partition(":")[0] not in own:
                parse_edit(spec)
        return value

    return click.option("--edit", "edits", multiple=True, metavar="SPEC", callback=read,
                        help=EDIT_HELP + (f"; {extra}" if extra else ""))


def parsed_edits(edits) -> tuple[str, ...]:
    """A config's ``edits`` field, read once (a malformed spec is one line, before any model work)."""
    from whitebox_eval.internals.edit_specs import parse_edit

    return tuple(parse_edit(e).text for e in (edits or ()))


def run_folder_options(f):
    """``--output``, ``--run-id`` and ``--resume`` (see :meth:`RunFolder.create`)."""
    for option in reversed([
        click.option("--output", "--output_path", "output", default="runs", show_default=True,
                     help="folder that receives the run folder (lm-eval: --output_path)"),
        click.option("--run-id", default=None, callback=run_id_option,
                     help="name of the run folder (default: time-suite-model-task)"),
        click.option("--resume", is_flag=True, help="continue the run folder --output/--run-id where it stopped"),
        log_samples_option,
    ]):
        f = option(f)
    return f


#: ``--log_samples`` (lm-eval's spelling): accepted and changes nothing, samples.jsonl is always written
log_samples_option = click.option(
    "--log_samples", "--log-samples", "log_samples", is_flag=True, expose_value=False,
    help="accepted for lm-eval's spelling: every run writes samples.jsonl (one line per item)")


def parse_gen_kwargs(text: str) -> dict:
    """lm-eval's ``--gen_kwargs``: ``k=v,k=v`` (``true``/``false`` booleans, numbers as
    numbers, the rest text, as lm-eval's ``simple_parse_args_string``), or a JSON object."""
    import json

    text = text.strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as error:
            raise click.BadParameter(f"not a JSON object: {error}", param_hint="--gen_kwargs") from None
        if not isinstance(data, dict):
            raise click.BadParameter("a JSON object of generation settings", param_hint="--gen_kwargs")
        return data
    out: dict = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{part!r} is not KEY=VALUE (e.g. temperature=0.7,max_gen_toks=64)",
                                     param_hint="--gen_kwargs")
        low = value.strip()
        if low.lower() in ("true", "false"):
            out[key.strip()] = low.lower() == "true"
            continue
        try:
            out[key.strip()] = int(low)
        except ValueError:
            try:
                out[key.strip()] = float(low)
            except ValueError:
                out[key.strip()] = value
    return out


def gen_kwargs_option(mapping: dict[str, str], fixed: dict | None = None, none: str | None = None):
    """``--gen_kwargs`` (lm-eval's spelling): each key set as the option ``mapping`` names
    (the command line's own option wins); ``fixed`` keys are accepted only at the one value
    this command computes with (``{key: (value, why)}``); any other key is refused in one
    line saying why (``none``: why this command generates nothing at all)."""
    fixed = fixed or {}

    def load(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
        if not value:
            return
        given = parse_gen_kwargs(value)
        into = {}
        for key, v in given.items():
            if key in mapping:
                into[mapping[key]] = list(v) if isinstance(v, (list, tuple)) else v
            elif key in fixed and (v == fixed[key][0] or (isinstance(v, (int, float)) and v == fixed[key][0])):
                continue
            elif key in fixed:
                raise click.BadParameter(f"{key}={v} has no meaning here: {fixed[key][1]}", param_hint="--gen_kwargs")
            elif none:
                raise click.BadParameter(f"{key} has no meaning here: {none}", param_hint="--gen_kwargs")
            else:
                known = sorted([*mapping, *fixed])
                raise click.BadParameter(f"{key} has no meaning for `whitebox-eval {ctx.command.name}` (it takes "
                                         f"{', '.join(known)})", param_hint="--gen_kwargs")
        for p in ctx.command.params:  # a repeatable option (--stop) takes a list
            if p.name in into and getattr(p, "multiple", False) and not isinstance(into[p.name], list):
                into[p.name] = [into[p.name]]
        ctx.default_map = {**(ctx.default_map or {}), **into}

    keys = ", ".join(f"{k} (--{o.replace('_', '-')})" for k, o in mapping.items())
    return click.option(
        "--gen_kwargs", "--gen-kwargs", "gen_kwargs", metavar="K=V,...", is_eager=True, expose_value=False,
        callback=load,
        help="lm-eval's generation settings, " + (f"mapped onto this command's options: {keys}; options given "
                                                  "here win" if mapping else f"refused here: {none}"))


def task_option(default: str | None, help: str, tasks: tuple[str, ...] | None = None, usage: str | None = None, **kw):
    """``--task`` (alias ``--tasks``, lm-eval's spelling; one task spec, not a comma list of names;
    ``multiple=True`` for commands that take several). With ``tasks`` (the suite's task names)
    the value is read here, once, into a :class:`whitebox_eval.tasks.spec.TaskSpec` that the
    command passes on; a bad one is one line."""
    def parse(ctx, param, value):
        if value is None or tasks is None:
            return value
        from whitebox_eval.tasks.spec import TaskSpec

        if isinstance(value, tuple):
            return tuple(TaskSpec.parse(v, tasks, usage) for v in value)
        return TaskSpec.parse(value, tasks, usage)

    return click.option("--task", "--tasks", "task", default=default, show_default=default is not None,
                        help=help + " (lm-eval: --tasks, one task here)", callback=parse, **kw)


def field_option(f):
    """``--field NAME=COLUMN`` (repeatable): the columns of your own file (``--task mcq=PATH``),
    checked here (:func:`whitebox_eval.tasks.mcq.parse_fields`) and kept as ``NAME=COLUMN`` texts;
    the study's spec carries them and config.yaml ``task_spec.fields`` records them."""
    def parse(ctx, param, value):
        from whitebox_eval.tasks.mcq import parse_fields

        return tuple(f"{name}={column}" for name, column in parse_fields(value or ()))

    return click.option("--field", "fields", multiple=True, metavar="NAME=COLUMN", callback=parse,
                        help="with --task mcq=PATH: the column holding NAME (question, choices, answer, context, subject, "
                             "id), e.g. --field question=prompt; per-choice columns as a comma list, --field "
                             "choices=opt1,opt2,opt3 (repeatable)")(f)


def lm_eval_data_option(f):
    """``--lm-eval-data DIR``: an ``lm-eval:TASK``'s dataset from local files, as lm-eval runs offline."""
    return click.option("--lm-eval-data", default=None, metavar="DIR",
                        help="with --task lm-eval:TASK: read the task's dataset from local files, DIR/<split>.jsonl (or "
                             "DIR/<task>/<split>.jsonl for a group's tasks) in the task's hub schema; a split without "
                             "a file is null (as lm-eval runs offline) [default: the task's hub dataset, online]")(f)


def shots_option(default, help: str, type=None):
    """``--shots`` (alias ``--num_fewshot``, lm-eval's spelling)."""
    return click.option("--shots", "--num_fewshot", "shots", type=type or click.IntRange(min=0), default=default,
                        show_default=True, help=help + " (lm-eval: --num_fewshot)")


def _batch_size(ctx, param, value):
    if value is None or isinstance(value, int):
        return value
    if str(value).strip().lower() == "auto":
        return "auto"
    try:
        size = int(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a whole number or 'auto'") from None
    if size < 1:
        raise click.BadParameter(f"{size} is not in the range x>=1")
    return size


def batch_size_option(help: str | None = None, default: int = 8):
    """``--batch-size`` (alias ``--batch_size``, lm-eval's spelling): a number, or ``auto``
    (:func:`resolved_batch_size`, once the model is known)."""
    return click.option("--batch-size", "--batch_size", "batch_size", type=str, default=default, callback=_batch_size,
                        metavar="N|auto", show_default=True,
                        help=((help + " ") if help else "") + "(lm-eval: --batch_size; auto = on a GPU the largest "
                             "batch whose white-box pass fits, probed once; on the CPU a size from the free memory and "
                             "the model's size; recorded in config.yaml; results never depend on it)")


#: ``--batch-size auto`` sizes already probed in this process, by (model, dtype): found once
_PROBED: dict[tuple[str, str], int] = {}


def _probes(device) -> bool:
    """Whether ``auto`` probes on ``device`` (a GPU) rather than applying the memory rule (the CPU:
    probing host memory would swap before it failed)."""
    return device.type == "cuda"


def resolved_batch_size(value: int | str, model: str, dtype: str = "float32", loaded=None) -> int:
    """``--batch-size`` as a number, ``auto`` resolved for ``model`` and said on stderr: on a GPU
    the largest batch whose white-box pass fits, probed once with the model the run then uses
    (``loaded``, or one loaded here and handed to the run: :mod:`whitebox_eval.internals.batch_probe`,
    :func:`~whitebox_eval.models.loading.hand_over`); elsewhere the memory rule of
    :mod:`whitebox_eval.models.batch_size`."""
    if value != "auto":
        return int(value)
    from whitebox_eval.runs.distributed import launched_size, world

    size = _auto_size(model, dtype, loaded)
    if launched_size() > 1:  # torchrun: shards are blocks of the batch size, every rank takes the smallest
        size = world().least(size)
        click.echo(f"--batch-size auto: {size} on every rank (the smallest any rank found)", err=True)
    return size


def _auto_size(model: str, dtype: str, loaded=None) -> int:
    """This process's ``auto`` size (:func:`resolved_batch_size`)."""
    from whitebox_eval.models.placement import PLACEMENT, resolve_device

    device = resolve_device(PLACEMENT.device) if loaded is None else loaded.device
    if _probes(device):
        if (model, dtype) not in _PROBED:
            from whitebox_eval.internals.batch_probe import PROBE_TOKENS, probe_batch_size
            from whitebox_eval.models.loading import hand_over, load_model

            given = loaded is not None
            loaded = loaded or load_model(model, dtype=dtype)
            _PROBED[model, dtype] = probe_batch_size(loaded)
            if not given:
                hand_over(loaded)  # the run's own load_model takes this one: the weights load once
            click.echo(f"--batch-size auto: {_PROBED[model, dtype]} (the largest batch whose white-box pass of "
                       f"{PROBE_TOKENS} tokens fitted on {device}, probed once)", err=True)
        return _PROBED[model, dtype]
    from whitebox_eval.models.batch_size import auto_batch_size, free_memory, rule_batch_size

    if loaded is None:
        size = auto_batch_size(model, dtype)
    else:  # the loaded model's own config and dtype
        from whitebox_eval.models.config_sizes import sizes_of_config

        weights = str(loaded.model.dtype).removeprefix("torch.")
        size = rule_batch_size(sizes_of_config(loaded.model.config), weights, free_memory(device))
    click.echo(f"--batch-size auto: {size} (from the memory free on the device and the model's size)", err=True)
    return size


#: the choices of --dtype (models.loading.DTYPES; repeated here so --help imports no torch)
DTYPE_CHOICES = ("auto", "float32", "bfloat16", "float16")


def dtype_option(f):
    """``--dtype`` (see :func:`whitebox_eval.models.loading.resolve_dtype`); config.yaml records
    the resolved name. Scores accumulate in float32 whatever the weights are."""
    return click.option(
        "--dtype", type=click.Choice(DTYPE_CHOICES), default="auto", show_default=True,
        help="weights' dtype: auto = float32 on CPU, the checkpoint's dtype on GPU; bfloat16 halves memory "
             "(scores, softmax, log-likelihoods and q.k products stay float32)",
    )(f)


def resolved_dtype(dtype: str, model: str) -> str:
    """The name config.yaml records for ``--dtype`` (``auto`` resolved for this model and device)."""
    from whitebox_eval.models.loading import resolve_dtype

    return resolve_dtype(dtype, model)


def model_load_options(f=None, *, models_root: bool = True):
    """The options of every command that loads a model: ``--models-root``, ``--model-arg``
    (repeatable), ``--adapter``, ``--adapter-mode``, ``--trust-remote-code``, ``--allow-pickle``,
    ``--device`` and ``--device-map`` (also accepted after the sub-command). They are checked before
    the command runs (:func:`whitebox_eval.models.load_check.configure`: bad input is one line,
    exit 2) and become the default of every model the command loads; config.yaml records them
    (``model_load``). ``models_root=False`` for a command with its own ``--models-root``."""
    import functools

    def decorate(fn):
        @functools.wraps(fn)
        def run(*args, **kw):
            from whitebox_eval.models.load_check import configure

            model = kw.get("model")
            configure(model if isinstance(model, str) else None,
                      models_root=kw.pop("models_root", None) if models_root else kw.get("models_root"),
                      model_args=kw.pop("model_args"), adapter=kw.pop("adapter"), adapter_mode=kw.pop("adapter_mode"),
                      trust_remote_code=kw.pop("trust_remote_code"), allow_pickle=kw.pop("allow_pickle"),
                      device=kw.pop("device"), device_map=kw.pop("device_map"))
            return fn(*args, **kw)

        options = [
            click.option("--model-arg", "--model_args", "model_args", multiple=True, metavar="KEY=VALUE",
                         help="passed to from_pretrained (repeatable, or a comma list as lm-eval's --model_args): load_in_4bit / load_in_8bit=true (bitsandbytes, "
                              "CUDA only), bnb_4bit_quant_type, bnb_4bit_use_double_quant, bnb_4bit_compute_dtype, "
                              "attn_implementation, revision, subfolder, low_cpu_mem_usage; recorded in config.yaml"),
            click.option("--adapter", default=None, metavar="PATH",
                         help="a PEFT LoRA adapter folder (adapter_config.json + adapter_model.safetensors) put on the "
                              "model; recorded with its SHA-256"),
            click.option("--adapter-mode", type=click.Choice(["merge", "keep"]), default="merge", show_default=True,
                         help="merge the adapter into the loaded weights, or keep its LoRA layers (needed with 4/8-bit)"),
            click.option("--trust-remote-code", is_flag=True, help="allow custom modelling code from the model folder"),
            click.option("--allow-pickle", is_flag=True, help="allow loading *.bin/*.pt pickle checkpoints (can run code)"),
            click.option("--device", default=None, metavar="DEVICE",
                         help="where the model runs (as before the sub-command): auto, cpu, cuda, cuda:N, mps"),
            click.option("--device-map", default=None, metavar="MAP",
                         help="split a model too large for one device over several (accelerate), e.g. auto"),
        ]
        if models_root:
            options.insert(0, click.option(
                "--models-root", default=None, metavar="DIR",
                help="folder of local model copies: ORG/NAME[@REVISION] is read from DIR/ORG--NAME[@REVISION] "
                     "(or the folder DIR/models.yaml maps it to) before the hub cache and the hub"))
        for option in reversed(options):
            run = option(run)
        return run

    return decorate if f is None else decorate(f)


def save_activations_option(positions: str):
    """``--save-activations POINT[:LAYERS][:POSITIONS]`` (repeatable): activations kept per item
    (:mod:`whitebox_eval.internals.activation_specs`); ``positions`` says which kinds this command has."""
    return click.option(
        "--save-activations", "save_activations", multiple=True, metavar="POINT[:LAYERS][:POSITIONS]",
        callback=_read_activations,
        help="keep these activations per item (repeatable), one safetensors file per spec under activations/, a "
             "tensor [layers, positions, width] per sample id, written through the resumable parts; its size is "
             "printed before the run and its shapes go into results.json. POINT: a capture point (resid, resid_pre, "
             "resid_mid, attn_out, mlp_out, head_out, mlp_act, q, k, v; resid:L is the residual leaving block L, "
             "transformers' hidden_states[L+1], the last block's taken before the final norm) or a TransformerLens / SAELens name "
             "(blocks.12.hook_resid_post); LAYERS: all (default), 12, 0-3,7; POSITIONS: " + positions +
             " (default last). E.g. resid:12:last, mlp_act:all:options")


def _read_activations(ctx, param, value):
    """Each ``--save-activations`` spec read as the command line is (its positions against the
    command's own kinds later, with the model's layers)."""
    if value:  # imported only when given: it imports torch
        from whitebox_eval.internals.activation_specs import parse_activations

        parse_activations(value)
    return value


class LimitType(click.ParamType):
    """``--limit``: a whole number of items, or a fraction below 1 (:mod:`whitebox_eval.runs.limits`)."""

    name = "N|F"

    def convert(self, value, param, ctx):
        from whitebox_eval.errors import WhiteboxError
        from whitebox_eval.runs.limits import USAGE, checked

        try:
            return checked(value)
        except WhiteboxError:
            self.fail(f"{value!r} is not {USAGE}", param, ctx)


#: ``type=LIMIT`` of every ``--limit``
LIMIT = LimitType()
