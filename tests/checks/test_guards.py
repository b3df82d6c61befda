"""The forbidden-API guard and the tamper guard."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import course_utils.grading as grading
from course_utils.grading import GradingError, TamperError, tamper
from torch.nn.functional import scaled_dot_product_attention as imported_sdpa

q = k = v = torch.randn(2, 3, 4)


def honest(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / 2.0, dim=-1) @ v


def via_attribute(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)


def via_direct_import(q, k, v):
    return imported_sdpa(q, k, v)


def via_nested_helper(q, k, v):
    def inner():
        return imported_sdpa(q, k, v)
    return inner()


def via_reference(q, k, v):
    from course_utils.reference import scaled_dot_product_attention
    return scaled_dot_product_attention(q, k, v)[0]


def test_honest_code_runs_and_returns_its_result():
    out = grading.call_without(honest, (q, k, v), forbidden=grading.ATTENTION_BUILTINS)
    assert torch.equal(out, honest(q, k, v))


@pytest.mark.parametrize("cheat", [via_attribute, via_direct_import, via_nested_helper])
def test_builtin_attention_is_caught(cheat):
    with pytest.raises(GradingError, match="scaled_dot_product_attention"):
        grading.call_without(cheat, (q, k, v), forbidden=grading.ATTENTION_BUILTINS, exercise="`attention`")


def test_the_reference_is_forbidden_too():
    with pytest.raises(GradingError, match="course_utils.reference"):
        grading.call_without(via_reference, (q, k, v), forbidden=grading.ATTENTION_BUILTINS)


def test_guard_restores_what_it_patched():
    before = F.scaled_dot_product_attention
    with pytest.raises(GradingError):
        grading.call_without(via_attribute, (q, k, v), forbidden=grading.ATTENTION_BUILTINS)
    assert F.scaled_dot_product_attention is before


@pytest.fixture
def restore():
    saved = []
    yield saved
    for module, name, value in saved:
        setattr(module, name, value)


def replace(restore, module, name, value):
    restore.append((module, name, getattr(module, name)))
    setattr(module, name, value)


@pytest.mark.parametrize("module, name", [
    (np, "allclose"), (np.testing, "assert_allclose"), (torch, "allclose"), (torch.testing, "assert_close"),
])
def test_reassigned_comparison_is_named(restore, module, name):
    tamper.verify()
    replace(restore, module, name, lambda *a, **k: True)
    with pytest.raises(TamperError, match=f"{module.__name__}.{name}"):
        grading.assert_close(np.zeros(2), np.ones(2))
    with pytest.raises(TamperError):
        grading.assert_true(True, "")


def test_reassigned_course_function_is_named(restore):
    import course_utils.grading.checks as checks
    replace(restore, grading, "assert_close", lambda *a, **k: None)
    replace(restore, checks, "mismatch", lambda *a, **k: None)
    names = tamper.tampered()
    assert "course_utils.grading.assert_close" in names
    assert "course_utils.grading.checks.mismatch" in names


def test_function_defined_in_a_notebook_and_planted_in_course_utils_is_caught(restore):
    import course_utils.reference.mistakes as mistakes
    fake = eval("lambda *a, **k: None", {"__name__": "__main__"})
    replace(restore, mistakes, "check", fake)
    assert "course_utils.reference.mistakes.check" in tamper.tampered()


def test_tampering_inside_the_students_function_is_caught(restore):
    def sneaky(q, k, v):
        restore.append((np, "allclose", np.allclose))
        np.allclose = lambda *a, **kw: True
        return honest(q, k, v)

    with pytest.raises(TamperError, match="numpy.allclose"):
        grading.call_without(sneaky, (q, k, v), forbidden=grading.ATTENTION_BUILTINS)


def test_clean_state_after_restoring():
    assert tamper.tampered() == []


def test_the_reference_may_use_itself():
    # Checking the reference against its own catalogue must not trip the guard.
    from course_utils.reference.attention import scaled_dot_product_attention as reference_sdpa
    out, _ = grading.call_without(reference_sdpa, (q, k, v), forbidden=grading.ATTENTION_BUILTINS)
    assert out.shape == v.shape


def test_catalogue_check_passes_the_reference_and_names_a_crash():
    from course_utils.reference.mistakes import self_attention as catalogue
    from course_utils.reference.attention import scaled_dot_product_attention as reference_sdpa
    catalogue.check("self_attention_sdpa_torch", reference_sdpa)

    def crashes(q, k, v, mask=None):
        scores = q @ k.T  # .T reverses every dimension of a batched tensor
        return scores, scores

    with pytest.raises(GradingError) as failure:
        catalogue.check("self_attention_sdpa_torch", crashes)
    message = str(failure.value)
    assert message.startswith("`scaled_dot_product_attention` raised RuntimeError")
    assert "q @ k.T" in message and "shape (" in message


def test_a_crash_in_student_code_is_one_sentence_pointing_at_their_line():
    def student(q, k, v):
        scores = q @ k  # forgot the transpose
        return scores

    with pytest.raises(GradingError) as failure:
        grading.call_without(student, (torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 3)),
                             forbidden=grading.ATTENTION_BUILTINS, hint="transpose k")
    message = str(failure.value)
    assert message.startswith("`student` raised RuntimeError")
    assert "shape (2, 3), shape (2, 3), shape (2, 3)" in message
    assert "`scores = q @ k  # forgot the transpose`" in message and message.endswith("transpose k.")
    assert failure.value.__cause__ is None and failure.value.__suppress_context__


def test_the_method_form_of_a_builtin_is_caught_and_restored():
    def via_method(x):
        return x.softmax(-1)

    own_before = "softmax" in vars(torch.Tensor)
    with pytest.raises(GradingError, match=r"torch\.Tensor\.softmax"):
        grading.call_without(via_method, (torch.randn(2, 3),), forbidden=grading.SOFTMAX_BUILTINS)
    assert ("softmax" in vars(torch.Tensor)) == own_before
    assert torch.allclose(torch.randn(2, 3).softmax(-1).sum(-1), torch.ones(2))


def test_a_catalogued_mistake_that_crashes_on_a_case_is_simply_not_the_match():
    from course_utils.reference.mistakes import Exercise, Mistake

    def crashes(x):
        raise IndexError("this mistake only runs on square inputs")

    exercise = Exercise(
        grade_id="demo_double", function_name="double", reference=lambda x: 2 * x,
        make_cases=lambda seed: [((np.arange(3.0),), {})],
        mistakes=(Mistake("crashy", "never named", crashes), Mistake("triple", "you tripled it", lambda x: 3 * x)),
    )
    with pytest.raises(GradingError, match="you tripled it"):
        exercise.check(lambda x: 3 * x)
    with pytest.raises(GradingError, match="wrong answer on a hidden test case"):
        exercise.check(lambda x: 4 * x)
