"""The pipeline's stages, in order: generate, transform, judge, grade."""
