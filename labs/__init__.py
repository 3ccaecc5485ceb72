"""Hands-on MRC labs for a classroom: exercise folders, a checker, and grading of a class.

Each lab is a folder `labs/NN-slug/` in the manner of p4lang's tutorials:

- `README.md`: objectives, background, steps with exact commands, what to observe, questions;
- `lab.yaml`: title, duration in minutes, what it needs (`root`, `bmv2`, `p4c`), one-line summary;
- `skeleton/`: the files a student starts from (`mrc-testbed lab start N` copies them);
- `solution/`: the same files, done;
- `check.py`: `CHECKS`, the list of `labs.checking.Check` run on a student's folder.

- `key.py`: `NAMES` and `figures(lab, scratch)`, the figures the instructor guide quotes.

`labs.catalog` finds the labs, `labs.checking` runs checks, `labs.workspace` makes a student's work
folder, `labs.isolation` grades one folder in a child process (`labs.sandbox`) with time and memory
limits, `labs.originality` keeps the reference implementations and the solutions out of the graded
work, and `labs.grading` turns the results of a class into one CSV (or Gradescope's results.json).
`labs.transfers` runs transfers on netsim with a student's transport policies, for the checks of labs
3 and 4. `INSTRUCTORS.md` is the instructor guide; `labs.answer_key` regenerates its figures.
"""
