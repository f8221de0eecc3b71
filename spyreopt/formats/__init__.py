"""External benchmark formats: readers into the Formulation and their own exact evaluators."""

from spyreopt.formats.iopddl import evaluate_iopddl, load_iopddl, save_solution

__all__ = ["evaluate_iopddl", "load_iopddl", "save_solution"]
