"""WaterBench grader: the detection grade at the pack's z-score threshold, with the generation
metric of the output against the case's reference in its metadata (``gm``, ``gm_metric``)."""

from evalrun.detection_grading import grade_with_generation_metric, prepare_detection as prepare


def grade(case, output, context):
    return grade_with_generation_metric(case, output, context)
