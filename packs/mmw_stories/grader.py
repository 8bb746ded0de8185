from evalrun.detection_grading import grade_detection, prepare_detection as prepare

def grade(case, output, context): return grade_detection(case, output, context)
