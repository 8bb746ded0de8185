"""Models: the provider protocol and registry, generation types, tokenizers, the embedded
offline model and text embeddings."""
