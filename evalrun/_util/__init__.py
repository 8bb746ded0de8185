"""Small pieces every other part uses: the registry, the spec grammar, hashing, JSON lines,
user-facing errors, provenance. Nothing here imports another part of evalrun."""
