from evalrun.detection_grading import grade_detection

def grade(case, output, context): return grade_detection(case, output, context)
