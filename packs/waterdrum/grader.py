from evalrun.unlearning.grading import grade_verification

def grade(case, output, context): return grade_verification(case, output, context)
