"""``--adapter PATH``: a PEFT LoRA folder put on the loaded model, merged into its weights (the
default: the engine then reads an ordinary model) or kept as LoRA layers (``keep``: every hook
sees base + LoRA; weights read outside a forward, such as MUI's down projections, are the base's)."""

from __future__ import annotations

import warnings
from pathlib import Path

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.models.load_options import adapter_files, check_adapter_fits

#: the one warning silenced: transformers' FutureWarning on peft reading ``is_gradient_checkpointing``
GRADIENT_CHECKPOINTING_WARNING = r"`is_gradient_checkpointing` is deprecated"


def attach_adapter(model, path: str | Path, mode: str = "merge", allow_pickle: bool = False):
    """``model`` with the adapter at ``path``: merged (``merge``) or with its LoRA layers (``keep``)."""
    _, weights = adapter_files(path, allow_pickle)
    check_adapter_fits(path, weights, model.config.to_dict())
    try:
        from peft import PeftModel
    except ImportError:
        raise WhiteboxError("--adapter needs peft: pip install peft") from None
    with warnings.catch_warnings():  # peft reads transformers' deprecated name: a FutureWarning on every run
        warnings.filterwarnings("ignore", message=GRADIENT_CHECKPOINTING_WARNING, category=FutureWarning)
        try:
            wrapped = PeftModel.from_pretrained(model, str(Path(path).expanduser()), is_trainable=False)
        except (RuntimeError, ValueError, KeyError) as e:
            raise WhiteboxError(f"--adapter {path} does not fit this model ({type(e).__name__}: "
                                f"{str(e).splitlines()[0]}); give the adapter trained on it") from None
        if mode == "merge":
            return wrapped.merge_and_unload()
        return wrapped.base_model.model
