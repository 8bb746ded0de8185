"""Analyses built on runs: WaterBench's strength search (tune), MarkMyWords' aggregate sweep,
and distinguishability classifiers."""
