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


@pytest.mark.parametrize("change", ["new_function", "replaced_function", "new_module"])
def test_a_reference_function_that_appears_after_a_guarded_call_is_forbidden_too(change):
    """The guard remembers each reference module's functions while the module is unchanged; a
    function added to one, or a reference module loaded since, is seen at the next call."""
    import sys
    import types

    import course_utils.reference.attention as attention
    planted = eval("lambda q, k, v: (q, None)", {"__name__": "course_utils.reference.attention"})
    grading.call_without(honest, (q, k, v), forbidden=grading.ATTENTION_BUILTINS)  # remembered now
    name = "scaled_dot_product_attention" if change == "replaced_function" else "shortcut"
    saved = getattr(attention, name, None)
    if change in ("new_function", "replaced_function"):
        setattr(attention, name, planted)
        holder = attention
    else:
        holder = types.ModuleType("course_utils.reference.late_topic")
        holder.shortcut = planted
        sys.modules[holder.__name__] = holder

    def via_shortcut(q, k, v):
        return getattr(holder, name)(q, k, v)[0]

    try:
        with pytest.raises(GradingError, match=f"{holder.__name__}.{name}".replace(".", r"\.")):
            grading.call_without(via_shortcut, (q, k, v), forbidden=grading.ATTENTION_BUILTINS)
    finally:
        if change == "new_function":
            del attention.shortcut
        elif change == "replaced_function":
            attention.scaled_dot_product_attention = saved
        else:
            del sys.modules[holder.__name__]


def test_guard_restores_what_it_patched():
    before = F.scaled_dot_product_attention
    with pytest.raises(GradingError):
        grading.call_without(via_attribute, (q, k, v), forbidden=grading.ATTENTION_BUILTINS)
    assert F.scaled_dot_product_attention is before


def test_a_forbidden_function_kept_from_an_earlier_call_is_caught_later_and_harmless_outside():
    """What a guarded call patches in is the recorder of that function; a student's function can
    keep it (reading the name is allowed) and call it in a later guarded call, or outside one."""
    kept = []

    def keeps_it(q, k, v):
        kept.append(F.scaled_dot_product_attention)
        return honest(q, k, v)

    grading.call_without(keeps_it, (q, k, v), forbidden=grading.ATTENTION_BUILTINS)
    assert kept[0] is not imported_sdpa  # it kept the recorder, not the function
    assert torch.allclose(kept[0](q, k, v), imported_sdpa(q, k, v))  # outside a guarded call: no effect
    with pytest.raises(GradingError, match="scaled_dot_product_attention"):
        grading.call_without(lambda q, k, v: kept[0](q, k, v), (q, k, v), forbidden=grading.ATTENTION_BUILTINS)
    # Where the function is not forbidden, the kept copy is judged as the function itself would be.
    for forbidden in (grading.SOFTMAX_BUILTINS, grading.AUTOGRAD_BUILTINS):
        outcomes = []
        for call in (kept[0], imported_sdpa):
            try:
                grading.call_without(lambda q, k, v: call(q, k, v), (q, k, v), forbidden=forbidden)
                outcomes.append("passed")
            except GradingError as error:
                outcomes.append(str(error))
        assert outcomes[0] == outcomes[1]


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
    (np, "array"),  # every comparison makes arrays of what it compares: zeros everywhere would pass
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


@pytest.mark.parametrize("plant", ["replace", "add", "delete_and_add", "module", "new_module",
                                   "new_module_in_place_of_another"])
def test_a_plant_after_a_clean_check_is_caught_however_it_is_made(plant):
    """verify() remembers the modules it found clean; a change of any kind after that is seen."""
    import sys
    import types

    import course_utils.grading.checks as checks
    fake = eval("lambda *a, **k: None", {"__name__": "__main__"})
    tamper.verify()
    tamper.verify()  # the second call answers from what the first remembered
    saved = checks.mismatch
    if plant == "replace":
        checks.mismatch = fake
        expected = "course_utils.grading.checks.mismatch"
    elif plant == "add":
        checks.planted = fake
        expected = "course_utils.grading.checks.planted"
    elif plant == "delete_and_add":  # the same number of names, one of them new
        del checks.mismatch
        checks.planted = fake
        expected = "course_utils.grading.checks.planted"
    elif plant == "module":  # the module swapped in sys.modules for one of the notebook's
        original = sys.modules["course_utils.grading.checks"]
        impostor = types.ModuleType("course_utils.grading.checks")
        impostor.mismatch = fake
        sys.modules["course_utils.grading.checks"] = impostor
        expected = "course_utils.grading.checks.mismatch"
    else:  # a course_utils module that was never imported, planted before its first import
        if plant == "new_module_in_place_of_another":  # with as many modules loaded as before
            import colorsys
            tamper.verify()
            del sys.modules["colorsys"]
        impostor = types.ModuleType("course_utils.planted_catalogue")
        impostor.check = fake
        sys.modules["course_utils.planted_catalogue"] = impostor
        expected = "course_utils.planted_catalogue.check"
    try:
        with pytest.raises(TamperError, match=expected.replace(".", r"\.")):
            tamper.verify()
        with pytest.raises(TamperError, match=expected.replace(".", r"\.")):
            tamper.verify()  # and again: a module found tampered is not remembered as clean
    finally:
        if plant in ("add", "delete_and_add"):
            del checks.planted
        checks.mismatch = saved
        if plant == "module":
            sys.modules["course_utils.grading.checks"] = original
        if plant.startswith("new_module"):
            del sys.modules["course_utils.planted_catalogue"]
        if plant == "new_module_in_place_of_another":
            sys.modules["colorsys"] = colorsys
    assert tamper.tampered() == []


def test_a_plant_made_while_the_guard_reads_a_module_is_caught_next_time():
    """The guard reads each value's __module__: a property of the student's can run then, and
    change the module being read. What was read is what is remembered, so the change is seen."""
    import course_utils.grading.checks as checks
    fake = eval("lambda *a, **k: None", {"__name__": "__main__"})

    class Sly:
        def __call__(self):
            return None

        @property
        def __module__(self):
            checks.planted_late = fake
            return "somewhere_else"

    checks.sly = Sly()
    try:
        tamper.tampered()  # reads sly, which plants planted_late meanwhile
        assert "course_utils.grading.checks.planted_late" in tamper.tampered()
    finally:
        del checks.sly
        checks.__dict__.pop("planted_late", None)
    assert tamper.tampered() == []


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


# ---------------------------------------------------------------------------------------------
# A forbidden route is forbidden under every name it has: the same object under another module's
# name, the same operator under another function, and (for derivatives) every autograd entry.

def _softmax_routes():
    import scipy.special

    return {
        "torch.softmax": lambda z: torch.softmax(z, -1),
        "Tensor.softmax": lambda z: z.softmax(-1),
        "F.softmax": lambda z: F.softmax(z, dim=-1),
        "F.log_softmax": lambda z: F.log_softmax(z, dim=-1).exp(),
        "F.softmin": lambda z: F.softmin(-z, dim=-1),
        "torch.special.softmax": lambda z: torch.special.softmax(z, -1),
        "torch.special.log_softmax": lambda z: torch.special.log_softmax(z, -1).exp(),
        "torch._softmax": lambda z: torch._softmax(z, -1, False),
        "TensorBase.softmax": lambda z: torch._C.TensorBase.softmax(z, -1),
        "torch.ops.aten._softmax": lambda z: torch.ops.aten._softmax(z, -1, False),
        "nn.Softmax": lambda z: torch.nn.Softmax(dim=-1)(z),
        "scipy.special.softmax": lambda z: torch.as_tensor(scipy.special.softmax(z.numpy(), axis=-1)),
        "scipy.special.log_softmax": lambda z: torch.as_tensor(np.exp(scipy.special.log_softmax(z.numpy(), axis=-1))),
    }


@pytest.mark.parametrize("route", list(_softmax_routes()))
def test_every_name_of_softmax_is_caught(route):
    cheat = _softmax_routes()[route]
    with pytest.raises(GradingError, match="off limits"):
        grading.call_without(cheat, (torch.randn(3, 4),), forbidden=grading.SOFTMAX_BUILTINS)
    assert torch.allclose(torch.softmax(torch.zeros(2), -1), torch.full((2,), 0.5))  # restored


@pytest.mark.parametrize("route", [
    lambda z: torch._C._VariableFunctions.softmax(z, -1),  # a namespace no recorder can patch
    lambda z: torch._VF.softmax(z, -1),
])
def test_softmax_through_an_unpatchable_namespace_is_caught(route):
    """Only the torch-function net sees these: torch._C._VariableFunctions is read-only, and
    without the "aten::" entries (a composite operator has none) no dispatch mode would."""
    no_operators = tuple(entry for entry in grading.SOFTMAX_BUILTINS if "::" not in entry)
    with pytest.raises(GradingError, match="torch.softmax"):
        grading.call_without(route, (torch.randn(3, 4),), forbidden=no_operators)


def test_the_torch_function_net_names_a_patched_call_once():
    called = []
    with grading.guards._recording(("torch:softmax",), called):
        torch.softmax(torch.randn(2, 3), -1)
    assert called == ["torch.softmax"]


def test_softmax_from_scikit_learn_is_caught_once_imported():
    from sklearn.utils.extmath import softmax as sk_softmax

    def cheat(z):
        return sk_softmax(z.copy())

    with pytest.raises(GradingError, match="sklearn.utils.extmath.softmax"):
        grading.call_without(cheat, (np.random.default_rng(0).standard_normal((3, 4)),),
                             forbidden=grading.SOFTMAX_BUILTINS)


def test_a_softmax_built_from_exp_passes_the_softmax_guard():
    def honest_softmax(z):
        e = torch.exp(z - z.amax(-1, keepdim=True))
        return e / e.sum(-1, keepdim=True)

    z = torch.randn(3, 4, requires_grad=True)
    out = grading.call_without(honest_softmax, (z,), forbidden=grading.SOFTMAX_BUILTINS)
    out.sum().backward()  # the guard is gone: its backward may run anything
    assert torch.allclose(out, torch.softmax(z, -1))


_images = torch.randn(2, 3, 8, 8, dtype=torch.float64)
_kernel = torch.randn(4, 3, 2, 2, dtype=torch.float64)


def _conv_routes():
    return {
        "F.conv2d": lambda x, w: F.conv2d(x, w, stride=2),
        "torch.conv2d": lambda x, w: torch.conv2d(x, w, stride=2),
        "torch._C._VariableFunctions.conv2d": lambda x, w: torch._C._VariableFunctions.conv2d(x, w, stride=2),
        "torch.convolution": lambda x, w: torch.convolution(x, w, None, [2, 2], [0, 0], [1, 1], False, [0, 0], 1),
        "torch.ops.aten.convolution": lambda x, w: torch.ops.aten.convolution(
            x, w, None, [2, 2], [0, 0], [1, 1], False, [0, 0], 1),
        "nn.Conv2d": lambda x, w: torch.nn.Conv2d(3, 4, 2, stride=2, bias=False).double()(x),
        "nn.modules.conv.Conv2d": lambda x, w: torch.nn.modules.conv.Conv2d(3, 4, 2, stride=2).double()(x),
        "nn.LazyConv2d": lambda x, w: torch.nn.LazyConv2d(4, 2, stride=2).double()(x),
    }


@pytest.mark.parametrize("route", list(_conv_routes()))
def test_every_name_of_the_convolution_is_caught(route):
    with pytest.raises(GradingError, match="off limits"):
        grading.call_without(_conv_routes()[route], (_images, _kernel), forbidden=grading.CONV_BUILTINS)


def _unfold_routes():
    return {
        "F.unfold": lambda x: F.unfold(x, 2, stride=2),
        "nn.Unfold": lambda x: torch.nn.Unfold(2, stride=2)(x),
        "torch._C._nn.im2col": lambda x: torch._C._nn.im2col(x, [2, 2], [1, 1], [0, 0], [2, 2]),
        "torch.ops.aten.im2col": lambda x: torch.ops.aten.im2col(x, [2, 2], [1, 1], [0, 0], [2, 2]),
    }


@pytest.mark.parametrize("route", list(_unfold_routes()))
def test_every_name_of_unfold_is_caught(route):
    with pytest.raises(GradingError, match="off limits"):
        grading.call_without(_unfold_routes()[route], (_images,), forbidden=grading.UNFOLD_BUILTINS)


def test_reshapes_and_the_strided_view_pass_the_image_guards():
    def patches_by_view(x):  # Tensor.unfold is a strided view of one axis, not im2col: allowed
        return x.unfold(2, 2, 2).unfold(3, 2, 2).permute(0, 2, 3, 1, 4, 5).reshape(2, 16, 12)

    def patches_by_reshape(x):
        return x.reshape(2, 3, 4, 2, 4, 2).permute(0, 2, 4, 1, 3, 5).reshape(2, 16, 12)

    forbidden = grading.CONV_BUILTINS + grading.UNFOLD_BUILTINS
    a = grading.call_without(patches_by_view, (_images,), forbidden=forbidden)
    b = grading.call_without(patches_by_reshape, (_images,), forbidden=forbidden)
    assert torch.equal(a, b)


def _softmax_of(t):
    return torch.exp(t) / torch.exp(t).sum(-1, keepdim=True)


def _jacobian_by_grad(z):
    z = z.clone().requires_grad_(True)
    s = _softmax_of(z)
    return torch.stack([torch.autograd.grad(s[..., i].sum(), z, retain_graph=True)[0]
                        for i in range(s.shape[-1])], dim=-2)


def _jacobian_by_backward(z):
    rows = []
    for i in range(z.shape[-1]):
        leaf = z.clone().requires_grad_(True)
        _softmax_of(leaf)[..., i].sum().backward()
        rows.append(leaf.grad)
    return torch.stack(rows, dim=-2)


def _jacobian_by_engine(z):
    leaf = z.clone().requires_grad_(True)
    out = _softmax_of(leaf)[..., 0].sum()
    torch.autograd.backward(out)
    return leaf.grad


def _jacobian_by_forward_mode(z):
    import torch.autograd.forward_ad as fwAD
    with fwAD.dual_level():
        dual = fwAD.make_dual(z, torch.ones_like(z))
        return fwAD.unpack_dual(_softmax_of(dual)).tangent


def _autograd_routes():
    return {
        "torch.autograd.grad": _jacobian_by_grad,
        "Tensor.backward": _jacobian_by_backward,
        "torch.autograd.backward": _jacobian_by_engine,
        "torch.autograd.functional.jacobian": lambda z: torch.autograd.functional.jacobian(_softmax_of, z),
        "torch.func.jacrev": lambda z: torch.func.jacrev(_softmax_of)(z),
        "torch.func.jacfwd": lambda z: torch.func.jacfwd(_softmax_of)(z),
        "torch.func.vjp": lambda z: torch.func.vjp(_softmax_of, z)[1](torch.ones_like(z))[0],
        "torch.func.hessian": lambda z: torch.func.hessian(lambda t: _softmax_of(t).sum())(z),
        "torch._functorch.eager_transforms.jacrev": lambda z: torch._functorch.eager_transforms.jacrev(_softmax_of)(z),
        "forward-mode make_dual": _jacobian_by_forward_mode,
    }


@pytest.mark.parametrize("route", list(_autograd_routes()))
def test_every_autograd_route_is_caught(route):
    with pytest.raises(GradingError, match="off limits"):
        grading.call_without(_autograd_routes()[route], (torch.randn(5, dtype=torch.float64),),
                             forbidden=grading.AUTOGRAD_BUILTINS)
    assert torch.autograd.grad((torch.ones(1, requires_grad=True) * 2).sum(),
                               [torch.ones(1, requires_grad=True)], allow_unused=True) == (None,)


def test_only_the_outermost_forbidden_call_is_named():
    with pytest.raises(GradingError) as failure:
        grading.call_without(lambda z: torch.autograd.functional.jacobian(_softmax_of, z),
                             (torch.randn(4, dtype=torch.float64),), forbidden=grading.AUTOGRAD_BUILTINS)
    assert "uses torch.autograd.functional.jacobian:" in str(failure.value)


def test_the_shipped_demo_code_is_off_limits_where_it_computes_an_answer():
    """Notebook 11's widgets filter distributions for the demos; an answer that calls them is
    using someone else's answer, and the hidden check says so."""
    from course_utils.grading import GradingError
    from course_utils.reference.mistakes import fast_generation as catalogue
    from course_utils.widgets import fast_generation as demo

    def top_k_probs(logits, k, temperature=1.0):
        return demo.next_token_distribution(logits, temperature=temperature, k=k)

    with pytest.raises(GradingError, match="next_token_distribution"):
        catalogue.check("fast_generation_top_k", top_k_probs)
