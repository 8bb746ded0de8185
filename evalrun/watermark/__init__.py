"""Watermark engine: schemes (randomness x sampling x score), detection and null models."""

from evalrun.watermark.base import Detection, WatermarkScheme
from evalrun.watermark.registry import is_none, parse_watermark

__all__ = ["Detection", "WatermarkScheme", "is_none", "parse_watermark"]
