"""Lab 2's figures for the instructor guide (labs/answer_key.py): how many conformance cases the
checker runs on BMv2 (counted from the case files; running them needs the VM)."""
NAMES = ("cases",)


def figures(lab, scratch):
    from conformance.case import CASES_DIR, load_cases
    check = lab.check_module()
    cases = [c for c in load_cases(CASES_DIR) if c.source == check.CASE_FILE or "trim" in c.name]
    return {"cases": str(len(cases))}
