"""The command-line options every study shares: its run folder and the model's dtype."""

from __future__ import annotations

import click


def run_folder_options(f):
    """``--output``, ``--run-id`` and ``--resume`` (see :meth:`RunFolder.create`)."""
    for option in reversed([
        click.option("--output", default="runs", show_default=True, help="folder that receives the run folder"),
        click.option("--run-id", default=None, help="name of the run folder (default: time-suite-model-task)"),
        click.option("--resume", is_flag=True, help="continue the run folder --output/--run-id where it stopped"),
    ]):
        f = option(f)
    return f


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
