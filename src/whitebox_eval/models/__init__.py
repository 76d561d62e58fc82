"""Load and describe a model: bundled names, local folders, GGUF files, hub ids."""

from whitebox_eval.models.architectures import FAMILIES, Architecture, Family, supported_model_types
from whitebox_eval.models.bundled import BUNDLED, MODEL_SPEC_HELP
from whitebox_eval.models.loading import LoadedModel, cache_root, load_model

__all__ = ["FAMILIES", "Architecture", "Family", "supported_model_types", "BUNDLED", "MODEL_SPEC_HELP", "LoadedModel", "cache_root", "load_model"]
