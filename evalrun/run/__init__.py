"""Running a plan: options, the plan of items, the pipeline and its stages, executors and
regrading."""
