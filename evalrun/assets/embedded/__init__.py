"""Data directory for the embedded offline model(s) shipped with evalrun (see MODEL_CARD.md)."""
