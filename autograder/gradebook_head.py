"""The revision nbgrader stamps on a new gradebook, read in this process.

Why: when nbgrader's Gradebook creates a database it asks the `alembic` command for the head
revision of nbgrader's migration scripts (nbgrader.api.get_alembic_version): a second Python
that imports alembic and SQLAlchemy, about 1 s of CPU for every new gradebook. A batch makes one
or two (an assignment's template and the course's gradebook), the grading tests dozens (66
`alembic` processes in one `make test`). The answer depends only on the installed nbgrader, so
it is read once per process from the same scripts with alembic's own API, and `install` makes
nbgrader use that.
"""
import functools


@functools.lru_cache(maxsize=None)
def head():
    """The head revision of nbgrader's migration scripts (what `alembic heads` prints first)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from nbgrader import dbutil

    config = Config()
    config.set_main_option("script_location", dbutil.ALEMBIC_DIR)
    return ScriptDirectory.from_config(config).get_current_head()


def install():
    """Make nbgrader stamp new gradebooks with `head()` instead of running the command."""
    import nbgrader.api

    nbgrader.api.get_alembic_version = head
