"""The omnidub command line: a thin shell over the library. Imported by nothing."""

# Each module registers its command on app; the order here is the order of the help's command list.
from omnidub.cli import bench, dub, eval, export, models, qa, render, review, translate, voices  # noqa: E402, F401, I001, A004
from omnidub.cli.app import app, main, set_threads

__all__ = ["app", "main", "set_threads"]
