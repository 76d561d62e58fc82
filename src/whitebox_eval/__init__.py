"""whitebox-eval: evaluate language models from the inside."""

from whitebox_eval.errors import WhiteboxError

__version__ = "0.1.0"
__all__ = ["WhiteboxError", "__version__"]
