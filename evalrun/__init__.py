"""evalrun: deterministic evaluation of LLM text watermarks and rule-following."""

from evalrun.grading import Grade

__version__ = "0.1.0"
__all__ = ["Grade", "__version__"]
