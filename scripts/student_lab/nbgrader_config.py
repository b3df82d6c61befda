# The course's Validate: one line per exercise with the test's own sentence (course_utils/validation.py)
# instead of nbgrader's test cell source and traceback. nbgrader reads this file from every folder
# of jupyter_config_path(): `make lab` has this folder on JUPYTER_CONFIG_PATH, and
# scripts/setup_lab.py copies it into the environment's etc/jupyter/nbgrader_config.py, so Validate
# says the same wherever JupyterLab or `nbgrader validate` starts (workspace/, a notebook's folder,
# a hub's home). The course is imported on the first validation, not here: other nbgrader commands
# (generate_assignment, the hub's exchange) do not pay for importing PyTorch.
c = get_config()  # noqa: F821


def _attention_course_validate():
    try:
        from nbgrader.validator import Validator
    except ImportError:
        return
    if getattr(Validator, "_course_patched", False) or getattr(Validator, "_course_deferred", False):
        return
    originals = {name: getattr(Validator, name) for name in ("validate", "validate_and_print")}

    def on_first_use(name):
        def call(self, *args, **kwargs):
            if getattr(Validator, "_course_patched", False):
                # course_utils.validation.install() ran after this file (another nbgrader_config.py
                # called it) and wraps this function: hand over to nbgrader's own method.
                return originals[name](self, *args, **kwargs)
            for original_name, original in originals.items():
                setattr(Validator, original_name, original)
            Validator._course_deferred = False
            try:
                from course_utils import validation
            except ImportError:  # an environment without the course: nbgrader's own report
                return originals[name](self, *args, **kwargs)
            validation.install()
            return getattr(Validator, name)(self, *args, **kwargs)
        return call

    for name in originals:
        setattr(Validator, name, on_first_use(name))
    Validator._course_deferred = True


_attention_course_validate()
