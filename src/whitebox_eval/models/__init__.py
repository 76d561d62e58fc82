"""Load and describe a model: bundled names, local folders, GGUF files, hub ids."""

from whitebox_eval.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "whitebox_eval.models.architectures": ["FAMILIES", "Architecture", "Family", "supported_model_types"],
    "whitebox_eval.models.bundled": ["BUNDLED", "MODEL_SPEC_HELP"],
    "whitebox_eval.models.loading": ["LoadedModel", "cache_root", "load_model"],
})
