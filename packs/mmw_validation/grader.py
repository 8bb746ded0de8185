from evalrun.pack.detection_grader import grade_detection
from evalrun.pack.detection_grader import prepare_detection as prepare


def grade(case, output, context): return grade_detection(case, output, context)
